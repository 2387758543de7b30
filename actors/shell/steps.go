package shell

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/sigstate"
	"github.com/dsh-actors/dsh-actors/internal/waitproof"
)

// The rules by which an exchange ends.
//
// A marker is anybody's: bash prints it as its prompt, but a command or a
// background job can print the same bytes. So an exchange ends only on a
// probe that proves bash blocked in one of its own input reads (see
// promptSigs), with the input read and every byte before the look
// delivered. Then the markers since the exchange began are counted: one line
// typed gives exactly one, a PS1 marker (it ran, or bash found nothing to
// run) or a PS2 marker (bash wants the rest); the query gives one q marker
// with its token. Any other count means that someone printed a marker: the
// status is unknown and nothing more of the text is typed. A marker with a
// command number bash cannot be at is not counted: it cannot be bash's.
//
// raw is the marker's bytes. One that cannot be bash's answer is output,
// printed by a command or a job, and goes where output goes; one that does
// not parse (PS1 printed as it is: by bash with promptvars off, or by
// `echo "$PS1"`) is left out and counted in a notice.
func (a *Actor) marker(ctx actor.Context, m marker, raw []byte) {
	ex := &a.ex
	if a.cur == nil || !ex.flushed {
		switch {
		case m.kind == markPS1 && a.waiting != nil:
			a.waiting.ended = &m // the waiting command ended by itself, perhaps
		case m.kind == markBroken:
			a.kept.idle.markerBytes += int64(len(raw))
		default:
			a.sink(raw) // bash is at its prompt already: not its answer
		}
		return
	}
	switch m.kind {
	case markPS1:
		if b := a.bash; ex.step != stepQuery && b.seqKnown && (m.seq < b.seq || m.seq > b.seq+1) {
			a.sink(raw) // a command number bash cannot be at: not bash's
			return
		}
		ex.ps1 = append(ex.ps1, m)
	case markPS2:
		ex.ps2++
	case markQuery:
		if m.token != ex.token {
			a.sink(raw) // another query's, or made up
			return
		}
		ex.query = append(ex.query, m)
		ex.reportAt = a.outputSoFar().len()
	default:
		// bash is likely back: prove it.
		if c := a.cur; c.begun {
			c.out.markerBytes += int64(len(raw))
		} else {
			a.kept.idle.markerBytes += int64(len(raw))
		}
	}
	// Prove it: is bash back at its prompt?
	a.proc.Probe(probeTag{ex.gen}, false)
}

// promptState is what a probe says about bash.
type promptState int

const (
	stateUnknown  promptState = iota // nothing proven: look again
	stateAtPrompt                    // bash is blocked in its own input read, input read, output delivered
	stateBusy                        // a job has the terminal, or bash is blocked in something else
)

func (a *Actor) classify(p *ptyproc.Probe) promptState {
	switch {
	case p.Err != nil:
		return stateUnknown
	case p.Pgrp != a.proc.PID():
		return stateBusy
	case !p.Leader.Blocked():
		return stateUnknown
	}
	ok, readline := a.bash.sigs.match(p.Leader, a.ex.ps2 > 0)
	if !ok {
		return stateBusy
	}
	if !p.Drained || p.InputPending {
		return stateUnknown
	}
	a.bash.readline = readline
	return stateAtPrompt
}

func (a *Actor) probed(ctx actor.Context, p *ptyproc.Probe) {
	a.opts.Logger.Debug("shell: probe", "pgrp", p.Pgrp, "leader", p.Leader.String(), "wait", p.Wait.State,
		"drained", p.Drained, "pending", p.InputPending, "err", p.Err)
	ex := &a.ex
	if tag, ok := p.Tag.(probeTag); ok && tag.gen != ex.gen {
		return // a look of an earlier exchange
	}
	if a.cur == nil || !ex.flushed {
		return
	}
	if !a.bash.started {
		a.startProbe(ctx, p)
		return
	}
	state := a.classify(p)
	switch state {
	case stateAtPrompt:
		a.wait.Stop()
		a.atPrompt(ctx)
		return
	case stateUnknown:
		if a.reprobe(p) {
			return
		}
	}
	if ex.step == stepInterrupt && ex.intr.step < 0 {
		if _, ours := p.Tag.(probeTag); ours {
			a.escalate(ctx) // the command still runs or waits: stop it
			return
		}
	}
	if !a.wait.Owns(p) {
		return
	}
	// One of the tracker's looks, which also tell what bash is doing.
	if a.stoppedShell(p) || a.stdinGone(ctx, p) {
		return
	}
	verdict, w := a.wait.Probe(p)
	if verdict != waitproof.Waiting {
		return
	}
	switch ex.step {
	case stepText:
		a.waitingForInput(ctx, w)
	case stepInterrupt:
		if time.Since(ex.intr.stepAt) >= escalateAfter {
			a.escalate(ctx)
		} else {
			a.wait.Again()
		}
	default:
		a.wait.Again()
	}
}

// A marker's probe that found bash still on its way to the prompt is taken
// again: maxReprobes times at once, then after pauses that double up to
// reprobeMaxPause, until timedReprobes of those; after that the tracker's
// looks go on, with their backoff. (On a loaded machine bash may need many
// milliseconds to get the CPU; a long backoff there would make one agent
// wait a tenth of a second while others are served.)
const (
	maxReprobes     = 3
	timedReprobes   = 64
	reprobeMaxPause = 4 * time.Millisecond
)

// reprobe takes an inconclusive probe of ours again and reports whether it
// did (or will, after a pause).
func (a *Actor) reprobe(p *ptyproc.Probe) bool {
	if _, ours := p.Tag.(probeTag); !ours {
		return false
	}
	ex := &a.ex
	switch {
	case ex.reprobes < maxReprobes:
		ex.reprobes++
		a.proc.Probe(probeTag{ex.gen}, false)
		return true
	case ex.reprobes < maxReprobes+timedReprobes:
		n := ex.reprobes - maxReprobes
		ex.reprobes++
		pause := min(100*time.Microsecond<<min(n, 10), reprobeMaxPause)
		t, send := &tick{kind: tickReprobe, c: a.cur, n: ex.gen}, a.send
		a.stopTimer(&a.reprobeTimer)
		a.reprobeTimer = time.AfterFunc(pause, func() { send(t) })
		return true
	}
	return false
}

// stoppedShell continues a bash that stopped itself (kill -STOP $$,
// suspend -f): nobody at a terminal would ever type to it again.
func (a *Actor) stoppedShell(p *ptyproc.Probe) bool {
	if !p.LeaderStopped || a.ex.continued {
		return false
	}
	a.ex.continued = true
	if err := syscall.Kill(a.proc.PID(), syscall.SIGCONT); err == nil {
		a.cur.notes = append(a.cur.notes, "[bash was stopped (SIGSTOP or suspend): sent it SIGCONT]")
	}
	a.wait.Again()
	return true
}

// stdinGone resets a bash that waits in its input read while the input
// typed to the terminal stays unread: its standard input is no longer the
// terminal (exec 0<file), so nothing typed will ever reach it.
func (a *Actor) stdinGone(ctx actor.Context, p *ptyproc.Probe) bool {
	if !p.InputPending || p.Pgrp != a.proc.PID() || !p.Leader.Blocked() || p.Leader.Nr != sysRead || p.Leader.Args[0] != 0 {
		return false
	}
	in, err := os.Readlink("/proc/" + strconv.Itoa(a.proc.PID()) + "/fd/0")
	if err == nil && in == a.proc.TTYName() {
		return false
	}
	a.broken(ctx, fmt.Sprintf("bash no longer reads its terminal: its standard input is %q (a command redirected it, as exec 0< does), so nothing typed can reach it", in))
	return true
}

// stderrElsewhere reports whether bash's stderr, where it prints its prompt,
// is not the terminal.
func (a *Actor) stderrElsewhere() bool {
	out, err := os.Readlink("/proc/" + strconv.Itoa(a.proc.PID()) + "/fd/2")
	return err != nil || out != a.proc.TTYName()
}

// textStolen names a program other than bash, started from it, that reads
// its terminal (a background job of a shell without job control, or a
// program that opened the terminal by its path): typed text reaches
// whichever of them reads first. Empty when there is none.
func (a *Actor) textStolen() string {
	readers, err := procfs.OtherReaders(a.proc.Tree(), a.proc.TTYName())
	if err != nil || len(readers) == 0 {
		return ""
	}
	return describeWaiter(readers[0]) + ", which reads the same terminal as bash " +
		"(a background job of a shell without job control, set +m, or a program that opened the terminal itself),"
}

// atPrompt: bash is proven back at its prompt; the exchange is over.
func (a *Actor) atPrompt(ctx actor.Context) {
	switch a.ex.step {
	case stepText:
		a.lineDone(ctx)
	case stepQuery:
		a.queryDone(ctx)
	case stepInterrupt:
		a.interruptDone(ctx)
	case stepCancel:
		a.cancelDone(ctx)
	}
}

// typeNext types the call's next line, or ends the call when none is left.
// At bash's prompt, a line that runs nothing (blank, a comment) is not typed;
// inside a quote or heredoc every line is text.
func (a *Actor) typeNext(ctx actor.Context) {
	c := a.cur
	if c.lines == nil {
		if a.bash.ps2Foreign || a.bash.ps1Stuck {
			c.eval, c.lines = true, []string{normalizeNewlines(c.args.Command)}
		} else {
			c.lines = splitText(c.args.Command)
		}
	}
	for !c.continuing && len(c.lines) > 1 && c.next < len(c.lines) && blankLine(c.lines[c.next]) {
		c.next++
	}
	if c.next >= len(c.lines) {
		a.textDone(ctx)
		return
	}
	line := c.lines[c.next]
	c.next++
	if c.eval {
		a.write(stepText, evalLine(line))
		return
	}
	a.write(stepText, frameLine(line, a.bash.readline))
}

// lineDone: bash answered the line just typed.
func (a *Actor) lineDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	switch {
	case ex.markers() > 1, c.eval && ex.ps2 > 0:
		// An eval line is complete: bash never asks for more of it.
		a.conflict(ctx)
		return
	case a.bash.ps1Stuck:
		// bash prints no marker of ours: any marker is someone else's.
		a.query(true)
		return
	case ex.markers() == 0:
		// Back at the prompt, no marker of ours: the line changed PS1,
		// promptvars or stderr. Ask.
		a.query(true)
		return
	case ex.ps2 == 1:
		c.continuing = true
		if c.next >= len(c.lines) {
			a.cancelIncomplete(ctx)
			return
		}
		a.typeNext(ctx)
		return
	}
	m := ex.ps1[0]
	if !m.ps1Ours || a.opts.Config.VerifyStatus {
		// PS1 has text of someone else's around the marker (an activation
		// script): bash printed it after the line. Ask, to know it. Or
		// the configuration trusts no marker a command could have printed.
		a.query(true)
		return
	}
	ran := !a.bash.seqKnown || m.seq != a.bash.seq
	a.bash.seq, a.bash.seqKnown = m.seq, true
	a.notePS2(c, m)
	a.lineAnswered(ctx, ran, m.status)
}

// lineAnswered: bash read the line just typed and ran it, or ran nothing;
// status is $? afterwards.
func (a *Actor) lineAnswered(ctx actor.Context, ran bool, status int) {
	c := a.cur
	c.continuing = false
	if ran {
		c.ran, c.status = true, status
		a.typeNext(ctx)
		return
	}
	if len(c.lines) == 1 && blankLine(c.lines[0]) {
		a.textDone(ctx) // blank text: nothing ran, as asked
		return
	}
	if thief := a.textStolen(); thief != "" {
		// The line never reached bash; $? is still an earlier command's.
		r := Result{FreshShell: c.fresh, NotRun: !c.ran, StatusUnknown: true}
		note := fmt.Sprintf("[bash did not get this command: %s took the typed text, so it did not run. "+
			"Stop that program (kill %%1 or its pid) before running more commands]", thief)
		if c.ran {
			note = fmt.Sprintf("[bash did not get line %d of the command: %s took it, so it did not run]", c.next, thief)
		}
		a.finish(ctx, c, a.render(c, &r, append([]string{note}, a.unrun(c)...)))
		return
	}
	// bash read the line and ran nothing: a syntax error (status 2), a
	// failed history expansion, or (with no message) an alias that expands
	// to nothing. From outside they look the same, and only the first two
	// print why; the text stops here, as a script would at a syntax error.
	r := Result{FreshShell: c.fresh, NotRun: !c.ran}
	var trailer []string
	if status != 0 {
		st := status
		r.ExitCode = &st
	}
	if len(c.lines) > 1 && !c.eval {
		trailer = append(trailer, fmt.Sprintf("[bash ran nothing for line %d of the command: %s]", c.next, ranNothing))
	} else if status == 0 {
		trailer = append(trailer, "[bash ran nothing for this command: "+ranNothing+"]")
	}
	trailer = append(trailer, a.unrun(c)...)
	if status != 0 {
		trailer = append(trailer, fmt.Sprintf("[exit code: %d]", status))
	}
	a.finish(ctx, c, a.render(c, &r, trailer))
}

const ranNothing = "a syntax error or a failed history expansion (its message is above), or an alias that expands to nothing"

// notePS2 remembers from a PS1 marker whether PS2 is still ours: when a
// command (or PROMPT_COMMAND, at every prompt) changed it, continuation
// prompts would be someone else's, so the rest of the text goes as one eval
// line, and a query tries to make PS2 ours again before the next call.
func (a *Actor) notePS2(c *call, m marker) {
	ours := a.proto.ps2Ours(m)
	a.bash.ps2Foreign = !ours
	if ours {
		return
	}
	a.bash.needQuery = true
	if !c.eval && c.next < len(c.lines) {
		rest := c.lines[c.next:]
		c.lines = append(c.lines[:c.next:c.next], joinLines(rest))
		c.eval = true
	}
}

// textDone: every line of the text is typed and answered.
func (a *Actor) textDone(ctx actor.Context) {
	c := a.cur
	r := Result{FreshShell: c.fresh}
	var trailer []string
	if c.ran {
		st := c.status
		r.ExitCode = &st
		if st != 0 {
			trailer = append(trailer, fmt.Sprintf("[exit code: %d]", st))
		}
	} else {
		zero := 0 // blank text, or lines that all ran nothing
		r.ExitCode = &zero
	}
	a.finish(ctx, c, a.render(c, &r, trailer))
}

// conflict: more markers came than bash prints. Some came from the command
// or a background job; which one is bash's cannot be proven.
func (a *Actor) conflict(ctx actor.Context) {
	c := a.cur
	a.bash.seqKnown = false
	r := Result{FreshShell: c.fresh, StatusUnknown: true}
	trailer := append(a.unrun(c), "[the exit status is unknown: more completion markers came than bash prints, "+
		"so the command or a background job printed one of the shell's markers]")
	a.finish(ctx, c, a.render(c, &r, trailer))
}

// waitingForInput ends the call early: a program is proven blocked reading
// the terminal.
func (a *Actor) waitingForInput(ctx actor.Context, w procfs.Wait) {
	c := a.cur
	a.flushCarry()
	who := describeWaiter(w)
	a.waiting = &waitingCommand{who: who}
	r := Result{WaitingForInput: true, FreshShell: c.fresh}
	note := fmt.Sprintf("[waiting for input: %s is blocked reading the terminal, so this call returned early with the output so far. "+
		"Interactive programs belong in a terminal (terminal_open). The next bash call will first interrupt it with SIGINT.]", who)
	trailer := append(a.unrun(c), note)
	if c.eval && strings.Contains(c.args.Command, "\n") {
		// One eval line: what follows the waiting program is part of it.
		trailer = append(trailer, "[the text went to bash as one eval line (its prompts are not the runtime's), so what follows the waiting program in it runs only if that program ends by itself]")
	}
	a.finish(ctx, c, a.render(c, &r, trailer))
}

func describeWaiter(w procfs.Wait) string {
	if w.Comm == "" {
		return "the command"
	}
	return fmt.Sprintf("`%s` (pid %d)", w.Comm, w.PID)
}

// unrun says which lines of the text were not typed.
func (a *Actor) unrun(c *call) []string {
	if c.eval || c.next >= len(c.lines) {
		return nil
	}
	if c.next == len(c.lines)-1 {
		return []string{fmt.Sprintf("[line %d of the command was not run]", c.next+1)}
	}
	return []string{fmt.Sprintf("[lines %d to %d of the command were not run]", c.next+1, len(c.lines))}
}

// query asks bash for $? and the prompt state, with a token of its own.
// afterLine: the status is that of the line just typed.
func (a *Actor) query(afterLine bool) {
	c := a.cur
	token := newToken()
	mark := a.kept.idle.len()
	if c.begun {
		mark = c.out.len()
	}
	ex := a.write(stepQuery, a.proto.queryLine(token))
	ex.token, ex.afterLine, ex.queryMark = token, afterLine, mark
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
	out := a.outputSoFar()
	// What bash printed after its report is its prompt cycle (PROMPT_COMMAND,
	// the query line's own prompt): not the command's.
	var cycle []byte
	if len(ex.query) == 1 {
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
		switch thief := a.textStolen(); {
		case thief != "":
			why = "the runtime could not ask bash for the command's status: " + thief + " took the typed question"
		case c.incomplete:
			why = "the command was incomplete, and SIGINT did not make bash drop it (a trap on INT keeps bash reading the rest), " +
				"so the runtime's status query went into the unfinished command"
		}
		if ex.afterLine {
			r := Result{FreshShell: c.fresh, ShellReset: true, StatusUnknown: true}
			a.finish(ctx, c, a.render(c, &r, append(a.unrun(c), "["+why+"; the shell was reset]", resetNotice)))
			a.reset(ResetBroken, why, nil)
			return
		}
		c.notes = append(c.notes, "["+why+"; the shell was reset and this call runs in a fresh shell]")
		a.reset(ResetBroken, why, c)
		return
	}
	q := ex.query[0]
	elsewhere := a.stderrElsewhere()
	b := &a.bash
	// The query's line was number q.seq: the line before it ran if that is
	// one more than bash's number at the prompt it was typed at.
	ran := !b.seqKnown || q.seq != b.seq
	b.seq, b.seqKnown = q.seq+1, true
	b.ps1Stuck = q.ps1ReadOnly || elsewhere
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
	// just then) the notice counts what was left out.
	if len(cycle) > 0 && !out.endsWith(string(cycle)) && !out.endsWith(string(cycle)+junk) {
		out.cycleBytes += int64(len(cycle))
	}
	if !ex.afterLine {
		a.next(ctx)
		return
	}
	// The prompt that bash printed after the line is not the command's
	// output.
	out.trimSuffix(junk)
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
	if len(ex.ps1) != 1 || !ex.ps1[0].ps1Ours || a.opts.Config.VerifyStatus {
		if ignored, _ := sigstate.Ignores(a.proc.PID(), syscall.SIGINT); ignored && len(ex.ps1) == 0 {
			a.broken(ctx, "the command was incomplete and bash, which ignores SIGINT (trap '' INT), still waits for the rest of it")
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

// beginInterrupt starts stopping the command left waiting for input. A probe
// comes first: the command may have ended by itself since (a read with a
// timeout), and then nothing is sent to bash. (A marker seen between calls
// is no proof: anyone can print one.) Otherwise SIGINT follows.
func (a *Actor) beginInterrupt(ctx actor.Context) {
	w := a.waiting
	ex := a.begin(stepInterrupt)
	ex.flushed = true
	ex.intr = &interrupt{who: w.who, step: -1}
	a.proc.Probe(probeTag{ex.gen}, false)
}

// escalate moves the interrupt sequence on: SIGINT, then end-of-file (a
// byte that readline-based programs take as such), then SIGTERM and SIGKILL
// to the foreground job; only a job that survives all that, or bash itself
// waiting, costs the shell.
func (a *Actor) escalate(ctx actor.Context) {
	c, in := a.cur, a.ex.intr
	in.step++
	in.stepAt = time.Now()
	pgrp, _ := a.proc.ForegroundGroup()
	job := pgrp > 1 && pgrp != a.proc.PID()
	switch {
	case in.step == 0:
		if err := a.proc.Signal(syscall.SIGINT); err != nil {
			c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, was still waiting for input and could not be interrupted (%v), so the shell was reset; this call runs in a fresh shell]", in.who, err))
			a.reset(ResetBroken, err.Error(), c)
			return
		}
		c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, was still waiting for input: sent it SIGINT]", in.who))
	case in.step == 1:
		c.notes = append(c.notes, "[it kept waiting after SIGINT: sent end-of-file (Ctrl-D)]")
		a.proc.Write([]byte{4})
	case in.step == 2 && job:
		c.notes = append(c.notes, "[it kept waiting: sent SIGTERM to the foreground job]")
		_ = a.proc.Signal(syscall.SIGTERM)
	case in.step == 3 && job:
		c.notes = append(c.notes, "[it kept waiting: sent SIGKILL to the foreground job]")
		_ = a.proc.Signal(syscall.SIGKILL)
	default:
		c.notes = append(c.notes, "[it could not be stopped, so the shell was reset; this call runs in a fresh shell]")
		a.reset(ResetStuck, in.who, c)
		return
	}
	// A marker from here on is bash's answer to this step.
	a.ex.ps1, a.ex.ps2, a.ex.query = nil, 0, nil
	a.wait.Start(a.proc)
	a.armStep(stepTimeout)
}

func (a *Actor) interruptDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	w := a.waiting
	a.waiting = nil
	switch {
	case ex.markers() > 1:
		// Someone printed markers while it was being stopped: the command
		// number is not known; the call goes on.
		a.bash.seqKnown = false
	case ex.intr.step < 0:
		// Proven back at its prompt before anything was sent: the command
		// ended by itself, with the status of the marker bash printed then.
		if m := w.ended; m != nil && m.ps1Ours && !a.bash.ps1Stuck {
			a.bash.seq, a.bash.seqKnown = m.seq, true
			c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, which was waiting for input, ended by itself with status %d]", w.who, m.status))
		} else {
			a.bash.seqKnown = false
			c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, which was waiting for input, ended by itself]", w.who))
		}
	case len(ex.ps1) == 1 && ex.ps1[0].ps1Ours && !a.bash.ps1Stuck:
		m := ex.ps1[0]
		a.bash.seq, a.bash.seqKnown = m.seq, true
		c.notes = append(c.notes, fmt.Sprintf("[it stopped with status %d]", m.status))
	default:
		// Back at the prompt, but the prompt is not ours: ask.
		a.bash.needQuery = true
	}
	a.next(ctx)
}

func (a *Actor) shellExited(ctx actor.Context, st ptyproc.ExitStatus, unread bool) {
	how := "[shell exited]"
	switch {
	case st.Signal != 0:
		how = fmt.Sprintf("[shell killed by signal: %s]", ptyproc.SignalName(st.Signal))
	case st.Code >= 0:
		how = fmt.Sprintf("[shell exited: code %d]", st.Code)
	}
	if changed, err := a.proc.RestoreModes(); changed && err == nil {
		how = how[:len(how)-1] + "; a command had changed the terminal's modes (stty), which can make bash read end-of-file]"
	}
	c := a.cur
	a.flushCarry()
	switch {
	case c != nil && c.begun && a.ex.step == stepText && unread && !c.ran && c.next == 1:
		// The shell ended before it read this command (it was exiting
		// already): run the command in a fresh shell instead of claiming it
		// ran.
		c.notes = append(c.notes, how[:len(how)-1]+" before it read this command; it runs in a fresh shell]")
		c.begun, c.lines, c.next = false, nil, 0
		c.out = newCollector(a.opts.Config.MaxOutputChars)
		a.reset(ResetExited, st.String(), c)
	case c != nil && c.begun:
		r := Result{ShellExited: st.String(), ShellReset: true, FreshShell: c.fresh}
		a.finish(ctx, c, a.render(c, &r, append(a.unrun(c), how, resetNotice)))
		a.reset(ResetExited, st.String(), nil)
	case c != nil:
		// The shell ended before this call's text was typed: the call goes
		// on in a fresh shell.
		c.notes = append(c.notes, how[:len(how)-1]+"; this call runs in a fresh shell]")
		a.reset(ResetExited, st.String(), c)
	default:
		a.kept.note = how[:len(how)-1] + " after the previous call; this call runs in a fresh shell]"
		a.reset(ResetExited, st.String(), nil)
	}
}
