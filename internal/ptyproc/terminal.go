package ptyproc

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func setupTTY(tty *os.File, opts Options) (unix.Termios, error) {
	fd := int(tty.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return unix.Termios{}, fmt.Errorf("ptyproc: reading terminal modes: %w", err)
	}
	applyModes(t, opts)
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return unix.Termios{}, fmt.Errorf("ptyproc: setting terminal modes: %w", err)
	}
	cols, rows := opts.Cols, opts.Rows
	if cols == 0 {
		cols = 80
	}
	if rows == 0 {
		rows = 24
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows}); err != nil {
		return unix.Termios{}, fmt.Errorf("ptyproc: setting window size: %w", err)
	}
	return *t, nil
}

// applyModes sets the modes that Options choose.
func applyModes(t *unix.Termios, opts Options) {
	if opts.Echo {
		t.Lflag |= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHOCTL | unix.ECHOKE
	} else {
		t.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL | unix.ECHOCTL | unix.ECHOKE
	}
	if opts.CRLF {
		t.Oflag |= unix.OPOST | unix.ONLCR
	} else {
		t.Oflag &^= unix.ONLCR
	}
	t.Iflag |= unix.IUTF8
	if opts.Literal {
		t.Lflag &^= unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Iflag &^= unix.IXON | unix.IXOFF | unix.ICRNL | unix.INLCR | unix.IGNCR | unix.ISTRIP
		t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
		t.Cc[unix.VINTR], t.Cc[unix.VQUIT], t.Cc[unix.VSUSP] = 0, 0, 0
	} else {
		t.Lflag |= unix.ICANON | unix.ISIG
	}
}

// nonBlockingDup returns a non-blocking duplicate of the master that the
// runtime poller manages (see the package documentation).
func nonBlockingDup(master *os.File) (*os.File, error) {
	sc, err := master.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("ptyproc: %w", err)
	}
	var fd int
	var dupErr error
	if err := sc.Control(func(orig uintptr) {
		fd, dupErr = unix.FcntlInt(orig, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("ptyproc: %w", err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("ptyproc: duplicating the master: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ptyproc: making the master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "ptmx"), nil
}

// control runs f on the master's descriptor.
func (p *Process) control(f func(fd int) error) error {
	var ferr error
	if err := p.rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// ForegroundGroup returns the terminal's foreground process group.
func (p *Process) ForegroundGroup() (int, error) {
	var pgrp int
	err := p.control(func(fd int) error {
		var err error
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return pgrp, err
}

// DiscardInput drops the input the program has not read yet, as the
// terminal driver does for ^C.
func (p *Process) DiscardInput() error { return p.discardInput() }

// Signal sends sig to the terminal's foreground process group, as the
// terminal driver does for ^C, whatever the terminal modes are. SIGINT,
// SIGQUIT and SIGTSTP also discard the input not yet read, as their keys
// do: a line typed just before ^C never runs after it.
func (p *Process) Signal(sig syscall.Signal) error {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP:
		// As the key would: the text typed before it is not read after it.
		if err := p.discardInput(); err != nil {
			return err
		}
		return p.control(func(fd int) error {
			return unix.IoctlSetInt(fd, unix.TIOCSIG, int(sig))
		})
	}
	// TIOCSIG on a pseudo-terminal takes only the three signals the
	// terminal itself generates (EINVAL for any other): send the rest to
	// the foreground group directly.
	pgrp, err := p.ForegroundGroup()
	if err != nil {
		return err
	}
	if pgrp <= 1 {
		// 0 once the session leader is gone; kill(0) would signal our own
		// process group.
		return fmt.Errorf("ptyproc: the terminal has no foreground process group (%d)", pgrp)
	}
	return unix.Kill(-pgrp, sig)
}

// RestoreModes puts back the terminal modes the process was started with,
// all of them, if a program changed them, and reports whether it had to. A
// shell calls it before each command, so a program that died in raw mode or
// ran `stty echo` or `stty olcuc` cannot make the shell echo its input, lose
// its line discipline or change the next command's output.
func (p *Process) RestoreModes() (bool, error) {
	changed := false
	err := p.control(func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		if *t == p.modes {
			return nil
		}
		changed = true
		return unix.IoctlSetTermios(fd, unix.TCSETS, &p.modes)
	})
	return changed, err
}

// ModesChanged reports whether the program has set terminal modes of its
// own (a line editor's, a full-screen program's) in place of the ones the
// terminal was started with.
func (p *Process) ModesChanged() (bool, error) {
	changed := false
	err := p.control(func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		changed = *t != p.modes
		return nil
	})
	return changed, err
}

// TypeEndOfFile types end-of-file (^D) so that a program reading the
// terminal gets it as such. In the modes the terminal was started with
// (Literal: no canonical input) ^D is a plain byte, so canonical input is
// turned on first, with ^D as its VEOF, and restart is called before the
// byte is typed. A read(2) begun before canonical input was on still waits
// for a byte and takes no end-of-file: restart must make the reader begin
// its read again (a signal it handles). Those modes stay until
// [Process.RestoreModes] or the next FlushThenWrite that restores them;
// whoever types this must drop the input left unread before the terminal
// is used again (an end-of-file left in the canonical buffer would end the
// next reader's input). In modes a program set for itself (a line
// editor's), the byte is typed as it is: such a program takes ^D for
// end-of-file itself. canonical says which was done.
func (p *Process) TypeEndOfFile(restart func()) (canonical bool, err error) {
	err = p.control(func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil || *t != p.modes || t.Lflag&unix.ICANON != 0 {
			return err
		}
		t.Lflag |= unix.ICANON
		t.Cc[unix.VEOF] = 4
		canonical = true
		return unix.IoctlSetTermios(fd, unix.TCSETS, t)
	})
	if err != nil {
		return false, err
	}
	if canonical && restart != nil {
		restart()
	}
	p.Write([]byte{4})
	return canonical, nil
}

// Resize sets the window size; the foreground group gets SIGWINCH.
func (p *Process) Resize(cols, rows uint16) error {
	return p.control(func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	})
}

// Termios returns the slave's current terminal modes.
func (p *Process) Termios() (*unix.Termios, error) {
	var t *unix.Termios
	err := p.control(func(fd int) error {
		var err error
		t, err = unix.IoctlGetTermios(fd, unix.TCGETS)
		return err
	})
	return t, err
}

// SignalName returns the conventional name of sig, e.g. "SIGKILL".
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}
