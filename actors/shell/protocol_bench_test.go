package shell

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// What the protocol costs bash itself, without actors or ptyproc: bash on a
// PTY driven from one goroutine with blocking reads, once with this
// package's prompt marker and the text typed as it is, once with a printf in
// PROMPT_COMMAND (bench's floor). bash-cpu-ns/op is the time bash spent on
// a CPU (/proc/PID/schedstat), steadier than the wall time on a shared
// machine.
func BenchmarkProtocolBashSide(b *testing.B) {
	b.Run("prompt-marker", func(b *testing.B) {
		p := newProtocol("/dev/null")
		benchBashSide(b, p.initLines(false, false)[0], []byte("echo hi\n"), p.lead)
	})
	b.Run("printf-prompt-command", func(b *testing.B) {
		benchBashSide(b, []byte(`set +H +o history; PROMPT_COMMAND='printf "\036M:%s\036" $?'`+"\n"),
			[]byte("echo hi\n"), []byte("\x1eM:"))
	})
}

func benchBashSide(b *testing.B, init, line, lead []byte) {
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
	cmd.Env = append(os.Environ(), "TERM=dumb", "PS1=", "PS2=", "HISTFILE=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	tty.Close()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	buf := make([]byte, 32<<10)
	var acc []byte
	// roundTrip writes l and reads until a marker has come whole.
	roundTrip := func(l []byte) {
		if _, err := ptmx.Write(l); err != nil {
			b.Fatal(err)
		}
		for {
			if i := bytes.Index(acc, lead); i >= 0 && bytes.IndexByte(acc[i+1:], 0x1e) >= 0 {
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
	roundTrip(init)
	before := cpu()
	n := 0
	for b.Loop() {
		n++
		roundTrip(line)
	}
	b.ReportMetric((cpu()-before)/float64(n), "bash-cpu-ns/op")
}
