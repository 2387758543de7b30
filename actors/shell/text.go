package shell

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

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
	if c.withdrawn {
		a.withdrawnDone(ctx)
		return
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
	typed := frameLine(line, a.bash.readline)
	if c.eval {
		typed = evalLine(line)
		if a.bash.xtrace {
			// (Before the first line is flushed, out is empty: 0.)
			c.evalTraced = append(c.evalTraced, c.out.len())
		}
	}
	// What bash has read so far: a line it answers having read less of it
	// than was typed went partly to another reader of the terminal.
	c.read = lineRead{}
	if a.io != nil {
		before, err := a.io.ReadChars()
		c.read = lineRead{before: before, typed: len(typed), line: len(typed), known: err == nil}
	}
	a.write(stepText, typed)
}

// lineRead is what bash had read before the line was typed, and what was
// typed to it since (the line, and a status query after it).
type lineRead struct {
	before uint64
	typed  int
	known  bool
	// line is how much of typed is the line (the rest is a query).
	line int
}

// lineTaken says what another reader of the terminal (thief), which took
// a status query typed after the line, took of the line itself, by what
// bash read since it was typed; empty when bash read the whole line or
// that is not known.
func (a *Actor) lineTaken(thief string) string {
	c, r := a.cur, a.cur.read
	if !r.known || a.io == nil || r.line == 0 || c.eval {
		return ""
	}
	after, err := a.io.ReadChars()
	if err != nil || after-r.before >= uint64(r.line) {
		return ""
	}
	which := fmt.Sprintf("line %d of the command", c.next)
	if len(c.lines) == 1 {
		which = "this command"
	}
	if after == r.before {
		return fmt.Sprintf("[%s did not run: %s took it before bash read it]", which, thief)
	}
	return fmt.Sprintf("[bash got only part of %s: %s took the rest, so what ran was a piece of it]", which, thief)
}

// readShort reports whether bash read fewer bytes during the exchange than
// were typed: another program reading the terminal took the rest, and what
// bash ran was a piece of the line.
func (a *Actor) readShort() bool {
	r := a.cur.read
	if !r.known || a.io == nil {
		return false
	}
	after, err := a.io.ReadChars()
	return err == nil && after-r.before < uint64(r.typed)
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
	if !m.ps1Ours || a.opts.Config.VerifyStatus || a.extdebugSuspect(m) {
		// PS1 has text of someone else's around the marker (an activation
		// script): bash printed it after the line. Ask, to know it. Or
		// the configuration trusts no marker a command could have printed.
		// Or bash may be skipping commands (extdebugSuspect): the query
		// says whether extdebug is on, and is skipped itself if so.
		a.query(true)
		return
	}
	if a.bash.seqKnown && m.seq == a.bash.seq {
		// The number bash was at: it ran nothing (a syntax error), or a
		// command printed a copy of the marker made before it went on
		// (M="${PS1@P}"; PS1=""; printf %s "$M"; touch f). Anyone can print
		// the number bash was at, so bash is asked: the status query's own
		// number says whether the line ran.
		a.query(true)
		return
	}
	a.bash.seq, a.bash.seqKnown = m.seq, true
	a.notePS2(c, m)
	a.lineAnswered(ctx, true, m.status)
}

// lineAnswered: bash read the line just typed and ran it, or ran nothing;
// status is $? afterwards.
func (a *Actor) lineAnswered(ctx actor.Context, ran bool, status int) {
	c := a.cur
	c.continuing = false
	if c.withdrawn {
		// Interrupted: whatever bash ran or did not, no more is typed.
		if ran {
			c.ran, c.status = true, status
		}
		a.withdrawnDone(ctx)
		return
	}
	if ran && a.readShort() {
		a.lineSplit(ctx)
		return
	}
	if ran {
		c.ran, c.status = true, status
		a.typeNext(ctx)
		return
	}
	if len(c.lines) == 1 && blankLine(c.lines[0]) {
		a.textDone(ctx) // blank text: nothing ran, as asked
		return
	}
	thief := a.textStolen()
	if thief == "" && a.ex.stolenLooks < stolenLooks {
		// A reader that just took the line may not be back in its read
		// yet: look again in a moment before calling it a syntax error.
		a.ex.stolenLooks++
		a.lookAgain(stolenPause, &tick{kind: tickStolen, c: c, n: a.ex.gen, status: status})
		return
	}
	if thief != "" {
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

// lineSplit ends the call whose line bash got only part of: another
// program reading the terminal took the rest. What bash ran was a piece of
// the line, so no status of it is given.
func (a *Actor) lineSplit(ctx actor.Context) {
	c := a.cur
	thief := a.textStolen()
	if thief == "" {
		thief = "another program reading the terminal"
	}
	r := Result{FreshShell: c.fresh, StatusUnknown: true}
	note := fmt.Sprintf("[bash got only part of this command: %s took the rest of the typed text, so what ran was a piece of it and its status is unknown. "+
		"Stop that program (kill %%1 or its pid) before running more commands]", thief)
	a.finish(ctx, c, a.render(c, &r, append([]string{note}, a.unrun(c)...)))
}

// stolenLooks and stolenPause: how often, and how far apart, a line that
// ran nothing is checked for another reader of the terminal.
const (
	stolenLooks = 3
	stolenPause = 2 * time.Millisecond
)

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
	if a.awaitWriters(c) {
		return
	}
	r, trailer := ranResult(c)
	if !c.ran {
		zero := 0 // blank text, or lines that all ran nothing
		r.ExitCode = &zero
	}
	a.finish(ctx, c, a.render(c, &r, trailer))
}

// dropEvalTraces leaves out what set -x printed for the eval lines the
// runtime typed (while the prompts are not the runtime's, the text goes as
// one eval line): the first line with "eval -- " after each began, which
// bash prints before anything the eval runs. The user's commands stay
// traced (one level deeper: "++"). Called as the result is rendered, when
// the writers are done: the trace may come through a pipe (exec > >(tee
// log) 2>&1).
func dropEvalTraces(c *call) {
	for i := len(c.evalTraced) - 1; i >= 0; i-- {
		c.out.dropFirstLineWith(c.evalTraced[i], "eval -- ")
	}
	c.evalTraced = nil
}

// ranResult is the result of call c with the status of its last command,
// if one ran, and the trailer that says a status other than zero.
func ranResult(c *call) (Result, []string) {
	r := Result{FreshShell: c.fresh}
	if !c.ran {
		return r, nil
	}
	st := c.status
	r.ExitCode = &st
	if st != 0 {
		return r, []string{fmt.Sprintf("[exit code: %d]", st)}
	}
	return r, nil
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

// waitingForInput ends the call early: a program is proven waiting for
// terminal input, or (inferred) waits on the terminal in a way that proves
// nothing and has been quiet for bash.inputSilenceMs.
func (a *Actor) waitingForInput(ctx actor.Context, w procfs.Wait, inferred bool) {
	c := a.cur
	a.flushCarry()
	who := describeWaiter(w)
	a.waiting = &waitingCommand{who: who, wait: w}
	r := Result{WaitingForInput: true, WaitInferred: inferred, FreshShell: c.fresh}
	note := fmt.Sprintf("[waiting for input: %s %s, so this call returned early with the output so far. "+
		"Interactive programs belong in a terminal (terminal_open). The next bash call will first interrupt it with SIGINT.]", who, w.How())
	if inferred {
		note = fmt.Sprintf("[waiting for input? %s %s. It printed nothing and used no processor time for %s, so this call returned early with the output so far; "+
			"it may still be working (a relay such as ssh waits like this while its remote command runs). "+
			"Interactive programs belong in a terminal (terminal_open). The next bash call will first interrupt it with SIGINT.]",
			who, w.How(), a.opts.Config.InputSilence())
	}
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
