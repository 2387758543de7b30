package terminal

import (
	"fmt"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

// closing is a terminal_close under way: SIGHUP, again at doubling pauses,
// and SIGKILL (by the reaper) after the grace.
type closing struct {
	callID string
	sender *actor.PID
	timer  *time.Timer
	// hup repeats SIGHUP: a shell that gets it between printing its prompt
	// and entering its line editor only notes it, and reads on.
	hup      *time.Timer
	hupEvery time.Duration
}

// hupTick sends SIGHUP again to a terminal being closed.
type hupTick struct{ c *closing }

// close asks the program to end (SIGHUP, as when a terminal window closes),
// waits up to the grace for it, then answers with the final output and
// status and kills whatever is left of the session.
func (a *Actor) close(ctx actor.Context, m *Close) {
	if a.closing != nil {
		ctx.Respond(a.errorResult(m.CallID, ToolClose, fmt.Sprintf("terminal %s is already closing", a.opts.ID)))
		return
	}
	a.closing = &closing{callID: m.CallID, sender: ctx.Sender()}
	if a.exit != nil || a.proc == nil {
		a.finishClose(ctx)
		return
	}
	c, send := a.closing, a.send
	c.timer = time.AfterFunc(ms(a.opts.Config.KillGraceMs), func() { send(&graceTick{c}) })
	c.hupEvery = 5 * time.Millisecond
	a.hangUp(c)
}

// hangUp sends SIGHUP to the foreground group and the program, and again
// after a pause that doubles each time, until the program exits or the
// grace ends.
func (a *Actor) hangUp(c *closing) {
	_ = a.proc.Signal(syscall.SIGHUP)
	_ = syscall.Kill(a.proc.PID(), syscall.SIGHUP)
	send := a.send
	c.hup = time.AfterFunc(c.hupEvery, func() { send(&hupTick{c}) })
	c.hupEvery *= 2
}

func (a *Actor) finishClose(ctx actor.Context) {
	c := a.closing
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.hup != nil {
		c.hup.Stop()
	}
	status := "still running after SIGHUP: killed with SIGKILL"
	if a.exit == nil {
		// The reaper SIGKILLs it right after this answer.
		a.exit = &ptyproc.ExitStatus{Code: -1, Signal: syscall.SIGKILL}
	} else {
		status = a.exit.String()
	}
	r := Readiness{Reason: ReadyExited, Detail: status, Exit: a.exit}
	// The calls waiting take their output first; the close has the rest.
	a.resolveAll(ctx, r)
	end := a.hist.end()
	raw, from := a.hist.slice(a.readPos, end)
	p := page{raw: raw, from: from, asked: a.readPos,
		head:  a.lostNotes([]string{fmt.Sprintf("[terminal %s closed; its program's status: %s; every process of its session has been ended]", a.opts.ID, status)}),
		cover: a.coverage()}
	res := a.result(c.callID, ToolClose, p, r, false)
	a.teardown(ctx, "the terminal was closed")
	ctx.Send(c.sender, res)
	ctx.Stop(ctx.Self())
}
