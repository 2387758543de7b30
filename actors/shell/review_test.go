package shell_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/sigstate"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// Cases from a second hostile review of the bash tool's completion
// protocol: each once ended a call with a status bash never reported, lost
// state, or showed the protocol.

// A command that rewrites the status inside PS1 (same length, so only the
// prompt's text tells) cannot set its own status, now or later.
func TestRewrittenPromptStatusIsFoundOut(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "X=kept")
	for _, c := range []struct{ cmd, want string }{
		{`PS1=${PS1/'$?'/42}; false`, "1"},
		{`(exit 3)`, "3"},
		{`true`, "0"},
		{`PS1=${PS1/'\#'/99}; (exit 5)`, "5"},
		{`echo $X`, "0"},
	} {
		res := bash(t, h, "a", c.cmd)
		if res.StatusUnknown || exitCode(res) != c.want || res.FreshShell || res.ShellReset {
			t.Fatalf("%q: %q %+v, want exit %s", c.cmd, res.Text, res, c.want)
		}
	}
}

// PS2 markers printed while PS1 cannot be the runtime's (read-only) never
// make a call look incomplete or end it.
func TestForgedPS2UnderAStuckPS1(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "X=kept; P2=${PS2@P}; readonly PS1='$ '")
	for range 3 {
		res := bash(t, h, "a", `printf '%s' "$P2"; echo "[$X]"; (exit 3)`)
		if (!res.StatusUnknown && exitCode(res) != "3") || !strings.Contains(res.Text, "[kept]\n") || res.WaitingForInput || res.NotRun {
			t.Fatalf("%q %+v", res.Text, res)
		}
	}
	// A syntax error still stops the text where it is.
	res := bash(t, h, "a", "echo before\nif then\necho after")
	if exitCode(res) != "2" || !strings.Contains(res.Text, "before\n") || strings.Contains(res.Text, "after\n") ||
		!strings.Contains(res.Text, "syntax error") {
		t.Fatalf("syntax error under a stuck PS1: %q %+v", res.Text, res)
	}
	wantText(t, bash(t, h, "a", "echo $X"), "kept\n")
}

// Attributes that change what the prompts expand to (case, integer) are
// taken back; the calls after keep their state and show no marker.
func TestPromptAttributesAreUndone(t *testing.T) {
	h := newHost(t, nil)
	for _, setup := range []string{"declare -l PS1", "declare -u PS2", "declare -u PS1 PS2", "declare -i PS2"} {
		agent := "a" + strings.NewReplacer(" ", "", "-", "").Replace(setup)
		bash(t, h, agent, "X=kept")
		bash(t, h, agent, setup)
		for range 2 {
			res := bash(t, h, agent, "echo \"[$X]\"\necho two; (exit 3)")
			if res.Text != "[kept]\ntwo\n[exit code: 3]" || res.FreshShell || res.ShellReset {
				t.Fatalf("%s: %q %+v", setup, res.Text, res)
			}
		}
	}
}

// The status query removes only its own line from the history, whatever
// HISTIGNORE and HISTCONTROL say.
func TestHistoryKeepsTheUsersEntries(t *testing.T) {
	h := newHost(t, nil)
	for _, setup := range []string{"HISTIGNORE='*_q*'; PS1='$ '", "HISTCONTROL=ignoreboth; PS1='$ '", "HISTIGNORE='echo*'; PS1='$ '",
		"HISTIGNORE='*_q*'; readonly PS1='$ '", "HISTCONTROL=erasedups; readonly PS1='$ '"} {
		agent := fmt.Sprintf("h%d", len(setup))
		bash(t, h, agent, setup)
		bash(t, h, agent, "true first-entry")
		bash(t, h, agent, "true second-entry")
		res := bash(t, h, agent, "history")
		if !strings.Contains(res.Text, "first-entry") || !strings.Contains(res.Text, "second-entry") || strings.Contains(res.Text, "__dsh") {
			t.Fatalf("%s: %q", setup, res.Text)
		}
	}
}

// The status of a call survives the status query, into the next call and
// under set -e (an interactive bash under set -e exits on a failing
// command, so the query must never be one).
func TestStatusSurvivesTheQuery(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "PS1='$ '; X=kept")
	if res := bash(t, h, "a", "(exit 3)"); exitCode(res) != "3" {
		t.Fatalf("%q %+v", res.Text, res)
	}
	wantText(t, bash(t, h, "a", "echo $?"), "3\n")
	sid := shellPID(t, h, "a")
	bash(t, h, "a", "set -e")
	for range 3 {
		wantText(t, bash(t, h, "a", "echo $X"), "kept\n")
	}
	if got := shellPID(t, h, "a"); got != sid {
		t.Fatalf("the shell was replaced: %d then %d", sid, got)
	}
}

// Clipping with a cut-off character at the very end never passes the cap:
// the cut bytes show as U+FFFD and count.
func TestClippedOutputEndingInAPartialCharacter(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.MaxOutputChars = 5 })
	for _, c := range []string{`printf 'abcd\xe2\x9c'`, `printf 'abcde\xe2\x9c'`, `printf 'abc\xe2\x9c'`, `printf '\xe2\x9c\xe2\x9c\xe2\x9c\xe2'`} {
		res := bash(t, h, "a", c)
		kept, _, _ := strings.Cut(res.Text, "\n[output clipped")
		if n := utf8.RuneCountInString(kept); n > 5 || !utf8.ValidString(res.Text) {
			t.Fatalf("%s: %d characters kept, cap 5: %q", c, n, res.Text)
		}
	}
}

// Many agents whose commands wait for input at the same moment: each is
// told so, and each shell keeps its state.
func TestManyAgentsWaitingAtOnce(t *testing.T) {
	h := newHost(t, nil)
	atOnce(t, 50, func(i int) error {
		agent := fmt.Sprintf("w%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
		defer cancel()
		if _, err := h.Bash(ctx, agent, shell.Args{Command: fmt.Sprintf("X=%d", i)}); err != nil {
			return err
		}
		res, err := h.Bash(ctx, agent, shell.Args{Command: "cat"})
		if err != nil || !res.WaitingForInput {
			return fmt.Errorf("%s cat: %q %+v %v", agent, res.Text, res, err)
		}
		res, err = h.Bash(ctx, agent, shell.Args{Command: "echo $X"})
		if err != nil || !strings.HasSuffix(res.Text, fmt.Sprintf("%d\n", i)) || res.FreshShell || res.ShellReset {
			return fmt.Errorf("%s after: %q %+v %v", agent, res.Text, res, err)
		}
		return nil
	})
}

// Another reader of bash's terminal, so typed text may go to it: a
// background job of a shell without job control (in bash's own process
// group), or a program in a session of its own that opened the terminal by
// its path. Each call runs its command and reports its own status, or says
// that the text did not reach bash, or resets the shell naming the reader.
// Never a status for a command that did not run.
func TestAnotherReaderOfTheTerminal(t *testing.T) {
	for _, start := range []string{
		"X=kept; set +m; cat /dev/tty > /dev/null &",
		`X=kept; (setsid sh -c 'exec cat < "$0" > /dev/null' "$(tty)" &)`,
	} {
		t.Run(start, func(t *testing.T) {
			h := newHost(t, nil)
			bash(t, h, "a", start)
			stolen := 0
			for i := 0; i < 80 && stolen < 2; i++ {
				res := bash(t, h, "a", "echo \"[${X-}]\"; (exit 3)")
				switch {
				case res.ShellReset:
					if !strings.Contains(res.Text, "`cat`") || !res.StatusUnknown {
						t.Fatalf("reset without naming the reader: %q %+v", res.Text, res)
					}
					bash(t, h, "a", start)
					stolen++
				case res.NotRun:
					if !res.StatusUnknown || res.ExitCode != nil || !strings.Contains(res.Text, "`cat`") {
						t.Fatalf("not run, but: %q %+v", res.Text, res)
					}
					stolen++
				case strings.Contains(res.Text, "got only part of this command"):
					// The line was split between bash and the reader (bash
					// reads a byte at a time): no status for the piece.
					if !res.StatusUnknown || res.ExitCode != nil {
						t.Fatalf("split, but: %q %+v", res.Text, res)
					}
					stolen++
				default:
					if res.StatusUnknown || exitCode(res) != "3" || res.Text != "[kept]\n[exit code: 3]" {
						t.Fatalf("ran: %q %+v", res.Text, res)
					}
				}
			}
			if stolen == 0 {
				t.Fatal("the reader never took a line in 80 calls: the case was not exercised")
			}
		})
	}
}

// The status query calls builtins through `builtin`: a function named
// return or printf changes nothing when the query runs. (One named builtin
// resets the shell: TestProtocolBrokenBeyondRepairIsAnnounced.)
func TestShadowedBuiltinsLeaveTheQueryAlone(t *testing.T) {
	h := newHost(t, nil)
	for _, fn := range []string{"return", "printf"} {
		agent := "s" + fn
		bash(t, h, agent, "X=old")
		if res := bash(t, h, agent, "PS1='$ '; "+fn+"() { :; }; (exit 3)"); res.Text != "[exit code: 3]" || res.ShellReset {
			t.Fatalf("%s: %q %+v", fn, res.Text, res)
		}
		if next := bash(t, h, agent, "echo \"[${X-}]\"; (exit 4)"); next.Text != "[old]\n[exit code: 4]" {
			t.Fatalf("%s next: %q %+v", fn, next.Text, next)
		}
	}
}

func TestIgnoresReadsTheSignalDisposition(t *testing.T) {
	h := newHost(t, nil)
	pid := shellPID(t, h, "a")
	before, err := sigstate.Ignores(pid, 2)
	if err != nil || before {
		t.Fatalf("before trap: %v %v", before, err)
	}
	bash(t, h, "a", "trap '' INT")
	if after, err := sigstate.Ignores(pid, 2); err != nil || !after {
		t.Fatalf("after trap '' INT: %v %v", after, err)
	}
	if _, err := sigstate.Ignores(-5, 2); err == nil {
		t.Fatal("no error for a pid that cannot exist")
	}
}

// Listings of the shell's functions and variables run as commands: nothing
// in them passes for a marker, whether or not the prompt changed first.
func TestListingsOfTheShellRunAsCommands(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	for i, c := range []string{"declare -f", "set", "declare -p PS1 PS2", "PS1=x; touch " + dir + "/ran; declare -f", "readonly PS1=y; set"} {
		res := bash(t, h, "a", c)
		if res.StatusUnknown || res.NotRun || exitCode(res) != "0" || strings.Contains(res.Text, "\x1e") {
			t.Fatalf("%d %q: %.300q %+v", i, c, res.Text, res)
		}
	}
	if _, err := os.Stat(dir + "/ran"); err != nil {
		t.Fatal(err)
	}
}

// The prompt's text printed by a command is left out, and a notice counts it.
func TestPrintedPromptTextIsCounted(t *testing.T) {
	h := newHost(t, nil)
	res := bash(t, h, "a", `echo "[$PS1]"; echo after`)
	if !strings.HasPrefix(res.Text, "[]\nafter\n[") || !strings.Contains(res.Text, "bytes were left out") || exitCode(res) != "0" {
		t.Fatalf("%q %+v", res.Text, res)
	}
}

// A line that runs nothing (an alias that expands to nothing) looks like a
// syntax error from outside: the text stops there, and the note says both.
func TestEmptyAliasLineStopsTheTextWithANote(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `shopt -s expand_aliases; alias nothing=""`)
	res := bash(t, h, "a", "nothing\necho second")
	if !res.NotRun || strings.Contains(res.Text, "second\n") || !strings.Contains(res.Text, "an alias that expands to nothing") {
		t.Fatalf("%q %+v", res.Text, res)
	}
	if res := bash(t, h, "a", "echo first\nnothing"); !strings.HasPrefix(res.Text, "first\n[bash ran nothing for line 2") || res.NotRun {
		t.Fatalf("%q %+v", res.Text, res)
	}
}

// Without job control a background job that reads the terminal is in the
// shell's own (foreground) group: it is not the command waiting for input.
func TestBackgroundReaderIsNotTheCommandWaiting(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "set +m")
	res := bash(t, h, "a", "cat </dev/tty >/dev/null & sleep 0.3; echo done")
	if res.WaitingForInput || !strings.HasSuffix(res.Text, "done\n") || exitCode(res) != "0" {
		t.Fatalf("%q %+v", res.Text, res)
	}
	// (A foreground read beside it still counts: see internal/procfs.)
}

// A PROMPT_COMMAND that sets PS1 at every prompt: the prompt's text is not
// output, line after line.
func TestPromptCommandThatSetsPS1(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `PROMPT_COMMAND='PS1="static\$ "'; X=kept`)
	for range 2 {
		wantText(t, bash(t, h, "a", "echo a"), "a\n")
		wantText(t, bash(t, h, "a", "echo c\necho $X"), "c\nkept\n")
	}
}

// $_ is the user's after the status query ran between two calls.
func TestLastArgumentSurvivesTheQuery(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "PS1=x; echo hello")
	wantText(t, bash(t, h, "a", `echo "$_"`), "hello\n")
	bash(t, h, "a", "readonly PS1=y; echo world")
	wantText(t, bash(t, h, "a", `echo "$_"`), "world\n")
}

// A command that prints a copy of the prompt's marker with a status of its
// choosing and blanks PS1, so that the copy is the only marker: with
// verifyStatus the status is bash's all the same.
func TestVerifiedStatusCannotBeForgedByBlankingPS1(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.VerifyStatus = true })
	bash(t, h, "a", "X=kept")
	const forge = `x="${PS1@P}"; n="${x#*DSH}"; n="${n#*:}"; n="${n%%:*}"; y="${x/:$n:0:/:$((n+1)):42:}"; PS1=; printf '%s' "$y"`
	for i := range 3 {
		res := bash(t, h, "a", forge)
		if res.StatusUnknown || exitCode(res) != "0" {
			t.Fatalf("run %d: %q %+v", i, res.Text, res)
		}
	}
	wantText(t, bash(t, h, "a", "echo $X\necho two"), "kept\ntwo\n")
	if res := bash(t, h, "a", "false\n(exit 3)"); exitCode(res) != "3" {
		t.Fatalf("%q %+v", res.Text, res)
	}
}

// Text sent as one eval line that waits for input says what of it is left.
func TestWaitingInsideAnEvalLineSaysTheRestWaits(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `readonly PS2="> "`)
	res := bash(t, h, "a", "read x\necho after")
	if !res.WaitingForInput || !strings.Contains(res.Text, "runs only if that program ends by itself") {
		t.Fatalf("%q %+v", res.Text, res)
	}
}

// PROMPT_COMMAND's output shows once per line, also when a status query
// follows the line (and so runs PROMPT_COMMAND again); the prompt never.
func TestPromptCommandOutputShowsOnce(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `PROMPT_COMMAND="echo PC"`)
	wantText(t, bash(t, h, "a", `PS1="(v) "`), "PC\n")
	wantText(t, bash(t, h, "a", `echo x`), "x\nPC\n")
	v := newHost(t, func(c *config.Config) { c.Bash.VerifyStatus = true })
	bash(t, v, "a", `PROMPT_COMMAND="echo PC"`)
	for range 2 {
		wantText(t, bash(t, v, "a", "echo x"), "x\nPC\n")
	}
	wantText(t, bash(t, v, "a", `PS1="(venv) $PS1"`), "PC\n")
}
