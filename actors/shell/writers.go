package shell

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

// A shell whose output goes through a pipe (exec > >(tee -a log) 2>&1, the
// logging idiom) has its output written to the terminal by the pipe's
// reader, later than bash prints its prompt. Before a call is answered, the
// writers are waited for: every one blocked reading its empty pipe, and the
// terminal drained after that look, means everything the command printed is
// in. A writer still busy after writersWait (a slow filter, a writer that
// reads in another way) is named in a notice: what it had not written comes
// in a later result.
//
// The check costs a scan of /proc, so it is made only when bash's output is
// known to be a pipe, or when the call's text may have made it one (exec,
// or a sourced script): the usual call pays nothing.

// writersWait bounds the wait for the writers of one call.
const writersWait = 2 * time.Second

// writersPause is the pause between looks at busy writers.
const writersPause = 2 * time.Millisecond

// writersProbe tags a look at the writers of call c.
type writersProbe struct{ c *call }

// writersState is a call's wait for the writers of bash's output.
type writersState struct {
	until time.Time
	done  bool
}

// mayRedirect reports whether text may have sent bash's own output
// elsewhere: `exec >`, or a script sourced into the shell.
func mayRedirect(text string) bool {
	return strings.Contains(text, "exec") || strings.Contains(text, "source") || strings.Contains(text, ". ")
}

// awaitWriters starts the wait for the writers of bash's output, when it
// may be a pipe, and reports whether the call's answer must wait for it.
func (a *Actor) awaitWriters(c *call) bool {
	switch {
	case c.writers != nil:
		return !c.writers.done
	case a.proc == nil || !a.bash.outputPiped && !mayRedirect(c.args.Command):
		return false
	}
	c.writers = &writersState{until: time.Now().Add(writersWait)}
	a.proc.ProbeWriters(writersProbe{c})
	return true
}

// writersProbed: a look at the writers; the call is answered once they are
// done, or said to be late after writersWait.
func (a *Actor) writersProbed(ctx actor.Context, t writersProbe, p *ptyproc.Probe) {
	c := a.cur
	if c != t.c || c.writers == nil || c.writers.done {
		return
	}
	a.bash.outputPiped = p.OutputPiped
	if p.OutputPiped && !a.bash.ps1Stuck && mayRedirect(c.args.Command) {
		// bash's prompt may now go into the pipe too (exec 2>&1), and
		// reach the log at each line: the next call asks first, and the
		// query leaves the prompts empty while stderr is elsewhere.
		a.bash.needQuery = true
	}
	idle := p.Err == nil && p.Drained
	for _, w := range p.Writers {
		idle = idle && w.Idle
	}
	switch {
	case idle:
	case time.Now().After(c.writers.until):
		if len(p.Writers) > 0 {
			// The first reader found is the pipe's own (a later one may be
			// a child of it that holds the pipe too: the sleep of a loop).
			w := p.Writers[0]
			c.notes = append(c.notes, fmt.Sprintf("[bash's output goes through a pipe to `%s` (pid %d), which writes it to the terminal itself "+
				"and was still busy %s after the command ended: what it had not written yet comes in a later result]", w.Comm, w.PID, writersWait))
		}
	default:
		a.lookAgain(writersPause, &tick{kind: tickWriters, c: c})
		return
	}
	c.writers.done = true
	a.textDone(ctx)
}
