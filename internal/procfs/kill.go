package procfs

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var errSRCH = syscall.ESRCH

// KillSession sends SIGKILL to every live member of session sid and waits,
// up to timeout, until each has exited. Members forked while it works are
// found by scanning again, so it repeats until a scan finds nobody.
//
// Signals go through pidfds, so a pid that was reused after a member exited is
// never hit. It returns the members still alive at the deadline, if any, with
// an error naming them.
//
// Processes that left the session with setsid(2) are not members any more and
// are out of its reach.
func KillSession(sid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		members, err := Session(sid)
		if err != nil {
			return err
		}
		if len(members) == 0 {
			return nil
		}
		left := killAndWait(members, deadline)
		if len(left) > 0 && !time.Now().Before(deadline) {
			return fmt.Errorf("procfs: %d process(es) of session %d survived SIGKILL for %v: %v", len(left), sid, timeout, left)
		}
	}
}

// killAndWait kills procs and waits until each has exited or the deadline
// passes; it returns those that had not exited.
func killAndWait(procs []Proc, deadline time.Time) []Proc {
	type target struct {
		proc Proc
		fd   int
	}
	targets := make([]target, 0, len(procs))
	for _, p := range procs {
		fd, err := unix.PidfdOpen(p.PID, 0)
		if err != nil {
			continue // already gone
		}
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			// Not ours to kill (permissions): report it as a survivor below.
			_ = err
		}
		targets = append(targets, target{p, fd})
	}
	defer func() {
		for _, t := range targets {
			unix.Close(t.fd)
		}
	}()
	// A pidfd becomes readable when its process exits.
	// A copy: filtering pending in place must not overwrite targets, whose
	// descriptors the deferred function closes.
	pending := append([]target(nil), targets...)
	for len(pending) > 0 {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		fds := make([]unix.PollFd, len(pending))
		for i, t := range pending {
			fds[i] = unix.PollFd{Fd: int32(t.fd), Events: unix.POLLIN}
		}
		ms := int(wait / time.Millisecond)
		if ms == 0 {
			ms = 1
		}
		if _, err := unix.Poll(fds, ms); err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		next := pending[:0]
		for i, t := range pending {
			if fds[i].Revents == 0 {
				next = append(next, t)
			}
		}
		pending = next
	}
	left := make([]Proc, len(pending))
	for i, t := range pending {
		left[i] = t.proc
	}
	return left
}
