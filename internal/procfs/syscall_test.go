package procfs

import (
	"os"
	"testing"
)

func TestParseSyscall(t *testing.T) {
	good := []struct {
		in   string
		want Syscall
	}{
		{"running\n", Syscall{Running: true, Nr: -1}},
		{"-1 0x7ffd1 0x7f2\n", Syscall{Nr: -1, SP: 0x7ffd1, PC: 0x7f2}},
		{"0 0x0 0x55b14203a000 0x400 0x0 0x7 0x55b1499d9520 0x7ffde223b6f8 0x7f1d261fe2ad\n",
			Syscall{Nr: 0, Args: [6]uint64{0, 0x55b14203a000, 0x400, 0, 7, 0x55b1499d9520}, SP: 0x7ffde223b6f8, PC: 0x7f1d261fe2ad}},
		{"270 0x1 0x7ffd 0x0 0x0 0x0 0x7ffe 0x7ffc 0xAB", Syscall{Nr: 270, Args: [6]uint64{1, 0x7ffd, 0, 0, 0, 0x7ffe}, SP: 0x7ffc, PC: 0xab}},
	}
	for _, c := range good {
		got, err := ParseSyscall([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "runnin", "0 0x1", "0 0x1 0x2 0x3 0x4 0x5 0x6 0x7", "x 0x1 0x2", "-1 0x1",
		"0 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 0x9", "0 0xg 0x2 0x3 0x4 0x5 0x6 0x7 0x8", "0 0x11111111111111111 0 0 0 0 0 0 0"} {
		if s, err := ParseSyscall([]byte(in)); err == nil {
			t.Errorf("%q parsed as %+v", in, s)
		}
	}
	if testing.AllocsPerRun(100, func() { _, _ = ParseSyscall([]byte(good[2].in)) }) > 1 {
		t.Error("ParseSyscall allocates on well-formed input")
	}
}

// The reader re-reads through one descriptor; our own main thread is
// running while it reads itself.
func TestSyscallReader(t *testing.T) {
	r, err := OpenSyscall(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 3 {
		s, err := r.Read()
		if err != nil || !s.Running {
			t.Fatalf("%+v %v", s, err)
		}
	}
}
