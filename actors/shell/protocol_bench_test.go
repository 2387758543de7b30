package shell

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// What the protocol costs bash, without actors or ptyproc: bash on a PTY
// driven from one goroutine with blocking reads, once with this package's
// init and command lines, once with a bare printf PROMPT_COMMAND and the
// plain command (bench's floor). bash-cpu-ns/op is the time bash itself
// spent on a CPU (/proc/PID/schedstat), steadier than the wall time on a
// shared machine.
func BenchmarkProtocolBashSide(b *testing.B) {
	b.Run("protocol", func(b *testing.B) {
		p := newProtocol()
		benchBashSide(b, p.initLine(), func(seq uint64) []byte { return p.commandLine(seq, "echo hi") }, p.lead)
	})
	b.Run("bare-printf", func(b *testing.B) {
		benchBashSide(b, []byte(`set +H +o history; q=; PROMPT_COMMAND='printf "\036M:%s:%s\036" "$q" $?'`+"\n"),
			func(seq uint64) []byte { return []byte("q=" + strconv.FormatUint(seq, 10) + "; echo hi\n") }, []byte("\x1eM:"))
	})
}

func benchBashSide(b *testing.B, init []byte, line func(seq uint64) []byte, lead []byte) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		b.Fatal(err)
	}
	defer ptmx.Close()
	t, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		b.Fatal(err)
	}
	t.Lflag &^= unix.ECHO
	t.Oflag &^= unix.ONLCR
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, t); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command("bash", "--norc", "--noprofile", "--noediting", "-i")
	cmd.Env = append(os.Environ(), "TERM=dumb", "PS1=", "PS2=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	tty.Close()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	buf := make([]byte, 32<<10)
	var acc []byte
	// roundTrip writes l and reads until the marker for seq (any marker for
	// seq 0, the init line's).
	roundTrip := func(l []byte, seq uint64) {
		if _, err := ptmx.Write(l); err != nil {
			b.Fatal(err)
		}
		want := append([]byte(nil), lead...)
		if seq > 0 {
			want = strconv.AppendUint(want, seq, 10)
			want = append(want, ':')
		}
		for {
			if i := bytes.Index(acc, want); i >= 0 && bytes.IndexByte(acc[i+1:], 0x1e) >= 0 {
				acc = acc[:0]
				return
			}
			n, err := ptmx.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			acc = append(acc, buf[:n]...)
		}
	}
	cpu := func() float64 {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		var ns float64
		if _, err := fmt.Sscan(string(stat), &ns); err != nil {
			b.Fatal(err)
		}
		return ns
	}
	roundTrip(init, 0)
	before := cpu()
	seq := uint64(0)
	for b.Loop() {
		seq++
		roundTrip(line(seq), seq)
	}
	b.ReportMetric((cpu()-before)/float64(seq), "bash-cpu-ns/op")
}
