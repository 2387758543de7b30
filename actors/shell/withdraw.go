package shell

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

// A call whose caller gives up (a host's timeout, a user's cancel, a
// dropped connection) is withdrawn the way Ctrl-C ends a command at a
// terminal: the shell and its state stay, and what the call printed waits
// for the next result.
//
//   - Nothing more of the text is typed. A line running now gets SIGINT on
//     the terminal's foreground group (its unread input dropped, as the key
//     does); an exchange of the runtime's own (start-up, status query,
//     stopping an earlier command) runs to its end and the text is not
//     typed at all.
//   - The call then ends as any call does (bash back at its prompt, a
//     program proven waiting for input, a timeout, the shell's exit), and
//     its result, headed by what happened, opens the next call's result
//     (those of several withdrawn calls in a row too, within a budget).
//   - A job still running bash.cancelGraceMs after SIGINT gets SIGTERM, then
//     SIGKILL (each killStep apart); only a command that outlives that, or
//     bash itself not coming back, resets the shell, and the kept result
//     says so.

// killStep is how long each step after SIGTERM waits (the first waits
// bash.cancelGraceMs).
const killStep = 2 * time.Second

// withdrawnBudget bounds the results of withdrawn calls waiting for the
// next call, in bytes: four times a result's own cap (maxOutputChars, a
// byte a character), so that many small ones all come through and a few
// large ones cannot grow the next result without end; older ones past it
// are dropped, counted in a notice.
func (a *Actor) withdrawnBudget() int { return 4 * a.opts.Config.MaxOutputChars }

// answer is the last call answered: its caller may give up as it comes.
type answer struct {
	id   string
	text string
}

// withdraw: call c, admitted, lost its caller.
func (a *Actor) withdraw(c *call) {
	if c.withdrawn {
		return
	}
	c.withdrawn = true
	if a.proc == nil || a.ex.step != stepText || a.exiting != nil {
		return // the runtime's own exchange: it ends, then nothing is typed
	}
	// The line was handed to the terminal's reader, which types it after
	// delivering what came before: a probe asked now is answered after the
	// line is typed (or queued to the writer, which SIGINT empties), so
	// SIGINT then cannot come before the line and let it run after.
	a.proc.ProbeForeground(withdrawProbe{c: c, gen: a.ex.gen})
}

// withdrawProbe tags the probe after which a withdrawn call's line gets
// SIGINT; n counts the looks after the first SIGINT (see recheck).
type withdrawProbe struct {
	c   *call
	gen uint64
	n   int
}

// A SIGINT that lands just as bash forks a command reaches the child before
// it has executed its program, while it still runs bash's own handler: the
// signal is taken and lost, and the command runs on. So the foreground
// group is looked at again, recheckEvery apart, recheckLooks times: when
// another group has the terminal than the one signalled, and bash is not
// back at its prompt, that group gets SIGINT too; bash itself gets only the
// first. (A program that took the first SIGINT and is cleaning up keeps its
// group, and is left to finish.)
const (
	recheckEvery = 10 * time.Millisecond
	recheckLooks = 20
	// bashLooks: while bash itself has the terminal, this many looks come
	// before it gets its SIGINT.
	bashLooks = 5
)

// withdrawRecheck asks for the next look.
type withdrawRecheck struct{ t withdrawProbe }

// interruptWithdrawn sends SIGINT for withdrawn call c, whose line is
// typed, unless the call moved on meanwhile.
func (a *Actor) interruptWithdrawn(t withdrawProbe, p *ptyproc.Probe) {
	c := a.cur
	if c == nil || c != t.c || a.ex.gen != t.gen || a.ex.step != stepText || c.interrupted && t.n == 0 {
		return // it ended, or went on to an exchange of the runtime's
	}
	switch {
	case a.classify(p) == stateAtPrompt:
		// The line is done and bash is back in its input read: nothing to
		// interrupt, and a SIGINT there could cost the next line typed.
		return
	case p.Err != nil, t.n > 0 && p.Pgrp == c.signalled:
		a.recheck(t) // the group signalled still has the terminal
		return
	case p.Pgrp == a.proc.PID() && (c.interrupted || t.n < bashLooks):
		// bash itself has the terminal: it may be forking a command, whose
		// child is in bash's group until it takes a group of its own. bash
		// gets one SIGINT, once that has settled (or for good: a builtin
		// loop, or a shell without job control).
		a.recheck(t)
		return
	case p.ForegroundForked && t.n < recheckLooks:
		// bash has forked the command, which has not executed its program
		// yet: a SIGINT now would meet bash's handler in the child.
		a.recheck(t)
		return
	}
	if err := a.proc.Signal(syscall.SIGINT); err != nil {
		c.escalated = append(c.escalated, fmt.Sprintf("[could not send SIGINT to the command (%v)]", err))
		a.armWithdrawn(c, 0, a.opts.Config.CancelGrace())
		return
	}
	c.signalled = p.Pgrp
	if !c.interrupted {
		c.interrupted = true
		a.armWithdrawn(c, 0, a.opts.Config.CancelGrace())
	}
	a.recheck(t)
}

// recheck looks at the foreground group again in a moment.
func (a *Actor) recheck(t withdrawProbe) {
	if t.n >= recheckLooks {
		return
	}
	t.n++
	send := a.send
	time.AfterFunc(recheckEvery, func() { send(&withdrawRecheck{t}) })
}

// rechecked: time for the next look, if the call is still on the same
// line.
func (a *Actor) rechecked(r *withdrawRecheck) {
	if c := a.cur; c != nil && c == r.t.c && a.ex.gen == r.t.gen && a.proc != nil {
		a.proc.ProbeForeground(r.t)
	}
}

// withdrawnTick: the next step for a withdrawn call still running.
type withdrawnTick struct {
	c    *call
	step int // 0: SIGTERM, 1: SIGKILL, 2: reset
}

func (a *Actor) armWithdrawn(c *call, step int, d time.Duration) {
	send, t := a.send, &withdrawnTick{c: c, step: step}
	// One that fires after its call ended is recognised by its call
	// (a.cur) and ignored; teardown stops it with the shell.
	a.stopTimer(&a.withdrawTimer)
	a.withdrawTimer = time.AfterFunc(d, func() { send(t) })
}

// withdrawnStep escalates against a withdrawn call's command that SIGINT
// did not end.
func (a *Actor) withdrawnStep(ctx actor.Context, t *withdrawnTick) {
	c := a.cur
	if c == nil || c != t.c || a.proc == nil {
		return // it ended
	}
	pgrp, _ := a.proc.ForegroundGroup()
	job := pgrp > 1 && pgrp != a.proc.PID()
	switch {
	case t.step == 0:
		// Also when bash's own group has the terminal (a shell without job
		// control runs its commands there): an interactive bash ignores
		// SIGTERM, its command does not.
		c.escalated = append(c.escalated, fmt.Sprintf("[it was still running %v after SIGINT: sent SIGTERM to the foreground job]", a.opts.Config.CancelGrace()))
		_ = a.proc.Signal(syscall.SIGTERM)
		a.armWithdrawn(c, 1, killStep)
	case t.step == 1 && job:
		c.escalated = append(c.escalated, "[it kept running: sent SIGKILL to the foreground job]")
		_ = a.proc.Signal(syscall.SIGKILL)
		a.armWithdrawn(c, 2, killStep)
	default:
		a.flushCarry()
		r := Result{ShellReset: true, StatusUnknown: true, FreshShell: c.fresh}
		a.finish(ctx, c, a.render(c, &r, append(a.unrun(c),
			"[the command could not be stopped, so the shell was killed; the next call starts a fresh shell]")))
		a.reset(ResetStuck, "a withdrawn call's command could not be stopped", nil)
	}
}

// withdrawnDone ends a withdrawn call at bash's prompt, with nothing more
// of its text typed. Text bash holds unfinished (a compound command begun)
// is cancelled first.
func (a *Actor) withdrawnDone(ctx actor.Context) {
	c := a.cur
	if c.continuing {
		a.cancelIncomplete(ctx)
		return
	}
	r, trailer := ranResult(c)
	if !c.ran {
		r.NotRun = true
		trailer = append(trailer, "[it did not run]")
	}
	a.finish(ctx, c, a.render(c, &r, append(trailer, a.unrun(c)...)))
}

// withdrawnHeading says what happened to withdrawn call c, whose result
// is r.
func withdrawnHeading(c *call, r Result) string {
	var b strings.Builder
	b.WriteString("[the previous call was cancelled by its caller")
	if c.interrupted {
		b.WriteString(", so its command was interrupted with SIGINT, as Ctrl-C would")
	} else {
		b.WriteString(", so nothing more of it was typed")
	}
	if !r.ShellReset {
		b.WriteString("; the shell and its working directory, variables and jobs are kept")
	}
	b.WriteString(". What it printed and how it ended:]")
	for _, e := range c.escalated { // said before the output, which came first
		b.WriteString("\n" + e)
	}
	return b.String()
}

// keepWithdrawn keeps the text of a result that reached nobody, under
// heading, for the next call's result.
func (a *Actor) keepWithdrawn(heading, text string) {
	k := a.kept
	block := heading + "\n"
	if text != "" {
		block += strings.TrimSuffix(text, "\n") + "\n"
	}
	block += "[end of the previous call's result]"
	k.withdrawn = append(k.withdrawn, block)
	total := 0
	for _, b := range k.withdrawn {
		total += len(b)
	}
	for len(k.withdrawn) > 1 && total > a.withdrawnBudget() {
		total -= len(k.withdrawn[0])
		k.withdrawn = k.withdrawn[1:]
		k.withdrawnDropped++
	}
}

// takeWithdrawn hands call c the kept results of withdrawn calls, oldest
// first, and the count of those dropped: its result opens with them (or,
// withdrawn itself, it hands them on; see finish).
func (a *Actor) takeWithdrawn(c *call) {
	k := a.kept
	c.carried = append(c.carried, k.withdrawn...)
	c.carriedDropped += k.withdrawnDropped
	k.withdrawn, k.withdrawnDropped = nil, 0
}

// passWithdrawn gives back what call c, withdrawn, carried of calls
// withdrawn before it, ahead of what came since.
func (a *Actor) passWithdrawn(c *call) {
	k := a.kept
	k.withdrawn = append(c.carried, k.withdrawn...)
	k.withdrawnDropped += c.carriedDropped
	c.carried, c.carriedDropped = nil, 0
}

// droppedNotice counts results of withdrawn calls dropped past the budget.
func (a *Actor) droppedNotice(n int) string {
	return fmt.Sprintf("[the results of %d earlier cancelled calls were dropped: the results of cancelled calls kept for the next call are bounded to %d bytes]", n, a.withdrawnBudget())
}
