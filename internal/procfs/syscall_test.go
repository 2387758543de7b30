package procfs_test

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestParseSyscall(t *testing.T) {
	good := []struct {
		in   string
		want procfs.Syscall
	}{
		{"running\n", procfs.Syscall{Running: true, Nr: -1}},
		{"-1 0x7ffd1 0x7f2\n", procfs.Syscall{Nr: -1, SP: 0x7ffd1, PC: 0x7f2}},
		{"0 0x0 0x55b14203a000 0x400 0x0 0x7 0x55b1499d9520 0x7ffde223b6f8 0x7f1d261fe2ad\n",
			procfs.Syscall{Nr: 0, Args: [6]uint64{0, 0x55b14203a000, 0x400, 0, 7, 0x55b1499d9520}, SP: 0x7ffde223b6f8, PC: 0x7f1d261fe2ad}},
		{"270 0x1 0x7ffd 0x0 0x0 0x0 0x7ffe 0x7ffc 0xAB", procfs.Syscall{Nr: 270, Args: [6]uint64{1, 0x7ffd, 0, 0, 0, 0x7ffe}, SP: 0x7ffc, PC: 0xab}},
	}
	for _, c := range good {
		got, err := procfs.ParseSyscall([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "runnin", "0 0x1", "0 0x1 0x2 0x3 0x4 0x5 0x6 0x7", "x 0x1 0x2", "-1 0x1",
		"0 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 0x9", "0 0xg 0x2 0x3 0x4 0x5 0x6 0x7 0x8", "0 0x11111111111111111 0 0 0 0 0 0 0"} {
		if s, err := procfs.ParseSyscall([]byte(in)); err == nil {
			t.Errorf("%q parsed as %+v", in, s)
		}
	}
	if testing.AllocsPerRun(100, func() { _, _ = procfs.ParseSyscall([]byte(good[2].in)) }) > 1 {
		t.Error("ParseSyscall allocates on well-formed input")
	}
}

// The reader re-reads through one descriptor: a sleep is seen in its
// system call, again and again, and gone once it exits.
func TestSyscallReader(t *testing.T) {
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r, err := procfs.OpenSyscall(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const clockNanosleep = 230
	for range 3 {
		testkit.Eventually(t, "sleep blocked in clock_nanosleep", func() (bool, string) {
			s, err := r.Read()
			return err == nil && s.Blocked() && s.Nr == clockNanosleep, fmt.Sprintf("%v %v", s, err)
		})
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if s, err := r.Read(); err == nil {
		t.Errorf("read of a reaped process: %v", s)
	}
}
