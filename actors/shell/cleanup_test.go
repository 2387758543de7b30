package shell_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// A program left waiting for input that takes its time to clean up after
// SIGINT is let finish: no end-of-file byte is typed to it (one it never
// reads would be glued to the next line: `$'\004cd': command not found`,
// and the next line's rm ran in the wrong directory), no SIGTERM cuts its
// cleanup short, and it is not said to have kept waiting (issue 16 §1).
func TestASlowCleanupIsLetFinish(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	work, keep := filepath.Join(dir, "work"), filepath.Join(dir, "keep")
	bash(t, h, "a", "mkdir -p "+work+" "+keep+" && touch "+work+"/junk.txt "+keep+"/precious.txt && cd "+keep)
	waiting := bash(t, h, "a", `bash --norc -c 'trap "sleep 2.5; echo cleaned; exit 0" INT; read -p "Proceed? " x'`)
	if !waiting.WaitingForInput {
		t.Fatalf("not waiting for input: %+v", waiting)
	}
	res := bash(t, h, "a", "cd "+work+"\nrm -f *.txt\nls "+dir+"/*")
	for _, bad := range []string{"command not found", "end-of-file", "SIGTERM", "kept waiting"} {
		if strings.Contains(res.Text, bad) {
			t.Errorf("the next call says %q:\n%s", bad, res.Text)
		}
	}
	if !strings.Contains(res.Text, "cleaned") || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Errorf("the next call:\n%s", res.Text)
	}
	if _, err := os.Stat(filepath.Join(keep, "precious.txt")); err != nil {
		t.Errorf("precious.txt is gone: %v\n%s", err, res.Text)
	}
	if _, err := os.Stat(filepath.Join(work, "junk.txt")); err == nil {
		t.Errorf("junk.txt is still there: the rm ran elsewhere\n%s", res.Text)
	}
}

// A marker with the command number bash was at is no proof that nothing ran:
// a command can print a copy of one made before it went on (issue 16 §3).
func TestAStaleMarkerIsNoProofThatNothingRan(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	res := bash(t, h, "a", `true; M="${PS1@P}"; PS1=""; printf %s "$M"; touch `+dir+`/f; false`)
	if _, err := os.Stat(dir + "/f"); err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
	if res.NotRun || !(res.StatusUnknown || res.ExitCode != nil && *res.ExitCode == 1) {
		t.Fatalf("a command that ran: %+v", res)
	}
	// A syntax error still ran nothing, with bash's status.
	res = bash(t, h, "a", "fi")
	if !res.NotRun || res.ExitCode == nil || *res.ExitCode != 2 {
		t.Fatalf("a syntax error: %+v", res)
	}
	wantText(t, bash(t, h, "a", "echo fine"), "fine\n")
}

// A call that ends its shell has the shell's status as its own, so that a
// harness grading on exit_code does not count it as passed (issue 16 §5).
// A line that ran nothing says not_run, with bash's status when it set one.
func TestStatusesAHarnessCanRead(t *testing.T) {
	h := newHost(t, nil)
	for _, c := range []struct {
		command string
		code    int
		exited  bool
	}{
		{"exit 3", 3, true},
		{"set -e; false", 1, true},
		{"kill -9 $$", 137, true},
		{"fi", 2, false},
	} {
		res := bash(t, h, "a", c.command)
		if res.ExitCode == nil || *res.ExitCode != c.code || (res.ShellExited != "") != c.exited {
			t.Errorf("%q: exit %s, shell exited %q, want %d: %q", c.command, exitCode(res), res.ShellExited, c.code, res.Text)
		}
	}
	bash(t, h, "a", "shopt -s expand_aliases; alias nothing=''")
	if res := bash(t, h, "a", "nothing\necho two"); !res.NotRun || strings.Contains(res.Text, "two") {
		t.Errorf("an alias that expands to nothing: %+v", res)
	}
}

// Output written just before a timeout is in the result: the command is
// stopped and what it wrote is drained before the answer (issue 16 §2).
func TestOutputBeforeATimeoutIsKept(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.MaxOutputChars = 4 << 20 })
	dir := t.TempDir()
	sid := shellPID(t, h, "a")
	res := bashArgs(t, h, "a", shell.Args{TimeoutMs: 1500,
		Command: `i=0; while :; do i=$((i+1)); echo "L$i"; echo $i >> ` + dir + `/written; done`})
	testkit.SessionGone(t, sid)
	if !res.TimedOut {
		t.Fatalf("%+v", res)
	}
	b, err := os.ReadFile(dir + "/written")
	if err != nil {
		t.Fatal(err)
	}
	// The last whole line: that many lines reached the terminal.
	lines := strings.Split(string(b), "\n")
	last := lines[len(lines)-2]
	if !strings.Contains(res.Text, "\nL"+last+"\n") {
		tail := res.Text[max(0, len(res.Text)-300):]
		t.Fatalf("L%s was written before the timeout, and is not in the result; it ends:\n%s", last, tail)
	}
}

// After a reset, the next call starts only once the old shell's session is
// gone: nothing the old shell ran may still be there when the new one's
// commands run (issue 16 §9).
func TestTheNextShellStartsOnceTheOldIsGone(t *testing.T) {
	h := newHost(t, nil)
	for i := range 5 {
		mark := fmt.Sprintf("old-session-%d-%d", i, rand.IntN(1<<30))
		res := bashArgs(t, h, "a", shell.Args{TimeoutMs: 300,
			// A job that left the session (setsid): the sweeper finds it by
			// the session's token, a round after the session is killed.
			Command: `setsid -f bash -c 'exec -a ` + mark + ` sleep 1000'; sleep 100`})
		if !res.TimedOut {
			t.Fatalf("%+v", res)
		}
		next := bash(t, h, "a", "pgrep -f "+mark+" || echo none")
		if next.Text != "none\n" {
			t.Fatalf("round %d: the old shell's job ran while the next call did: %q", i, next.Text)
		}
	}
}

// The runtime's own stop of a timed-out command is not reported as the
// command's (bash's "[1]+ Stopped" job notice), and a call whose time ran
// out before its text was typed says it did not run.
func TestATimeoutSaysWhatRan(t *testing.T) {
	h := newHost(t, nil)
	for i := range 8 {
		res := bashArgs(t, h, "a", shell.Args{TimeoutMs: 300, Command: "echo a\nsleep 5\necho c"})
		if !res.TimedOut || res.NotRun || strings.Contains(res.Text, "Stopped") || !strings.HasPrefix(res.Text, "a\n") {
			t.Fatalf("round %d: %+v", i, res)
		}
	}
	bash(t, h, "a", `bash -c 'trap "sleep 3" INT; read x'`)
	res := bashArgs(t, h, "a", shell.Args{TimeoutMs: 500, Command: "echo never"})
	if !res.TimedOut || !res.NotRun || strings.Contains(res.Text, "never") {
		t.Fatalf("timed out stopping the earlier command: %+v", res)
	}
}

// A program that ignores SIGINT and waits in select on the terminal, in the
// terminal's own modes, gets no end-of-file byte: it would take it for no
// end-of-file, and one it never reads is glued to the next line typed
// ($'\004echo': command not found). A REPL with a line editor of its own
// still ends at Ctrl-D.
func TestNoEndOfFileByteIsLeftBehind(t *testing.T) {
	h := newHost(t, nil)
	waiting := bash(t, h, "a", `python3 -c "import signal,select; signal.signal(signal.SIGINT, signal.SIG_IGN); select.select([0],[],[]); print('readable')"`)
	if !waiting.WaitingForInput {
		t.Fatalf("%+v", waiting)
	}
	res := bash(t, h, "a", "echo next; echo again")
	if !strings.HasSuffix(res.Text, "next\nagain\n") || strings.Contains(res.Text, "not found") || strings.Contains(res.Text, "end-of-file") {
		t.Fatalf("the call after it: %q", res.Text)
	}
	if w := bash(t, h, "a", "python3"); !w.WaitingForInput {
		t.Fatalf("%+v", w)
	}
	res = bash(t, h, "a", "echo after")
	if !strings.Contains(res.Text, "sent end-of-file") || !strings.Contains(res.Text, "[it stopped with status 0]") || !strings.HasSuffix(res.Text, "after\n") {
		t.Fatalf("the REPL: %q", res.Text)
	}
}

// A command left waiting for input that the next call stops leaves nothing
// behind in that call: bash's read builtin under `trap "" INT` ends at a real
// end-of-file (the shell, its directory and $? kept); a prompt of its own
// (PS1="(venv) $PS1") is not output and the status is still told; an
// unfinished last line stays, ended, in the block of output since the
// previous call; bash's newline after SIGINT makes no empty block; and $?
// after incomplete text is the 2 the result said (issue 16, a hostile
// pass: D2, D3, D6, D8).
func TestAStoppedCommandLeavesNothingBehind(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	for _, c := range []struct {
		name, setup, waits, next string
		want                     []string // in the next result, in order
		bad                      []string
	}{
		{"read ignoring SIGINT", "cd " + dir, `trap "" INT; read x`, `pwd; echo "[$?]"`,
			[]string{"sent end-of-file (Ctrl-D)]\n[it stopped with status 1]\n" + dir + "\n[0]\n"}, []string{"reset", "fresh shell"}},
		{"a prompt of its own", "trap - INT", `PS1="(venv) $PS1"; read x`, "echo next",
			[]string{"[it stopped with status 130]\nnext\n"}, []string{"(venv)", "output since"}},
		{"an unfinished last line", "", `bash -c 'trap "printf cleaning; exit 3" INT; read x'`, "echo after",
			[]string{"[it stopped with status 3]\n[output since the previous call]\ncleaning\n[end of output since the previous call]\nafter\n"}, nil},
		{"an interrupted read", "", `printf 'Proceed? '; read x`, "echo after",
			[]string{"[it stopped with status 130]\nafter\n"}, []string{"output since"}},
	} {
		if c.setup != "" {
			bash(t, h, "a", c.setup)
		}
		if w := bash(t, h, "a", c.waits); !w.WaitingForInput {
			t.Fatalf("%s: not waiting: %+v", c.name, w)
		}
		res := bash(t, h, "a", c.next)
		if res.ShellReset || res.FreshShell || res.ExitCode == nil || *res.ExitCode != 0 {
			t.Errorf("%s: %+v", c.name, res)
		}
		for _, w := range c.want {
			if !strings.HasSuffix(res.Text, w) {
				t.Errorf("%s: the next result does not end with %q:\n%s", c.name, w, res.Text)
			}
		}
		for _, b := range c.bad {
			if strings.Contains(res.Text, b) {
				t.Errorf("%s: the next result has %q:\n%s", c.name, b, res.Text)
			}
		}
	}
	// The prompt of its own is the shell's again; a cancelled call's too.
	bash(t, h, "a", `PS1="(venv) $PS1"`)
	// The call may be answered as waiting for input before the cancel
	// comes (the read is proven in a millisecond): the next call then stops
	// it as a command left waiting, with the same words.
	cancelOrAnswered(t, h, "a", "echo go > $GO; read x")
	res := bash(t, h, "a", "echo next")
	if strings.Contains(res.Text, "(venv)") || !strings.HasSuffix(res.Text, "[it stopped with status 130]\nnext\n") {
		t.Errorf("after a cancelled read:\n%s", res.Text)
	}
	// Incomplete text says status 2, and so does $? after it.
	if r := bash(t, h, "a", "echo 'abc"); r.ExitCode == nil || *r.ExitCode != 2 {
		t.Fatalf("incomplete text: %+v", r)
	}
	wantText(t, bash(t, h, "a", "echo $?"), "2\n")
}

// A wait for input with a timeout of its own that ends within the call's
// time is waited out, as a script would wait: a timed prompt reaches its
// default (issue 16 §8). One that does not fit is still answered as
// waiting for input.
func TestATimedPromptIsWaitedOut(t *testing.T) {
	h := newHost(t, nil)
	for _, c := range []struct{ command, want string }{
		{`read -t 1.5 -p 'Continue? [Y/n] ' ans; echo "proceeding [${ans:-Y}]"`, "Continue? [Y/n] proceeding [Y]\n"},
		{`python3 -c "import select; print(select.select([0],[],[],1.2)[0])"; echo done`, "[]\ndone\n"},
		{`python3 -c "import select; p=select.poll(); p.register(0, select.POLLIN); print(p.poll(1200))"`, "[]\n"},
		// One after the other: the looks start again after the first.
		{`read -t 1.1 a; read -t 1.1 b; echo both`, "both\n"},
	} {
		res := bash(t, h, "a", c.command)
		if res.WaitingForInput || res.ExitCode == nil || *res.ExitCode != 0 || res.Text != c.want {
			t.Errorf("%q: %+v, want %q", c.command, res, c.want)
		}
	}
	res := bashArgs(t, h, "a", shell.Args{TimeoutMs: 2000, Command: "read -t 30 x"})
	if !res.WaitingForInput {
		t.Errorf("a wait longer than the call's time: %+v", res)
	}
	if next := bash(t, h, "a", "echo next"); !strings.HasSuffix(next.Text, "sent it SIGINT]\n[it stopped with status 130]\nnext\n") {
		t.Errorf("the call after: %q", next.Text)
	}
}

// The status query (a function of the runtime's) that bash does not come
// back from, or that ends the shell, fails safe with a reason: under set
// -T the user's RETURN trap runs as it returns (issue 16 §7). Before, the
// call hung until its timeout, or said the command had exited the shell.
func TestAStatusQueryThatDoesNotComeBackFailsSafe(t *testing.T) {
	h := newHost(t, nil)
	for _, c := range []struct{ setup, why string }{
		{`set -T; trap 'return 1' RETURN`, "did not come back from the runtime's status query within"},
		{`set -eT; trap false RETURN`, "while the runtime's status query ran"},
	} {
		bash(t, h, "a", c.setup)
		res := bashArgs(t, h, "a", shell.Args{TimeoutMs: 20000, Command: `PS1="(venv) $PS1"`})
		if res.TimedOut || !res.ShellReset || !res.StatusUnknown || res.ExitCode != nil || !strings.Contains(res.Text, c.why) {
			t.Errorf("%s: %+v", c.setup, res)
		}
		wantText(t, bash(t, h, "a", "echo next"), "next\n")
	}
}

// A line that another reader of the terminal took (a background job of a
// shell without job control) is said not to have run, also when the
// status query typed after it was taken too and the shell is reset
// (issue 16 §5).
func TestALineAnotherReaderTookIsSaidNotRun(t *testing.T) {
	h := newHost(t, nil)
	for i := range 6 {
		// An agent a round: any line typed while cat reads may go to it,
		// a line to stop it too.
		agent := fmt.Sprint("a", i)
		// Once cat reads (read(2) is system call 0 on amd64, where this runs).
		bash(t, h, agent, `set +m; cat /dev/tty > /dev/null & until [[ $(cut -d' ' -f1 /proc/$!/syscall) == 0 ]]; do :; done`)
		res := bash(t, h, agent, "sleep 0.1\necho two\necho three")
		if !res.StatusUnknown || !regexp.MustCompile(`took (it|the typed text)`).MatchString(res.Text) || strings.Contains(res.Text, "two\n") {
			t.Fatalf("round %d: %+v", i, res)
		}
	}
}

// Overstrike, as man and nroff print bold and underline for a terminal
// with no attributes (TERM=dumb), shows as the characters it makes
// (issue 16 §11); a backspace that strikes nothing stays.
func TestOverstrikeIsUndone(t *testing.T) {
	h := newHost(t, nil)
	wantText(t, bash(t, h, "a", `printf 'N\bNA\bAM\bME\bE\n  _\bl_\bs [_\bO_\bP_\bT_\bI_\bO_\bN] é\bé\nab\bc\n'`),
		"NAME\n  ls [OPTION] é\nab\bc\n")
}

// cancelOrAnswered is cancelWhenStarted for a call that may be answered
// before its cancel comes.
func cancelOrAnswered(t *testing.T, h *host.Host, agent, command string) {
	t.Helper()
	if err := cancelAfterStart(t, h, agent, command); err != nil && err != context.Canceled {
		t.Fatalf("the cancelled call returned %v", err)
	}
}
