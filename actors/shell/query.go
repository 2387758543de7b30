package shell

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/sigstate"
)

// query asks bash for $? and the prompt state, with a token of its own.
// afterLine: the status is that of the line just typed.
func (a *Actor) query(afterLine bool) { a.querySetting(afterLine, `"$?"`) }

// querySetting is query, with status handed back as $? instead of $?.
func (a *Actor) querySetting(afterLine bool, status string) {
	c := a.cur
	token := newToken()
	mark := a.kept.idle.len()
	if c.begun {
		mark = c.out.len()
	}
	grouped := !a.bash.plainQuery
	// While bash's stderr is not the terminal, its prompts stay empty.
	elsewhere, _ := a.bashStderr()
	line := a.proto.queryLineSetting(token, status, grouped, elsewhere)
	if afterLine {
		c.read.typed += len(line) // bash reads the query too before it answers
	}
	ex := a.write(stepQuery, line)
	ex.token, ex.afterLine, ex.queryMark = token, afterLine, mark
	ex.status, ex.grouped, ex.promptAt = status, grouped, mark
	ex.emptyPrompts = elsewhere
	a.armStep(queryDeadline)
}

// queryDeadline bounds the wait for the status query's report.
const queryDeadline = 3 * time.Second

// queryLate: bash did not come back from the status query by its
// deadline. The query is a function: under set -T (functrace) the user's
// RETURN trap runs as it returns, and one that returns itself (trap
// 'return 1' RETURN) makes bash loop for good, as it does for any function
// called. Nothing more can be typed to a bash that does not come back: the
// shell is reset, and the call says why.
func (a *Actor) queryLate(ctx actor.Context) {
	a.queryFailed(ctx, fmt.Sprintf("bash did not come back from the runtime's status query within %v: the query is a function, "+
		"and under set -T a RETURN trap runs as it returns; one that returns itself (trap 'return 1' RETURN) makes bash loop for good, "+
		"as it would for any function called (or a DEBUG trap or PROMPT_COMMAND took that long)", queryDeadline))
}

// outputSoFar is where output goes now: the call's, or what came before it.
func (a *Actor) outputSoFar() *collector {
	if c := a.cur; c != nil && c.begun {
		return &c.out
	}
	return &a.kept.idle
}

func (a *Actor) queryDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	failed := len(ex.query) == 0 || (len(ex.query) > 1 && !ex.afterLine)
	if failed && !c.incomplete && ex.stolenLooks < stolenLooks && a.textStolen() == "" {
		// No report: a program reading the terminal may have taken the
		// question, and not be back in its read yet to be seen. Look
		// again in a moment, before anything of the output is touched.
		ex.stolenLooks++
		a.lookAgain(stolenPause, &tick{kind: tickQueryStolen, c: c, n: ex.gen})
		return
	}
	if len(ex.query) == 0 && len(ex.ps1) == 1 && ex.ps1[0].ps1Ours && a.extdebugSuspect(ex.ps1[0]) {
		// bash came back to a prompt of ours without running the query:
		// a DEBUG trap under extdebug skipped it.
		a.outputSoFar().dropLinesWith(ex.queryMark, ex.token)
		a.querySkipped(ctx)
		return
	}
	if len(ex.query) == 0 && ex.grouped && !a.cur.incomplete && a.textStolen() == "" {
		// No report from a query line in a group: an alias of `{` or `}`
		// may have taken it apart. Asked again without the group.
		a.bash.plainQuery = true
		a.outputSoFar().dropLinesWith(ex.queryMark, ex.token)
		stopped, promptAt := ex.stopped, ex.promptAt
		a.querySetting(ex.afterLine, ex.status)
		a.ex.stopped, a.ex.promptAt, a.ex.retried = stopped, promptAt, true
		return
	}
	out := a.outputSoFar()
	// What bash printed after its report is its prompt cycle (PROMPT_COMMAND,
	// the query line's own prompt): not the command's. Unless bash's output
	// goes through a pipe (exec > >(tee log) 2>&1): then what came after the
	// report is the command's, late, and bash's prompts are dropped as they
	// come (see marker).
	elsewhere, piped := a.bashStderr()
	var cycle []byte
	if len(ex.query) == 1 && !piped && !a.bash.outputPiped {
		cycle = out.cutFrom(ex.reportAt)
	}
	// What bash echoes of the query (xtrace, set -v) carries the token.
	out.dropLinesWith(ex.queryMark, ex.token)
	if len(ex.query) != 1 {
		if len(ex.query) > 1 && ex.afterLine {
			a.conflict(ctx)
			return
		}
		why := "bash no longer reports the end of a command: a command changed its prompt (PS1, PS2, promptvars or standard error), " +
			"and the runtime's status query failed too (it needs the builtins `builtin`, `local`, `printf`, `shopt`, `history`, " +
			"`declare` and `return` enabled, no function named `builtin`, a free file descriptor, and typed text reaching bash as it is: no bind of its keys)"
		if a.bash.extdebug {
			why += ", or a DEBUG trap under `shopt -s extdebug` made bash skip it"
		}
		var taken []string
		switch thief := a.textStolen(); {
		case thief != "":
			why = "the runtime could not ask bash for the command's status: " + thief + " took the typed question"
			if ex.afterLine {
				if t := a.lineTaken(strings.TrimSuffix(thief, ",")); t != "" {
					taken = append(taken, t)
				}
			}
		case c.incomplete:
			why = "the command was incomplete, and SIGINT did not make bash drop it (a trap on INT keeps bash reading the rest), " +
				"so the runtime's status query went into the unfinished command"
		}
		a.queryFailed(ctx, why, taken...)
		return
	}
	q := ex.query[0]
	b := &a.bash
	b.extdebug, b.optsSeen, b.plainQuery = q.extdebug, q.opts, q.bracesAliased
	b.xtrace = q.xtrace
	// The query's line was number q.seq: the line before it ran if that is
	// one more than bash's number at the prompt it was typed at.
	ran := !b.seqKnown || q.seq != b.seq
	b.seq, b.seqKnown = q.seq+1, true
	b.ps1Stuck = q.ps1ReadOnly || elsewhere
	b.promptsEmpty = ex.emptyPrompts && !q.ps1ReadOnly && !q.ps2ReadOnly
	b.promptPiped = piped
	b.ps2Foreign = q.ps2ReadOnly
	// The query line's own prompt (PS1 is ours again unless it is stuck)
	// tells whether PROMPT_COMMAND changed PS2 again.
	for _, m := range ex.ps1 {
		if m.seq == b.seq && m.ps1Ours && !a.proto.ps2Ours(m) {
			b.ps2Foreign = true
		}
	}
	junk := ""
	if !elsewhere {
		junk = a.proto.promptJunk(q.prompt)
	}
	// The cycle after the query repeats the one after the command (the
	// same PROMPT_COMMAND output, the same prompt, or less of it): nothing
	// is lost. Otherwise (a prompt that changes every time, a job printing
	// just then, a PROMPT_COMMAND that could not be set aside printing
	// something new) what it printed before a prompt like the one
	// reported is output, and the rest is counted in a notice.
	var shown []byte
	if len(cycle) > 0 && !out.endsWith(string(cycle)) && !out.endsWith(string(cycle)+junk) {
		if body, ok := bytes.CutSuffix(cycle, []byte(junk)); ok {
			shown = body
		} else {
			out.cycleBytes += int64(len(cycle))
		}
	}
	// The prompt bash printed before the query was typed is not output:
	// it ends where the query began, whatever a DEBUG trap printed for
	// the query after it. (A query asked again printed it once more.)
	trimPrompt := func() {
		if ex.retried && out.cutBefore(ex.queryMark, junk) && out.cutBefore(ex.promptAt, junk) {
			return
		}
		if !out.cutBefore(ex.promptAt, junk) {
			out.trimSuffix(junk)
		}
	}
	if !ex.afterLine {
		if s := ex.stopped; s != nil {
			// Asked after a command left waiting was stopped (or ended):
			// its status, and the prompt it left behind is not output.
			trimPrompt()
			a.tidyStopped(s.mark)
			c.notes = append(c.notes, fmt.Sprintf(s.note, q.status))
		}
		out.write(shown)
		a.next(ctx)
		return
	}
	// The prompt that bash printed after the line is not the command's
	// output.
	trimPrompt()
	out.write(shown)
	if ex.retried {
		// The query line in a group ran something else (an alias of `{`
		// or `}`): $? is that command's now.
		r := Result{FreshShell: c.fresh, StatusUnknown: true}
		trailer := append(a.unrun(c), "[the exit status is unknown: an alias of `{` or `}` took the runtime's status query apart "+
			"and ran in its place, so $? was no longer the command's when it was asked again]")
		a.finish(ctx, c, a.render(c, &r, trailer))
		return
	}
	if c.incomplete {
		// Asked after SIGINT cancelled incomplete text.
		a.finish(ctx, c, a.statusResult(c, q.status))
		return
	}
	if (b.ps2Foreign || b.ps1Stuck) && !c.eval && c.next < len(c.lines) {
		c.lines = append(c.lines[:c.next:c.next], joinLines(c.lines[c.next:]))
		c.eval = true
	}
	a.lineAnswered(ctx, ran, q.status)
}

// extdebugSuspect reports whether bash may be skipping commands, by a PS1
// marker of ours: a DEBUG trap that returns non-zero makes bash skip the
// command it runs before, under shopt -s extdebug. Whether extdebug is on
// is the status query's to say, and is known while BASHOPTS keeps the
// length it had then.
func (a *Actor) extdebugSuspect(m marker) bool {
	return a.bash.extdebug || m.opts != a.bash.optsSeen
}

// querySkipped: bash came back from the status query to a prompt of ours
// without running it. A DEBUG trap under shopt -s extdebug that returns
// non-zero does that to every command: bash prints nothing and reports
// status 0 for each, exit and `trap - DEBUG` included, so nothing typed can
// reach it any more; the shell is reset.
func (a *Actor) querySkipped(ctx actor.Context) {
	const why = "bash skipped the runtime's status query: a DEBUG trap under `shopt -s extdebug` returned non-zero, " +
		"and bash skips the command such a trap runs before. One that does so for every command leaves nothing typed able to reach bash " +
		"(`exit`, `trap - DEBUG` and `shopt -u extdebug` would be skipped too, each with status 0 and no output)"
	c := a.cur
	if !a.ex.afterLine {
		a.queryFailed(ctx, why)
		return
	}
	a.flushCarry()
	r := Result{FreshShell: c.fresh, ShellReset: true, StatusUnknown: true}
	trailer := append(a.unrun(c), "["+why+"; this command may have been skipped as well (bash reports status 0 and prints nothing for a command it skips), "+
		"so its status is unknown; the shell was reset]", resetNotice)
	a.finish(ctx, c, a.render(c, &r, trailer))
	a.reset(ResetBroken, why, nil)
}

// queryFailed resets a shell whose status query failed, for the reason
// why: the call is answered with an unknown status, or, asked before its
// text, runs in a fresh shell.
func (a *Actor) queryFailed(ctx actor.Context, why string, taken ...string) {
	c := a.cur
	a.flushCarry()
	if a.ex.afterLine {
		// A line another reader took whole, with none before it run: the
		// text did not run.
		r := Result{FreshShell: c.fresh, ShellReset: true, StatusUnknown: true,
			NotRun: !c.ran && len(taken) > 0 && strings.Contains(taken[0], "did not run")}
		trailer := append(append(taken, a.unrun(c)...), "["+why+"; the shell was reset]", resetNotice)
		a.finish(ctx, c, a.render(c, &r, trailer))
		a.reset(ResetBroken, why, nil)
		return
	}
	c.notes = append(c.notes, "["+why+"; the shell was reset and this call runs in a fresh shell]")
	a.reset(ResetBroken, why, c)
}

// cancelIncomplete: bash waits for the rest of the text (an unterminated
// quote, heredoc or compound command). SIGINT makes it drop what it read,
// as Ctrl-C does at a prompt.
func (a *Actor) cancelIncomplete(ctx actor.Context) {
	c := a.cur
	ex := a.begin(stepCancel)
	ex.flushed = true
	ex.cancelMark = c.out.len()
	c.incomplete = true
	if err := a.proc.Signal(syscall.SIGINT); err != nil {
		a.broken(ctx, fmt.Sprintf("could not interrupt bash (%v)", err))
		return
	}
	a.wait.Start(a.proc)
	a.armStep(stepTimeout)
}

func (a *Actor) cancelDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	// bash ends the cancelled line with a newline ("^C" and a newline with
	// readline): the runtime's doing, not output.
	for _, echo := range []string{"\n", "^C\n"} {
		if c.out.len() == ex.cancelMark+len(echo) && c.out.trimSuffix(echo) {
			break
		}
	}
	if ex.markers() > 1 {
		a.conflict(ctx)
		return
	}
	if len(ex.ps1) != 1 || !ex.ps1[0].ps1Ours || a.opts.Config.VerifyStatus || !c.withdrawn {
		if ignored, _ := sigstate.Ignores(a.proc.PID(), syscall.SIGINT); ignored && len(ex.ps1) == 0 {
			a.broken(ctx, "the command was incomplete and bash, which ignores SIGINT (trap '' INT), still waits for the rest of it")
			return
		}
		if !c.withdrawn {
			// Answered as a script's syntax error, status 2: $? says so
			// too in the next call (the SIGINT left 130). The query hands
			// 2 back as $?.
			a.querySetting(true, "2")
			return
		}
		// Back at the prompt without a marker of ours (PS1 changed by
		// PROMPT_COMMAND, say): ask.
		a.query(true)
		return
	}
	m := ex.ps1[0]
	a.bash.seq, a.bash.seqKnown = m.seq, true
	a.finish(ctx, c, a.statusResult(c, m.status))
}

// broken resets a shell that cannot be talked to, answering the call.
func (a *Actor) broken(ctx actor.Context, why string) {
	c := a.cur
	a.flushCarry()
	r := Result{FreshShell: c.fresh, ShellReset: true, IsError: true}
	a.finish(ctx, c, a.render(c, &r, append(a.unrun(c), "["+why+"; the shell was reset]", resetNotice)))
	a.reset(ResetBroken, why, nil)
}
