package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// floorShell is the baseline every figure is compared with: bash on a PTY,
// driven from one goroutine with blocking reads and writes, no actors, no
// escaping, just a PROMPT_COMMAND marker. It is what a round trip costs on
// this machine, now.
type floorShell struct {
	cmd  *exec.Cmd
	ptmx *os.File
	buf  []byte
	acc  []byte
}

var floorMarker = []byte("\x1eM")

func startFloor() (*floorShell, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	fd := int(tty.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err == nil {
		t.Lflag &^= unix.ECHO
		t.Oflag &^= unix.ONLCR
		err = unix.IoctlSetTermios(fd, unix.TCSETS, t)
	}
	if err == nil {
		err = unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: 200, Row: 50})
	}
	if err != nil {
		ptmx.Close()
		tty.Close()
		return nil, err
	}
	cmd := exec.Command("bash", "--norc", "--noprofile", "--noediting", "-i")
	cmd.Env = append(os.Environ(), "TERM=dumb", "PS1=", "PS2=")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		tty.Close()
		return nil, err
	}
	tty.Close()
	f := &floorShell{cmd: cmd, ptmx: ptmx, buf: make([]byte, 32<<10)}
	if _, err := f.roundTrip(`set +H +o history; PROMPT_COMMAND='printf "\036M%s\036" $?'`); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// roundTrip writes one line and reads until the marker; it returns what
// came before the marker.
func (f *floorShell) roundTrip(line string) ([]byte, error) {
	if _, err := f.ptmx.Write(append([]byte(line), '\n')); err != nil {
		return nil, err
	}
	watchdog := time.AfterFunc(10*time.Second, func() { f.cmd.Process.Kill() })
	defer watchdog.Stop()
	for {
		if i := bytes.Index(f.acc, floorMarker); i >= 0 {
			if j := bytes.IndexByte(f.acc[i+len(floorMarker):], 0x1e); j >= 0 {
				out := append([]byte(nil), f.acc[:i]...)
				f.acc = f.acc[:copy(f.acc, f.acc[i+len(floorMarker)+j+1:])]
				return out, nil
			}
		}
		n, err := f.ptmx.Read(f.buf)
		f.acc = append(f.acc, f.buf[:n]...)
		if err != nil {
			return nil, fmt.Errorf("floor shell: %w", err)
		}
	}
}

func (f *floorShell) close() error {
	err := procfs.KillSession(f.cmd.Process.Pid, 5*time.Second)
	_ = f.cmd.Wait()
	return errors.Join(err, f.ptmx.Close())
}
