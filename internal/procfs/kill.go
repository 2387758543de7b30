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
// up to timeout, until each has exited; see [KillTree], which it is with no
// mark. Processes that left the session with setsid(2) are out of its reach.
func KillSession(sid int, timeout time.Duration) error {
	return KillTree(Tree{Session: sid}, timeout)
}

// Tree names what a program started: the members of its session, and the
// processes that left the session (setsid, daemons) but carry the program's
// mark in their environment.
type Tree struct {
	// Session is the program's session id (its pid: it was started with
	// setsid).
	Session int
	// MarkName and MarkToken: a process outside the session belongs to the
	// tree when its environment variable MarkName holds MarkToken among its
	// colon-separated values. An empty MarkToken means session members only.
	MarkName, MarkToken string
	// Since is the leader's start time (Proc.Start). Only processes started
	// at or after it can belong to the tree, so only their environments are
	// read. Zero reads every process's.
	Since uint64
}

// scan is one look at the tree: its live members; how many processes
// started since the leader could not be read just now; and the zombies of
// the session, whose children may have been forked after /proc was listed.
type scan struct {
	members []Proc
	unsure  int
	zombies []int
	// vanished: listed, but gone by the time its stat was read. It may have
	// been a member that forked after the listing and was reaped at once.
	vanished int
}

func (t Tree) scan() (scan, error) { return scanTrees([]Tree{t}, nil) }

// scanTrees is one look at several trees at once: one listing of /proc, and
// one read of each later process's environment whatever the number of
// trees (a host stopping a thousand shells must not read a million).
func scanTrees(trees []Tree, others func(session int) bool) (scan, error) {
	var sc scan
	sessions := make(map[int]bool, len(trees))
	type markOf struct {
		name  string
		since uint64
	}
	tokens := map[string]markOf{} // token -> its tree's mark name and start
	names := map[string]bool{}
	minSince := ^uint64(0)
	for _, t := range trees {
		if t.Session <= 1 {
			return scan{}, fmt.Errorf("%w (got %d)", ErrBadID, t.Session)
		}
		sessions[t.Session] = true
		if t.MarkToken != "" {
			tokens[t.MarkToken] = markOf{t.MarkName, t.Since}
			names[t.MarkName] = true
			minSince = min(minSince, t.Since)
		}
	}
	all, vanished, err := list()
	if err != nil {
		return sc, err
	}
	sc.vanished = vanished
	for _, p := range all {
		switch {
		case p.Zombie():
			if sessions[p.Session] {
				sc.zombies = append(sc.zombies, p.PID)
			}
			continue
		case sessions[p.Session]:
			sc.members = append(sc.members, p)
			continue
		case len(tokens) == 0 || p.Start < minSince || p.PID <= 1:
			continue
		case others != nil && others(p.Session):
			continue // in a session that is not going away: not a leaver of these
		}
		for name := range names {
			found, sure := markTokens(p.PID, name)
			if !sure {
				sc.unsure++
			}
			for _, tok := range found {
				if m, ok := tokens[tok]; ok && m.name == name && p.Start >= m.since {
					sc.members = append(sc.members, p)
					break
				}
			}
		}
	}
	return sc, nil
}

// vanishedRescans bounds the scans taken again only because a listed
// process was gone when read: on a busy machine some always are.
const vanishedRescans = 3

// unsureRetry is the pause before a scan is taken again because a process
// could not be read (it was executing a program): a moment, not a wait for
// anything that takes time.
const unsureRetry = 2 * time.Millisecond

// KillTree sends SIGKILL to every process of the tree and waits, up to
// timeout, until each has exited. Processes forked while it works are found
// by scanning again, so it repeats until a scan finds nobody, and nobody whose
// mark could not be read (a process in the middle of execve reads with an
// empty environment).
//
// Signals go through pidfds, so a pid that was reused after a member exited is
// never hit. It returns an error naming the processes still alive at the
// deadline, if any. A process that left the session and was executed with an
// environment without the mark (env -i) is out of its reach.
func KillTree(t Tree, timeout time.Duration) error { return KillTrees([]Tree{t}, timeout, nil) }

// KillTrees is KillTree for several trees at once, with one scan of /proc
// per round for all of them. The timeout counts from the end of the first
// scan: a slow look at a busy machine does not eat the grace of the kill.
// others, if given, names sessions known to live on (other shells'): their
// members cannot have left one of these trees, so their environments are
// not read. On a host with a thousand shells that is most processes.
func KillTrees(trees []Tree, timeout time.Duration, others func(session int) bool) error {
	if len(trees) == 0 {
		return nil
	}
	var deadline time.Time
	seenZombies := map[int]bool{}
	rescans := 0
	for {
		sc, err := scanTrees(trees, others)
		if err != nil {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(timeout)
		}
		if len(sc.members) > 0 {
			left := killAndWait(sc.members, deadline)
			if len(left) > 0 && !time.Now().Before(deadline) {
				return fmt.Errorf("procfs: %d process(es) survived SIGKILL for %v: %v", len(left), timeout, left)
			}
			continue
		}
		// Nobody seen. Look again when the scan may have missed someone: a
		// process caught in execve, or the child of a member that exited
		// between the listing of /proc and the reading of its stat (such a
		// child was forked after the listing), whether it was still a
		// zombie then or already reaped (seen as vanished).
		again := sc.unsure > 0
		if sc.vanished > 0 && rescans < vanishedRescans {
			again = true
			rescans++
		}
		for _, z := range sc.zombies {
			if !seenZombies[z] {
				seenZombies[z], again = true, true
			}
		}
		if !again {
			return nil
		}
		if !time.Now().Before(deadline) {
			if sc.unsure == 0 {
				return nil
			}
			return fmt.Errorf("procfs: %d process(es) that may have left their session could not be read for %v", sc.unsure, timeout)
		}
		time.Sleep(unsureRetry)
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
