package shell

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

const resetNotice = "[the shell was reset: the next call starts a fresh shell, so the working directory, variables, functions and background jobs are gone]"

// incompleteError is what bash says of a script that ends inside a quote,
// heredoc or compound command; the notice after it says what happened here.
const incompleteError = "bash: syntax error: unexpected end of file"

const incompleteNotice = "[the command is incomplete (an unterminated quote, heredoc or compound command): bash waited for the rest, " +
	"so what it had read was cancelled and did not run, as a script's would not; lines before it that were whole commands ran]"

// statusResult is the result of a call whose command ended with status st.
// Incomplete text is answered as bash answers a script that ends inside a
// command: its syntax error, with status 2 (not the 130 of the SIGINT that
// cancelled it here).
func (a *Actor) statusResult(c *call, st int) Result {
	if c.incomplete && !c.withdrawn {
		st = 2
	}
	r := Result{FreshShell: c.fresh, ExitCode: &st, NotRun: c.incomplete && !c.ran}
	var trailer []string
	switch {
	case c.incomplete && c.withdrawn:
		trailer = append(trailer, "[bash was in the middle of a multi-line command when the call was cancelled: the rest was not typed, and what bash had read of it was dropped with SIGINT]")
	case c.incomplete:
		trailer = append(trailer, incompleteError, incompleteNotice)
	}
	if st != 0 {
		trailer = append(trailer, fmt.Sprintf("[exit code: %d]", st))
	}
	return a.render(c, &r, trailer)
}

// render builds the result text: notes, output since the previous call, the
// call's output, then the trailer lines.
func (a *Actor) render(c *call, r *Result, trailer []string) Result {
	dropEvalTraces(c)
	c.before.end()
	c.out.end()
	var b strings.Builder
	if !c.withdrawn { // a withdrawn call passes them on (finish)
		if c.carriedDropped > 0 {
			b.WriteString(a.droppedNotice(c.carriedDropped) + "\n")
		}
		for _, n := range c.carried {
			b.WriteString(n)
			b.WriteByte('\n')
		}
	}
	for _, n := range c.notes {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	if !c.before.empty() {
		b.WriteString("[output since the previous call]\n")
		before := tidy(c.before.text())
		writeBlock(&b, before)
		if c.before.dropped > 0 {
			fmt.Fprintf(&b, "[%d more %s not kept%s]\n", c.before.dropped, bytesWere(c.before.dropped, true), cutNote(before))
		}
		if n := c.before.markerBytes; n > 0 {
			b.WriteString(markerNote(n) + "\n")
		}
		if n := c.before.cycleBytes; n > 0 {
			b.WriteString(cycleNote(n) + "\n")
		}
		b.WriteString("[end of output since the previous call]\n")
	}
	out := tidy(c.out.text())
	b.WriteString(out)
	if tail := c.out.tailText(); c.out.tailKeep > 0 && c.out.dropped > 0 {
		// The head, the notice of what was left out, then the end.
		r.ClippedBytes = c.out.dropped
		if out != "" && !strings.HasSuffix(out, "\n") {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[output clipped: %d %s left out here, between the first %d and the last %d characters%s]\n",
			c.out.dropped, bytesWere(c.out.dropped, false), utf8.RuneCountInString(out), utf8.RuneCountInString(tail), cutNote(out))
		b.WriteString(tidy(tail))
	} else if tail != "" {
		// Nothing was left out between them: one stream.
		b.WriteString(tidy(tail))
	} else if c.out.dropped > 0 {
		r.ClippedBytes = c.out.dropped
		trailer = append([]string{fmt.Sprintf(
			"[output clipped: only the first %d characters are shown%s; %d more %s not kept]",
			a.opts.Config.MaxOutputChars, cutNote(out), c.out.dropped, bytesWere(c.out.dropped, false))}, trailer...)
	}
	if n := c.out.cycleBytes; n > 0 {
		trailer = append([]string{cycleNote(n)}, trailer...)
	}
	if n := c.out.markerBytes; n > 0 {
		trailer = append([]string{markerNote(n)}, trailer...)
	}
	if len(trailer) > 0 {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Join(trailer, "\n"))
	}
	r.Text = b.String()
	return *r
}

// markerNote counts bytes left out because they had the shape of the
// runtime's prompt marker (bash's prompt printed unexpanded, with
// promptvars off, or the text of $PS1 printed by a command).
func markerNote(n int64) string {
	return fmt.Sprintf("[%d %s left out: they had the shape of the runtime's prompt marker (the text of $PS1)]", n, bytesWere(n, false))
}

// cycleNote counts bytes bash printed after the runtime's status query
// (PROMPT_COMMAND's output, a prompt) that did not repeat what it printed
// after the command.
func cycleNote(n int64) string {
	return fmt.Sprintf("[%d %s left out: bash printed them after the runtime's status query, with its prompt (PROMPT_COMMAND's output, PS1)]", n, bytesWere(n, false))
}

// tidy shows output as a terminal would: job notices without their CR,
// overstrike undone, rewritten lines (progress bars) as they end.
func tidy(s string) string { return collapseRewrites(unstrike(tidyJobNotices(s))) }

// overstrike is a character printed over itself (bold: "N\bN") or over an
// underscore (underline: "_\bN", or "N\b_"), as man and nroff print for a
// terminal that is not known to do attributes (TERM=dumb).
var overstrike = regexp.MustCompile(`_\x08([^\x08\n])|([^\x08\n])\x08_|([^\x08\n])\x08([^\x08\n])`)

// unstrike keeps the character that each overstrike shows.
func unstrike(s string) string {
	if !strings.Contains(s, "\b") {
		return s
	}
	return overstrike.ReplaceAllStringFunc(s, func(m string) string {
		a, b, _ := strings.Cut(m, "\b")
		switch {
		case a == "_":
			return b
		case b == "_", a == b:
			return a
		}
		return m // a character struck by another: left as it is
	})
}

// jobNotice is a line of bash's own about a job ("[1]+  Done  sleep 1")
// that ends in the "\r" bash adds when it reports at once (set -b).
var jobNotice = regexp.MustCompile(`(?m)^(\[\d+\][-+ ] +[A-Z][^\r\n]*)\r$`)

// tidyJobNotices drops that "\r": the terminal's doing, not the job's.
func tidyJobNotices(s string) string {
	if !strings.Contains(s, "\r\n") {
		return s
	}
	return jobNotice.ReplaceAllString(s, "$1")
}

// cutNote says, in a notice that follows kept text, that the text stops in
// the middle of a line (the newline before the notice is not the output's).
func cutNote(kept string) string {
	if kept != "" && !strings.HasSuffix(kept, "\n") {
		return ", the last line cut"
	}
	return ""
}

// bytesWere is "bytes were", or "byte was" for one; with ofIt, "bytes of
// it were".
func bytesWere(n int64, ofIt bool) string {
	noun, verb := "bytes", "were"
	if n == 1 {
		noun, verb = "byte", "was"
	}
	if ofIt {
		return noun + " of it " + verb
	}
	return noun + " " + verb
}

func writeBlock(b *strings.Builder, s string) {
	b.WriteString(s)
	if s != "" && !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

// joinLines puts lines back together as text.
func joinLines(lines []string) string { return strings.Join(lines, "\n") }
