package shell

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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
//     its result, headed by what happened, opens the next call's result.
//   - A job still running bash.cancelGraceMs after SIGINT gets SIGTERM, then
//     SIGKILL (each killStep apart); only a command that outlives that, or
//     bash itself not coming back, resets the shell, and the kept result
//     says so.

// killStep is how long each step after SIGTERM waits (the first waits
// bash.cancelGraceMs).
const killStep = 2 * time.Second

// keptWithdrawn bounds the results of withdrawn calls waiting for the next
// call; older ones are dropped, counted in a notice.
const keptWithdrawn = 8

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
	a.proc.Probe(withdrawProbe{c: c, gen: a.ex.gen}, false)
}

// withdrawProbe tags the probe after which a withdrawn call's line gets
// SIGINT.
type withdrawProbe struct {
	c   *call
	gen uint64
}

// interruptWithdrawn sends SIGINT for withdrawn call c, whose line is
// typed, unless the call moved on meanwhile.
func (a *Actor) interruptWithdrawn(t withdrawProbe) {
	c := a.cur
	if c == nil || c != t.c || a.ex.gen != t.gen || a.ex.step != stepText || c.interrupted {
		return // it ended, or went on to an exchange of the runtime's
	}
	if err := a.proc.Signal(syscall.SIGINT); err != nil {
		c.notes = append(c.notes, fmt.Sprintf("[could not send SIGINT to the command (%v)]", err))
	} else {
		c.interrupted = true
	}
	a.armWithdrawn(c, 0, a.opts.Config.CancelGrace())
}

// withdrawnTick: the next step for a withdrawn call still running.
type withdrawnTick struct {
	c    *call
	step int // 0: SIGTERM, 1: SIGKILL, 2: reset
}

func (a *Actor) armWithdrawn(c *call, step int, d time.Duration) {
	send, t := a.send, &withdrawnTick{c: c, step: step}
	// The call's own timers are stopped with it; this one is recognised
	// by its call (a.cur) when it fires late.
	time.AfterFunc(d, func() { send(t) })
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
	case t.step == 0 && job:
		c.notes = append(c.notes, fmt.Sprintf("[it was still running %v after SIGINT: sent SIGTERM to the foreground job]", a.opts.Config.CancelGrace()))
		_ = a.proc.Signal(syscall.SIGTERM)
		a.armWithdrawn(c, 1, killStep)
	case t.step == 1 && job:
		c.notes = append(c.notes, "[it kept running: sent SIGKILL to the foreground job]")
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
	r := Result{FreshShell: c.fresh}
	var trailer []string
	if c.ran {
		st := c.status
		r.ExitCode = &st
		if st != 0 {
			trailer = append(trailer, fmt.Sprintf("[exit code: %d]", st))
		}
	} else {
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
	return b.String()
}

// keepWithdrawn keeps the text of a result that reached nobody, under
// heading, for the next call's result.
func (a *Actor) keepWithdrawn(heading, text string) {
	k := a.kept
	if len(k.withdrawn) == keptWithdrawn {
		k.withdrawn = k.withdrawn[1:]
		k.withdrawnDropped++
	}
	block := heading + "\n"
	if text != "" {
		block += strings.TrimSuffix(text, "\n") + "\n"
	}
	block += "[end of the previous call's result]"
	k.withdrawn = append(k.withdrawn, block)
}

// takeWithdrawn is what the next call's result opens with: the kept
// results of withdrawn calls, oldest first.
func (a *Actor) takeWithdrawn() []string {
	k := a.kept
	out := k.withdrawn
	if k.withdrawnDropped > 0 {
		out = append([]string{fmt.Sprintf("[the results of %d earlier cancelled calls were dropped: only the last %d are kept]", k.withdrawnDropped, keptWithdrawn)}, out...)
	}
	k.withdrawn, k.withdrawnDropped = nil, 0
	return out
}
