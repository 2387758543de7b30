package shell

import (
	"fmt"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

// tickKind says which of the actor's own timers a tick comes from.
type tickKind int

const (
	tickTimeout tickKind = iota
	tickStep
	tickReprobe // a marker's proof, looked for again
	tickStolen  // another look for a program that took a line
	// tickQueryStolen: another look for a program that took the status
	// query.
	tickQueryStolen
	tickWriters // another look at the writers of bash's output
)

type tick struct {
	kind tickKind
	c    *call
	n    uint64
	// status is the $? a tickStolen look goes on with.
	status int
}

func (a *Actor) ticked(ctx actor.Context, t *tick) {
	c := a.cur
	if c == nil || t.c != c {
		return
	}
	switch t.kind {
	case tickTimeout:
		if time.Now().Before(c.deadline) {
			return // fired for an earlier deadline as it was re-armed
		}
		if !c.admitted {
			a.passNotesOn(c)
			a.finish(ctx, c, Result{TimedOut: true, IsError: true, Text: gateTimeout(c, a.opts.Gate.Slots())})
			return
		}
		if a.proc == nil {
			// Admitted, and waiting for the session of the shell reset
			// before it to be gone (oldShellGone): no shell of its own
			// yet, so nothing of it ran, and there is none to stop.
			a.passNotesOn(c)
			a.finish(ctx, c, Result{TimedOut: true, IsError: true, NotRun: true, Text: oldShellTimeout(c)})
			return
		}
		a.beginTimeout(c)
	case tickWriters:
		if a.proc != nil {
			a.proc.ProbeWriters(writersProbe{c})
		}
	case tickReprobe:
		if t.n == a.ex.gen && a.proc != nil {
			a.proc.Probe(probeTag{a.ex.gen}, false)
		}
	case tickStolen:
		if t.n == a.ex.gen && a.proc != nil {
			a.lineAnswered(ctx, false, t.status)
		}
	case tickQueryStolen:
		if t.n == a.ex.gen && a.proc != nil && a.ex.step == stepQuery {
			a.queryDone(ctx)
		}
	case tickStep:
		if t.n != a.stepN {
			return
		}
		switch a.ex.step {
		case stepText:
			// A wait with a timeout of its own was waited out: look again.
			a.wait.Start(a.proc)
		case stepQuery:
			a.queryLate(ctx)
		case stepInterrupt:
			a.escalate(ctx, false)
		case stepStart:
			a.startFailed(ctx, fmt.Sprintf("bash did not answer its start-up line %d within %v", a.ex.startLine+1, startTimeout))
		case stepCancel:
			a.broken(ctx, "the command was incomplete and bash did not come back to its prompt after SIGINT")
		}
	}
}

// armCallTimer sets the one call timer of this actor to c's deadline. The
// timer names the call armed last when it fires; ticked ignores a firing
// before that call's deadline (one that raced with the re-arming).
func (a *Actor) armCallTimer(c *call) {
	a.timedCall.Store(c)
	if a.callTimer != nil {
		a.callTimer.Reset(time.Until(c.deadline))
		return
	}
	armed, send := &a.timedCall, a.send
	a.callTimer = time.AfterFunc(time.Until(c.deadline), func() {
		send(&tick{kind: tickTimeout, c: armed.Load()})
	})
}

// armStep times the current exchange's step.
func (a *Actor) armStep(d time.Duration) {
	a.stopTimer(&a.stepTimer)
	a.stopTimer(&a.lookTimer)
	a.stepN++
	t, send := &tick{kind: tickStep, c: a.cur, n: a.stepN}, a.send
	a.stepTimer = time.AfterFunc(d, func() { send(t) })
}

// lookAgain sends t to the actor after d, in place of any look pending.
func (a *Actor) lookAgain(d time.Duration, t *tick) {
	a.stopTimer(&a.lookTimer)
	send := a.send
	a.lookTimer = time.AfterFunc(d, func() { send(t) })
}

func (a *Actor) stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

// gateTimeout is the answer to a call whose time ran out at the gate.
// oldShellTimeout says that call c's time ran out before its shell could
// start.
func oldShellTimeout(c *call) string {
	limit := ""
	if c.args.TimeoutMs > c.timeout.Milliseconds() {
		limit = fmt.Sprintf(" (the configured limit; %d ms was asked for)", c.args.TimeoutMs)
	}
	return fmt.Sprintf("[timed out after %d ms%s before a fresh shell could start for it: the processes of the shell reset before it "+
		"were still being ended, so nothing of it was typed; the next call starts the fresh shell]", c.timeout.Milliseconds(), limit)
}

func gateTimeout(c *call, slots int) string {
	limit := ""
	if c.args.TimeoutMs > c.timeout.Milliseconds() {
		limit = fmt.Sprintf(" (the configured limit; %d ms was asked for)", c.args.TimeoutMs)
	}
	calls := "calls"
	if slots == 1 {
		calls = "call"
	}
	return fmt.Sprintf("[timed out after %d ms%s waiting for its turn: only %d bash %s may start at once on this host (admission.slots), and others came first; nothing of it was typed]",
		c.timeout.Milliseconds(), limit, slots, calls)
}

// A call past its time is answered with everything its command wrote to the
// terminal before it was stopped: the foreground group gets SIGSTOP (so it
// writes no more), the reader delivers what the terminal holds (probes,
// until one finds it drained), and only then is the call answered and the
// shell killed. Meanwhile nothing else about the call is decided: the
// actor's other messages about it are left alone (see Receive).

// drainMax bounds the wait for a timed-out call's last output.
const drainMax = 500 * time.Millisecond

// drainLooks bounds the probes of that drain.
const drainLooks = 64

// timeoutProbe tags a probe of a timed-out call's drain; drained ends the
// drain when drainMax has passed.
type (
	timeoutProbe struct {
		c *call
		n int
	}
	drained struct{ c *call }
)

func (a *Actor) beginTimeout(c *call) {
	c.timingOut = true
	// bash first: stopped, it cannot report its job stopped ("[1]+
	// Stopped"), which the drain would take for the command's output.
	_ = syscall.Kill(a.proc.PID(), syscall.SIGSTOP)
	_ = a.proc.Signal(syscall.SIGSTOP)
	a.proc.Probe(timeoutProbe{c: c}, false)
	send := a.send
	a.stopTimer(&a.stepTimer)
	a.stepTimer = time.AfterFunc(drainMax, func() { send(&drained{c}) })
}

// timeoutProbed: a look of the drain; one that found the terminal drained
// ends it.
func (a *Actor) timeoutProbed(ctx actor.Context, t timeoutProbe, p *ptyproc.Probe) {
	if a.cur != t.c || !t.c.timingOut {
		return
	}
	if !p.Drained && t.n < drainLooks {
		t.n++
		a.proc.Probe(t, false)
		return
	}
	a.endTimeout(ctx, t.c)
}

// endTimeout answers timed-out call c and kills its shell.
func (a *Actor) endTimeout(ctx actor.Context, c *call) {
	if a.cur != c || !c.timingOut {
		return
	}
	a.flushCarry()
	// Its text not typed yet (the time ran out stopping an earlier
	// command): nothing of it ran.
	r := Result{TimedOut: true, ShellReset: true, IsError: true, FreshShell: c.fresh, NotRun: !c.begun}
	limit := ""
	if c.args.TimeoutMs > c.timeout.Milliseconds() {
		limit = fmt.Sprintf(" (the configured limit; %d ms was asked for)", c.args.TimeoutMs)
	}
	note := fmt.Sprintf("[timed out after %d ms%s: the command and its shell were killed, with its background jobs; the next call starts a fresh shell]", c.timeout.Milliseconds(), limit)
	a.finish(ctx, c, a.render(c, &r, append(a.unrun(c), note)))
	a.reset(ResetTimeout, fmt.Sprintf("after %v", c.timeout), nil)
}
