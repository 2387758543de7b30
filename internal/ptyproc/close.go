package ptyproc

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// Exited says the started program has exited. Everything it wrote was
// delivered before this message.
type Exited struct {
	Proc   *Process
	Status ExitStatus
	// InputPending: input written to the terminal was never read, so the
	// program ended before it saw it.
	InputPending bool
}

// ExitStatus is how a program ended.
type ExitStatus struct {
	// Code is the exit code; -1 when killed by a signal or unknown.
	Code int
	// Signal is the signal that killed it, or 0.
	Signal syscall.Signal
}

func (s ExitStatus) String() string {
	if s.Signal != 0 {
		return "killed by signal " + SignalName(s.Signal)
	}
	return fmt.Sprintf("exit code %d", s.Code)
}

func (p *Process) waitLoop() {
	defer p.wg.Done()
	p.exitStatus = p.prog.wait()
	close(p.exited)
	// Everything the program wrote before it exited is in the master's
	// queue now: the reader delivers it, then Exited.
	p.submit(request{kind: reqExited})
}

// waitExit returns once process pid has exited, waiting in the runtime's
// poller on a pidfd rather than in a thread of its own blocked in wait4:
// a thousand shells must not hold a thousand threads. (cmd.Wait then reaps
// at once.) Where a pidfd cannot be had, it returns at once and the wait
// blocks in cmd.Wait as before.
func waitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd turns readable when the process exits. Ask the descriptor
	// itself each time (the poller forgets a readiness that came before
	// the wait began).
	_ = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			return false
		}
		return err != nil || n > 0 // an error: cmd.Wait waits instead
	})
}

// ExitStatus returns the program's exit status once it has exited.
func (p *Process) ExitStatus() (ExitStatus, bool) {
	select {
	case <-p.exited:
		return p.exitStatus, true
	default:
		return ExitStatus{}, false
	}
}

// Close kills every process of the session, reaps the program, closes the
// terminal and joins the process's goroutines. No message is delivered after
// Close has started. It is safe to call more than once and from any
// goroutine; it returns the first error.
func (p *Process) Close() error {
	if p.claimClose() {
		p.finishClose(procfs.KillTree(p.beginClose(), killTimeout))
	}
	<-p.closed
	return p.closeErr
}

// claimClose reports whether the caller is the one to close p.
func (p *Process) claimClose() bool {
	claimed := false
	p.closeOnce.Do(func() { claimed = true })
	return claimed
}

// liveSessions holds the session ids of the processes not being closed.
var liveSessions sync.Map

func liveSession(sid int) bool {
	_, ok := liveSessions.Load(sid)
	return ok
}

// beginClose stops the deliveries and returns what is to be killed.
func (p *Process) beginClose() procfs.Tree {
	liveSessions.Delete(p.tree.Session)
	p.closing.Store(true)
	close(p.done)
	return p.tree
}

// finishClose runs once the session is killed: it reaps the program,
// joins the goroutines and closes the descriptors.
func (p *Process) finishClose(killErr error) {
	// The program was a member of the session, so Wait returns now.
	<-p.exited
	// Wake the reader and the writer where they park, and let them
	// return before the descriptors they use are closed: a descriptor
	// closed under a running probe could be reused by another open.
	_ = p.master.SetReadDeadline(time.Unix(1, 0))
	_ = p.master.SetWriteDeadline(time.Unix(1, 0))
	p.wg.Wait()
	closeErr := errors.Join(p.master.Close(), p.slave.Close(), p.leader.Close())
	p.prog.release()
	// Buffers of chunks never released are garbage collected.
	p.closeErr = errors.Join(killErr, closeErr)
	close(p.closed)
}

// closeAll closes processes together: their sessions are killed with one
// look at /proc per round for all of them (see procfs.KillTrees). It
// returns the kill's error; each process's Close error has the rest.
func closeAll(ps []*Process) error {
	var mine []*Process
	var trees []procfs.Tree
	for _, p := range ps {
		if p.claimClose() {
			mine = append(mine, p)
			trees = append(trees, p.beginClose())
		}
	}
	killErr := procfs.KillTrees(trees, killTimeout, liveSession)
	outOfFiles := errors.Is(killErr, syscall.EMFILE) || errors.Is(killErr, syscall.ENFILE)
	if outOfFiles {
		// No descriptor left to look at /proc with. Kill what needs none:
		// each session's leader and its process group. Closing those frees
		// their descriptors, and the rest of each session is looked for
		// after that.
		// (Only leaders not reaped yet: their pid and group id cannot have
		// been given to anyone else. The signal to the leader goes
		// through the pidfd os.Process keeps.)
		for _, p := range mine {
			if _, done := p.ExitStatus(); !done {
				_ = unix.Kill(-p.tree.Session, unix.SIGKILL)
				p.prog.kill()
			}
		}
	}
	var wg sync.WaitGroup
	for _, p := range mine {
		wg.Go(func() { p.finishClose(nil) })
	}
	wg.Wait()
	if outOfFiles {
		killErr = procfs.KillTrees(trees, killTimeout, liveSession)
	}
	for _, p := range ps {
		<-p.closed
	}
	return killErr
}
