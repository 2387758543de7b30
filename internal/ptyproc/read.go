package ptyproc

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/sigstate"
)

// Output is a chunk of program output. Data is only valid until Release.
type Output struct {
	Proc *Process
	Data []byte
	buf  *[]byte
}

// Release gives the chunk's buffer back and lets the reader read on. Calling
// it more than once is harmless.
func (o *Output) Release() {
	if o.buf == nil {
		return
	}
	buf := o.buf
	o.buf, o.Data = nil, nil
	chunkPool.Put(buf)
	select {
	case o.Proc.credits <- struct{}{}:
	default:
	}
}

// OutputClosed says the terminal's output has ended.
type OutputClosed struct {
	Proc *Process
}

// Flushed answers [Process.FlushThenWrite]: every chunk delivered before it
// was read before the data was written.
type Flushed struct {
	Proc *Process
	Tag  any
}

// Probe answers [Process.Probe]: what the terminal's foreground process
// group and the session leader are doing, taken after every byte written
// before that moment was delivered.
type Probe struct {
	Proc *Process
	// Tag is the value given to Probe.
	Tag any
	// Pgrp is the terminal's foreground process group.
	Pgrp int
	// Leader is what the session leader (the started program) is doing. A
	// leader that was still running when first looked at is given the CPU a
	// few times to reach the call it blocks in.
	Leader procfs.Syscall
	// Wait says whether the foreground group is blocked reading the
	// terminal; only filled in when the probe asked for it, and for Probe
	// with wait only when no input is pending (ProbeSignal fills it in
	// either way: a member seen in its read with input pending has been
	// woken and is about to take it).
	Wait procfs.Wait
	// LeaderStopped: the session leader is stopped (SIGSTOP); only filled
	// in when the probe asked for the wait.
	LeaderStopped bool
	// Drained is true when every byte the program wrote before the look was
	// delivered before this message: a read after the look found nothing.
	Drained bool
	// InputPending is true when the terminal holds input that the program
	// has not read yet (or Write still has bytes to send).
	InputPending bool
	// ForegroundForked: another group than the leader's has the terminal,
	// and its leader is a child of the session leader still running the
	// same program (a shell's fork that has not executed its command yet:
	// a signal now meets the shell's own handler). Only filled in by
	// ProbeForeground.
	ForegroundForked bool
	// SignalPending: the signal ProbeSignal asked about is still pending
	// (sent and not taken yet, or blocked) for the foreground group's
	// leader or for the member the wait names. SignalIgnored: that member
	// (the leader when the wait names none) ignores it. Only filled in by
	// ProbeSignal.
	SignalPending, SignalIgnored bool
	// GroupLeader is what the foreground group's leader is doing, looked at
	// after Wait; only filled in by ProbeSignal. A leader blocked in a
	// system call is not between a select that said "readable" and its
	// read, where input flushed from under it would leave it blocked in the
	// read.
	GroupLeader procfs.Syscall
	// Writers are the processes that copy the session leader's standard
	// output or error to the terminal through a pipe (exec > >(tee log)),
	// and whether each has copied all it was given. Only filled in by
	// ProbeWriters; empty when the leader's output is not a pipe.
	Writers []procfs.PipeReader
	// OutputPiped: the session leader's standard output or error is a
	// pipe. Only filled in by ProbeWriters.
	OutputPiped bool
	// Err is set when the state could not be read.
	Err error
}

// ReadyForInterrupt reports, for a ProbeSignal, whether the foreground
// group can take SIGINT (and the discard of unread input that goes with it)
// without losing the input it was given: a member is blocked reading the
// terminal with nothing pending (its line editor holds at most the start of
// a line cut short), or the group's leader is blocked in a call other than
// a wait on the terminal (a command at work, a shell waiting for it) and is
// not forking (a fork that has not executed its command yet would meet the
// shell's handler, and the command would run on unseen).
//
// GroupLeader is looked at after Wait, so that a reader the input has just
// woken, still shown in the read or select it slept in, is never taken for
// one blocked elsewhere: seen so for Wait, it is waiting on the terminal; seen
// so only afterwards, it has read what was pending and blocked again.
func (pr *Probe) ReadyForInterrupt() bool {
	if pr.Err != nil {
		return false
	}
	reads := pr.Wait.State == procfs.WaitingInput && !pr.InputPending
	elsewhere := pr.GroupLeader.Blocked() && !forking(pr.GroupLeader) && pr.Wait.State == procfs.NotWaiting && !pr.ForegroundForked
	return reads || elsewhere
}

// forking reports whether s is a fork in progress (glibc's fork and
// posix_spawn are clone and clone3).
func forking(s procfs.Syscall) bool {
	return s.Nr == unix.SYS_CLONE || s.Nr == unix.SYS_CLONE3
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

// request is work for the reader: something that must happen after
// everything readable has been delivered.
type request struct {
	kind  requestKind
	tag   any
	data  []byte
	modes bool           // restore the terminal modes before writing data
	wait  bool           // a probe that also asks procfs.TTYWait
	fg    bool           // a probe that also fills in ForegroundForked
	sig   syscall.Signal // a probe that also fills in SignalPending
	// writers: a probe that also fills in Writers
	writers bool
}

type requestKind int

// send delivers m. The reader, the only goroutine that calls it, clears
// delivering afterwards and only then looks at pending: a request seen by
// submit as made during a delivery is seen by the reader (sequentially
// consistent atomics, as in Dekker's algorithm).
func (p *Process) send(m any) {
	if !p.closing.Load() {
		p.delivering.Store(true)
		p.deliver(m)
		p.delivering.Store(false)
	}
}

// submit queues work for the reader and wakes it if it is parked.
func (p *Process) submit(r request) {
	p.reqMu.Lock()
	p.requests = append(p.requests, r)
	p.pending.Store(true)
	p.reqMu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	if p.delivering.Load() {
		return
	}
	// A deadline in the past wakes a parked read at once, and one set before
	// the reader parks makes it return at once: no wake-up is lost.
	_ = p.master.SetReadDeadline(time.Unix(1, 0))
}

// FlushThenWrite has the reader deliver everything the program has written
// so far, then a *Flushed with tag, and then write data (nil: nothing) to
// the program's input, restoring the terminal modes first when modes is
// set. A caller that files output by whether it came before or after its
// input (the shell: output of background jobs before a call, the call's own
// after) gets that order from the message order alone.
func (p *Process) FlushThenWrite(tag any, data []byte, modes bool) {
	p.submit(request{kind: reqFlush, tag: tag, data: data, modes: modes})
}

// Probe has the reader deliver everything the program has written so far,
// then look at what the foreground group and the session leader are doing,
// and deliver the answer as a *Probe with tag, after every chunk written
// before the look. With wait set, the look also asks whether the foreground
// group is blocked reading the terminal (procfs.TTYWait), which costs more.
func (p *Process) Probe(tag any, wait bool) {
	p.submit(request{kind: reqProbe, tag: tag, wait: wait})
}

// ProbeForeground is Probe that also says whether the foreground group is
// a fork of the session leader that has not executed its program yet
// (Probe.ForegroundForked), for a caller about to signal it.
func (p *Process) ProbeForeground(tag any) {
	p.submit(request{kind: reqProbe, tag: tag, fg: true})
}

// ProbeSignal is ProbeForeground with the wait (as Probe with wait set),
// for a caller that has signalled the foreground group: it also says
// whether sig is still pending there, or ignored (Probe.SignalPending,
// Probe.SignalIgnored). A member seen blocked reading the terminal with sig
// no longer pending has taken the signal and come back to its read.
func (p *Process) ProbeSignal(tag any, sig syscall.Signal) {
	p.submit(request{kind: reqProbe, tag: tag, wait: true, fg: true, sig: sig})
}

// ProbeWriters is Probe that also lists the processes that copy the session
// leader's output to the terminal through a pipe, and whether they are idle
// (Probe.Writers): with all of them idle and Drained, every byte the leader
// wrote before the look has been delivered.
func (p *Process) ProbeWriters(tag any) {
	p.submit(request{kind: reqProbe, tag: tag, writers: true})
}

// readLoop is the one goroutine that reads the master. Every chunk, every
// answer to a request and the exit are delivered from here, in the order
// they happened.
func (p *Process) readLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		default:
		}
		if p.pending.Load() {
			if !p.serve() {
				return
			}
		}
		// Wait for a credit to read with; a request is served meanwhile.
		select {
		case <-p.credits:
		case <-p.wake:
			continue
		case <-p.done:
			return
		}
		bufp := chunkPool.Get().(*[]byte)
		// rc.Read may return (a deadline, a close) without calling readFn.
		p.rbuf, p.rn, p.rerr = *bufp, 0, nil
		err := p.rc.Read(p.readFn)
		n, readErr := p.rn, p.rerr
		switch {
		case n > 0:
			p.send(&Output{Proc: p, Data: (*bufp)[:n], buf: bufp})
			continue
		case errors.Is(err, os.ErrDeadlineExceeded) || (err == nil && readErr == unix.EAGAIN):
			// Woken for a request.
			chunkPool.Put(bufp)
			p.returnCredit()
			_ = p.master.SetReadDeadline(time.Time{})
			continue
		}
		chunkPool.Put(bufp)
		// EIO once every holder of the slave has closed it; EOF or a closed
		// file when Close ran.
		p.send(&OutputClosed{Proc: p})
		return
	}
}

// tryRead is the reader's read attempt inside rc.Read: it parks on EAGAIN
// unless there is work to do first.
func (p *Process) tryRead(fd uintptr) bool {
	p.rn, p.rerr = unix.Read(int(fd), p.rbuf)
	if p.rerr == unix.EAGAIN {
		return p.pending.Load()
	}
	return true
}

func (p *Process) takeCredit() bool {
	select {
	case <-p.credits:
		return true
	case <-p.done:
		return false
	}
}

func (p *Process) tryCredit() bool {
	select {
	case <-p.credits:
		return true
	default:
		return false
	}
}

func (p *Process) returnCredit() {
	select {
	case p.credits <- struct{}{}:
	default:
	}
}

// serve runs the queued requests. It reports false once the process is
// closing.
func (p *Process) serve() bool {
	p.reqMu.Lock()
	reqs := p.requests
	p.requests = nil
	p.pending.Store(false)
	p.reqMu.Unlock()
	for _, r := range reqs {
		// A flush and the exit promise an order: what was written before
		// them is delivered first, waiting for credits if need be. A probe
		// needs no drain before it: the read after its look proves the
		// order, and it never waits for a credit (a receiver that holds
		// its output still gets an answer: not drained).
		if r.kind != reqProbe && !p.drain() {
			return false
		}
		switch r.kind {
		case reqFlush:
			p.send(&Flushed{Proc: p, Tag: r.tag})
			if r.modes {
				_, _ = p.RestoreModes()
			}
			p.Write(r.data)
		case reqProbe:
			pr, open := p.probe(r)
			if !open {
				return false
			}
			p.send(pr)
		case reqExited:
			p.send(&Exited{Proc: p, Status: p.exitStatus, InputPending: p.inputPending()})
		}
	}
	return true
}

// drain delivers what the master holds now, a chunk per credit, at most
// drainChunks of them. It reports false once the process is closing.
func (p *Process) drain() bool {
	for i := 0; i < drainChunks; i++ {
		if !p.takeCredit() {
			return false
		}
		if !p.readChunk() {
			p.returnCredit()
			return true
		}
	}
	return true
}

// readChunk reads and delivers one chunk without waiting; the caller holds
// a credit, which the chunk takes. It reports whether there was one.
func (p *Process) readChunk() bool {
	bufp := chunkPool.Get().(*[]byte)
	var n int
	_ = p.rc.Control(func(fd uintptr) {
		n, _ = unix.Read(int(fd), *bufp)
	})
	if n <= 0 {
		chunkPool.Put(bufp)
		return false
	}
	p.send(&Output{Proc: p, Data: (*bufp)[:n], buf: bufp})
	return true
}

// probe looks at the foreground group and the leader. A read after the
// look that finds nothing proves that every byte
// written before the look has been delivered (reading flushes the kernel's
// pending buffer work first, n_tty_read). Output found by that read is
// delivered and the look taken again, a few times.
func (p *Process) probe(r request) (*Probe, bool) {
	for again := 0; ; again++ {
		pr := &Probe{Proc: p, Tag: r.tag}
		if r.writers {
			// Before the look: a writer seen idle has written all it read
			// to the terminal, which the read after the look delivers.
			if pipes := procfs.OutputPipes(p.pid); len(pipes) > 0 {
				pr.OutputPiped = true
				pr.Writers, pr.Err = procfs.PipeReaders(p.pid, pipes)
			}
		}
		p.look(pr, r)
		if r.fg && pr.Err == nil && pr.Pgrp != p.pid {
			pr.ForegroundForked = p.forkedLeader(pr.Pgrp)
		}
		if r.sig != 0 && pr.Err == nil {
			pr.Err = p.signalState(pr, r.sig)
			// After the wait, never before: see ReadyForInterrupt.
			if pr.Err == nil && pr.Pgrp == p.pid {
				pr.GroupLeader, pr.Err = p.leader.Read()
			} else if pr.Err == nil {
				pr.GroupLeader, pr.Err = groupLeader(pr.Pgrp)
			}
		}
		if !p.tryCredit() {
			return pr, !p.closing.Load() // output still held by the receiver
		}
		if !p.readChunk() {
			p.returnCredit()
			// Inconclusive looks (input pending, an error) prove nothing
			// about the output either.
			pr.Drained = !pr.InputPending && pr.Err == nil
			return pr, true
		}
		if again == 2 {
			return pr, true // still writing: not drained
		}
	}
}

func (p *Process) look(pr *Probe, r request) {
	wait := r.wait
	pgrp, err := p.ForegroundGroup()
	if err != nil {
		pr.Err = err
		return
	}
	pr.Pgrp = pgrp
	// Input first, then the leader: a leader seen blocked in a read after no
	// input was pending has read everything written before, and come back
	// to its read since. The other order lets it take input between the two
	// looks and seem to wait for more while it works on what it took.
	pending := p.inputPending()
	for yields := 0; ; yields++ {
		pr.Leader, err = p.leader.Read()
		if err != nil {
			pr.Err = err
			return
		}
		if !pr.Leader.Running || pgrp != p.pid || yields == maxYields {
			break
		}
		// The leader has the terminal and is still running: it has most
		// likely just written and is on its way to the call it will block
		// in. Give it the CPU rather than answer "running".
		_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	if wait {
		if st, err := procfs.Stat(p.pid); err == nil {
			pr.LeaderStopped = st.State == 'T' || st.State == 't'
		}
	}
	if pending {
		pr.InputPending = true
		if r.sig == 0 {
			return
		}
		// A caller about to signal must tell a member on its way to the
		// input (woken, not yet running: it still shows the read or select
		// it slept in) from one blocked elsewhere.
	}
	if wait {
		pr.Wait, pr.Err = procfs.TTYWait(pgrp, p.tty)
	}
}

// signalState fills in SignalPending and SignalIgnored (see Probe).
func (p *Process) signalState(pr *Probe, sig syscall.Signal) error {
	who := []int{pr.Pgrp}
	if pr.Wait.PID != 0 && pr.Wait.PID != pr.Pgrp {
		who = append(who, pr.Wait.PID)
	}
	for i, pid := range who {
		pending, ignored, err := sigstate.Pending(pid, sig)
		if err != nil {
			if i == 0 && pr.Wait.PID != 0 {
				continue // the leader is gone; the member that waits decides
			}
			return err
		}
		pr.SignalPending = pr.SignalPending || pending
		if pid == pr.Wait.PID || pr.Wait.PID == 0 {
			pr.SignalIgnored = ignored
		}
	}
	return nil
}

func groupLeader(pgrp int) (procfs.Syscall, error) {
	r, err := procfs.OpenSyscall(pgrp)
	if err != nil {
		return procfs.Syscall{}, err
	}
	defer r.Close()
	return r.Read()
}

// forkedLeader reports whether process pgrp is a child of the session
// leader still running the leader's program.
func (p *Process) forkedLeader(pgrp int) bool {
	fg, err1 := procfs.Stat(pgrp)
	leader, err2 := procfs.Stat(p.pid)
	return err1 == nil && err2 == nil && fg.PPID == p.pid && fg.Comm == leader.Comm
}

// InputPending reports whether input written to the terminal has not been
// read yet (see inputPending).
func (p *Process) InputPending() bool { return p.inputPending() }

// inputPending reports whether input written to the terminal has not been
// read yet: bytes still queued in Write, or readable on the slave.
func (p *Process) inputPending() bool {
	p.writeMu.Lock()
	queued := len(p.writeQueue) > 0
	p.writeMu.Unlock()
	if queued {
		return true
	}
	fds := []unix.PollFd{{Fd: int32(p.slaveFD), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
}
