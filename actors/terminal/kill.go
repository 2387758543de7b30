package terminal

import (
	"bytes"
	"fmt"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/waitproof"
)

// taskFeed types a background task's input a piece at a time: the next
// piece goes once the program has read the last one (no input pending). The
// kernel would take tens of kilobytes at once, and a task_kill could then
// only flush what the program had not read: a flush that lands between a
// program's select saying "readable" and its read leaves it blocked in a
// read of its line editor's, where a signal's deferred handling (Python's
// KeyboardInterrupt) waits for the next line typed. Fed in pieces, the
// program is never more than a piece ahead, and a kill lets it read that
// piece rather than flushing it from under it.
type taskFeed struct {
	rest  []byte
	timer *time.Timer
	delay time.Duration
}

// feedPiece bounds a piece of a task's input.
const feedPiece = 512

// feedRetry asks whether the program has read the last piece.
type feedRetry struct{ f *taskFeed }

func (a *Actor) startFeed(input []byte) {
	f := &taskFeed{rest: input}
	a.holder.feed = f
	a.feedNext(f)
}

// feedNext types the next piece, ending at a line's end when one falls in
// it, and asks when it has been read.
func (a *Actor) feedNext(f *taskFeed) {
	n := min(len(f.rest), feedPiece)
	if i := bytes.LastIndexAny(f.rest[:n], "\r\n"); i >= 0 && n < len(f.rest) {
		n = i + 1
	}
	a.type_(f.rest[:n])
	f.rest = f.rest[n:]
	if len(f.rest) == 0 {
		a.holder.feed = nil
		a.wait.Again() // the task's wait may end now
		return
	}
	f.delay = time.Millisecond
	a.proc.Probe(f, false)
}

// feedProbed types on once the last piece was read.
func (a *Actor) feedProbed(p *ptyproc.Probe, f *taskFeed) {
	if a.holder == nil || a.holder.feed != f || a.exit != nil {
		return
	}
	if p.Err == nil && !p.InputPending {
		a.feedNext(f)
		return
	}
	send := a.send
	f.timer = time.AfterFunc(f.delay, func() { send(&feedRetry{f}) })
	f.delay = min(2*f.delay, killMaxInterval)
}

// stopFeed drops what a task has not typed yet; it reports how much.
func (a *Actor) stopFeed() int {
	h := a.holder
	if h == nil || h.feed == nil {
		return 0
	}
	if h.feed.timer != nil {
		h.feed.timer.Stop()
	}
	n := len(h.feed.rest)
	h.feed = nil
	return n
}

// taskKill is task_kill's interrupt of the background task that holds the
// terminal. A task is killed when its program is back at its input with an
// empty line and nothing left to read, and not before:
//
//  1. Stop typing: what the task has not typed yet is dropped (at most a
//     piece, see taskFeed, is typed and not read).
//  2. Hold the SIGINT until the program has read what it was given: it is
//     seen reading the terminal with nothing pending (its line editor then
//     holds at most the start of a cut line), or the foreground group's
//     leader is blocked elsewhere (a command at work, a shell waiting for
//     it); at most heldSignalMax. The SIGINT flushes what is still unread.
//  3. Wait for proof that the SIGINT was handled: a member of the
//     foreground group seen blocked reading the terminal twice, with no
//     input pending, no output between, everything it wrote delivered, the
//     signal neither pending for it nor (for SIGINT) ignored by it, and
//     output since the signal (a shell's new prompt, Python's
//     KeyboardInterrupt): a program whose handler only sets a flag may be
//     back in a read without having acted on it. Only then does the task
//     end: prompt when the default shell printed its marker since,
//     stdin_read otherwise. A program seen back reading without a word
//     ends the task as unknown.
//
// A prompt marker or a wait seen before the proof ends nothing: a marker
// printed before the signal was handled says nothing of what the line editor
// holds now. Without the proof the task's kill escalates (SIGTERM, SIGKILL)
// and, at worst, ends as killed, which says the state is not known.
type taskKill struct {
	taskID  string
	dropped int // bytes of the task's input never typed
	// sig is the last signal sent; 0 while the SIGINT is held.
	sig    syscall.Signal
	sentAt time.Time
	until  time.Time // while held: when the SIGINT goes anyway
	timer  *time.Timer
	delay  time.Duration // between looks once a signal went
	// last is the latest look.
	last *ptyproc.Probe
	// confirm is a conclusive look waiting for a second one, taken when
	// outputs was confirmOut, at confirmAt.
	confirm    procfs.Wait
	confirmOut uint64
	confirmAt  time.Time
	outputs    uint64 // output chunks since the signal
	// marker: the default shell's prompt marker came after the signal.
	marker bool
}

// killRetry asks for the next look of a kill.
type killRetry struct{ k *taskKill }

const (
	// killMaxInterval caps the time between a kill's looks.
	killMaxInterval = 50 * time.Millisecond
	// silentBack is how long a program must be seen back reading, without
	// a word since the signal, before the kill says its state is unknown.
	silentBack = 100 * time.Millisecond
)

// interrupt signals the foreground group for task_kill (see taskKill).
// SIGTERM and SIGKILL never go to the terminal's own program seen at its
// input: the command is over, and it is the proof of that that has not come.
func (a *Actor) interrupt(m *Interrupt) {
	h := a.holder
	if h == nil || h.id != m.TaskID || a.proc == nil || a.exit != nil {
		return
	}
	k := a.kill
	if k == nil || k.taskID != m.TaskID {
		a.stopKill()
		k = &taskKill{taskID: m.TaskID}
		a.kill = k
	}
	if m.Sig == syscall.SIGINT && k.sig == 0 {
		k.dropped += a.stopFeed()
		k.until = time.Now().Add(heldSignalMax)
		a.probeKill(k)
		return
	}
	if p := k.last; m.Sig != syscall.SIGINT && p != nil && p.Err == nil && !p.InputPending && p.Pgrp == a.proc.PID() &&
		p.Wait.State == procfs.WaitingInput && p.Wait.PID == a.proc.PID() {
		return
	}
	if a.proc.Signal(m.Sig) == nil {
		a.signalled(k, m.Sig)
	}
}

// probeKill takes a kill's next look.
func (a *Actor) probeKill(k *taskKill) {
	sig := k.sig
	if sig == 0 {
		sig = syscall.SIGINT // held: the look tells where the program is
	}
	a.proc.ProbeSignal(k, sig)
}

// signalled starts waiting for the proof that sig was handled.
func (a *Actor) signalled(k *taskKill, sig syscall.Signal) {
	k.sig, k.sentAt = sig, time.Now()
	k.confirm, k.outputs, k.marker = procfs.Wait{}, 0, false
	k.delay = time.Millisecond
	a.retryKill(k, k.delay)
}

func (a *Actor) retryKill(k *taskKill, d time.Duration) {
	if k.timer != nil {
		k.timer.Stop()
	}
	send := a.send
	k.timer = time.AfterFunc(d, func() { send(&killRetry{k}) })
}

// killOutput notes output while a kill waits for its proof.
func (a *Actor) killOutput(marker bool) {
	if k := a.kill; k != nil && k.sig != 0 {
		k.outputs++
		k.marker = k.marker || marker
	}
}

// atInput reports whether a look w may show a program back at its input:
// blocked reading the terminal, or an event loop waiting on it and on its
// own timers with none of its threads running. (killProbed confirms an
// event loop over one of its wake-ups, waitproof.LoopWatch, with no work
// done.)
func atInput(w procfs.Wait) bool {
	return w.State == procfs.WaitingInput || w.State == procfs.IdleLoop && !w.Busy
}

// killProbed judges a kill's look.
func (a *Actor) killProbed(ctx actor.Context, p *ptyproc.Probe, k *taskKill) {
	if k != a.kill || a.holder == nil || a.holder.id != k.taskID {
		return
	}
	k.last = p
	if k.sig == 0 {
		// Held: has the program read what it was given, or is it at work
		// elsewhere (see ReadyForInterrupt)? A program running may be
		// between a select that said "readable" and its read: input flushed
		// then leaves it blocked in a read of its line editor's, with the
		// signal's handling deferred to the next line typed.
		taken := p.ReadyForInterrupt()
		if !taken && time.Now().Before(k.until) {
			a.retryKill(k, time.Millisecond)
			return
		}
		if err := a.proc.Signal(syscall.SIGINT); err != nil {
			a.opts.Logger.Debug("terminal: task_kill's SIGINT", "terminal", a.opts.ID, "err", err)
		}
		a.signalled(k, syscall.SIGINT)
		return
	}
	// A reader that ignores SIGINT kept its line. SIGTERM and SIGKILL are
	// sent only when a command other than the shell at its input had the
	// terminal: whoever reads now (a shell, which ignores SIGTERM) started
	// a fresh line.
	conclusive := p.Err == nil && !p.InputPending && p.Drained && atInput(p.Wait) &&
		!p.SignalPending && !(p.SignalIgnored && k.sig == syscall.SIGINT)
	if !conclusive {
		k.confirm = procfs.Wait{}
		k.delay = min(2*k.delay, killMaxInterval)
		a.retryKill(k, k.delay)
		return
	}
	w := p.Wait
	w.CPU = 0
	if k.confirm != w || k.confirmOut != k.outputs {
		// A task preempted on its way out of a read looks, for a moment,
		// like one blocked in it: the same wait seen twice is the proof.
		k.confirm, k.confirmOut, k.confirmAt = w, k.outputs, time.Now()
		a.retryKill(k, time.Millisecond)
		return
	}
	if left := waitproof.LoopWatch(w) - time.Since(k.confirmAt); w.State == procfs.IdleLoop && left > 0 {
		// An event loop (node's REPL) waits on the terminal and a timer:
		// the same wait, with no work done, past one of its wake-ups.
		a.retryKill(k, left)
		return
	}
	sig := ptyproc.SignalName(k.sig)
	discarded := "the input it had not read was discarded"
	if k.dropped > 0 {
		discarded = fmt.Sprintf("the input it had not read was discarded, and %d bytes of the task's text were never typed", k.dropped)
	}
	var r Readiness
	switch {
	case k.outputs == 0 && time.Since(k.confirmAt) < silentBack:
		a.retryKill(k, 10*time.Millisecond)
		return
	case k.outputs == 0:
		r = Readiness{Reason: ReadyUnknown, Detail: fmt.Sprintf("%s (pid %d) took %s and is reading the terminal again, but printed nothing since: it may not have acted on the signal yet, and its line editor may still hold part of the task's input; %s", w.Comm, w.PID, sig, discarded)}
	case a.stream != nil && k.marker && w.PID == a.proc.PID():
		r = Readiness{Reason: ReadyPrompt, Detail: fmt.Sprintf("the shell took %s and is back at its prompt with an empty line; %s", sig, discarded)}
		a.promptIdle, a.promptSeen = true, true
	default:
		r = Readiness{Reason: ReadyStdin, Detail: fmt.Sprintf("%s (pid %d) took %s and is back reading the terminal; %s", w.Comm, w.PID, sig, discarded)}
	}
	a.endKill(ctx, r)
}

// endKill ends the killed task's wait with r.
func (a *Actor) endKill(ctx actor.Context, r Readiness) {
	k := a.kill
	a.stopKill()
	var done *waiter
	a.dropWaiters(func(w *waiter) bool {
		if w.kind == waitTask && w.callID == k.taskID {
			done = w
			return true
		}
		return false
	})
	if done != nil {
		a.lastReady = r.Reason
		a.answer(ctx, done, r)
	}
}

// taskHolds reports whether w is the wait of a task that r must not end:
// one still typing its input, or one being killed, which only the kill's
// proof, an exit, or a guess that says so ends (see taskKill).
func (a *Actor) taskHolds(w *waiter, r Readiness) bool {
	if w.kind != waitTask || r.Reason != ReadyPrompt && r.Reason != ReadyStdin && r.Reason != ReadyIdle {
		return false
	}
	if h := a.holder; h != nil && h.id == w.callID && h.feed != nil && r.Reason != ReadyIdle {
		return true
	}
	k := a.kill
	return k != nil && w.callID == k.taskID && (r.Reason != ReadyIdle || k.sig == 0)
}

func (a *Actor) stopKill() {
	if k := a.kill; k != nil && k.timer != nil {
		k.timer.Stop()
	}
	a.kill = nil
}
