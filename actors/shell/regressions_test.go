package shell_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// Cases from a hostile review of the bash tool, each of which once went
// wrong.

// forger waits until bash is back at its prompt, takes the terminal's
// foreground from it for a moment (so that a look at /proc finds bash
// "busy"), gives it back and prints a marker made from bash's own prompt
// with the next command number and status 42.
const forger = `
import os, sys, time, signal
bash, prompt = int(sys.argv[1]), sys.argv[2]
f = prompt.strip("\x1e").split(":")
f[1], f[2] = str(int(f[1]) + 1), "42"
forged = ("\x1e" + ":".join(f) + "\x1e").encode()
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
tty = os.open("/dev/tty", os.O_RDWR)
deadline = time.time() + 5
while time.time() < deadline:
    try:
        if open("/proc/%d/syscall" % bash).read().startswith("0 0x0 "):
            break
    except OSError:
        pass
os.setpgid(0, 0)
os.tcsetpgrp(tty, os.getpgrp())
time.sleep(0.1)
os.tcsetpgrp(tty, bash)
os.write(tty, forged)
`

func TestForgerThatStealsTheTerminalCannotSetTheStatus(t *testing.T) {
	h := newHost(t, nil)
	script := filepath.Join(t.TempDir(), "forger.py")
	if err := os.WriteFile(script, []byte(forger), 0o600); err != nil {
		t.Fatal(err)
	}
	py := testkit.Python3(t)
	for i := range 8 {
		res := bash(t, h, "a", fmt.Sprintf(`%s %s $$ "${PS1@P}" & sleep 0.3; false`, py, script))
		if !res.StatusUnknown && exitCode(res) != "1" {
			t.Fatalf("run %d: the forger set the status: %q %+v", i, res.Text, res)
		}
		bash(t, h, "a", "wait") // the forger is done before the next run
	}
}

// A trap that blocks bash at its prompt, then prints a forged marker. (It
// waits with sleep: bash 5.2's read -t can miss its own alarm on a loaded
// machine and block for good, which would hang the test, not the runtime.)
func TestForgerInATrapCannotSetTheStatus(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `trap 'sleep 0.2; P=${PS1@P}; IFS=: read -r l s x r <<< "$P"; printf "%s:%s:42:%s" "$l" $((s+1)) "$r" >/dev/tty' USR1`)
	for i := range 8 {
		res := bash(t, h, "a", "(sleep 0.05; kill -USR1 $$) & false")
		if !res.StatusUnknown && exitCode(res) != "1" {
			t.Fatalf("run %d: the trap set the status: %q %+v", i, res.Text, res)
		}
	}
}

// Background jobs flooding forged PS1, PS2 and query markers while lines
// of several-line text and status queries run.
func TestFloodsOfForgedMarkersNeverSetAStatus(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "X=1")
	flood := `(trap '' TTOU; P=${PS1@P}; N=${P:4:16}; for ((i=0; i<1500; i++)); do ` +
		`IFS=: read -r l s x r <<< "${PS1@P}"; printf '%s:%s:42:%s\036DSH%s:c\036\036DSH%s:q:T:42:::\036' "$l" "$s" "$r" "$N" "$N" >/dev/tty; done) &` + "\n"
	for i := range 5 {
		res := bash(t, h, "a", flood+"true\nsleep 0.02\n(exit 3)")
		if res.NotRun || res.WaitingForInput || (!res.StatusUnknown && exitCode(res) != "3") {
			t.Fatalf("run %d: %q %+v", i, res.Text, res)
		}
		// (The forged markers are the job's output: the wait's result holds
		// them, clipped; the state is looked at after.)
		bash(t, h, "a", "wait")
		if got := bash(t, h, "a", "echo $X"); !strings.HasSuffix(got.Text, "1\n") {
			t.Fatalf("run %d: state lost: %.300q %+v", i, got.Text, got)
		}
	}
	// The status query, forced by a broken printf and stderr elsewhere.
	res := bash(t, h, "a", `N=${PS1:4:16}; (trap '' TTOU; for i in $(seq 200); do /usr/bin/printf '\036DSH%s:q:x:42:::e:\036' "$N" >/dev/tty; done) & enable -n printf; exec 2>/dev/null`)
	if !res.StatusUnknown && exitCode(res) != "0" {
		t.Fatalf("query: %q %+v", res.Text, res)
	}
}

// A syntax error stops several-line text where it is, as in a script: the
// lines before ran, the lines after did not.
func TestSyntaxErrorStopsTheText(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	bash(t, h, "a", "cd "+dir)
	res := bash(t, h, "a", "cd sub\nif then\npwd\ntouch after")
	if exitCode(res) != "2" || !strings.Contains(res.Text, "syntax error") || strings.Contains(res.Text, dir) ||
		!strings.Contains(res.Text, "lines 3 to 4 of the command were not run") {
		t.Fatalf("%q %+v", res.Text, res)
	}
	if _, err := os.Stat(filepath.Join(dir, "sub", "after")); err == nil {
		t.Fatal("a line after the syntax error ran")
	}
	wantText(t, bash(t, h, "a", "pwd"), filepath.Join(dir, "sub")+"\n")
}

// Bytes held back as the possible start of a marker, and output printed
// between calls by a shell that then dies, are never lost or run together.
func TestNoByteIsLostAtTheEdges(t *testing.T) {
	h := newHost(t, nil)
	res := bashWith(t, h, "a", "printf 'abc\\036DS'; sleep 5; true", timeoutMs(1000))
	if !res.TimedOut || !strings.HasPrefix(res.Text, "abc\x1eDS") {
		t.Fatalf("timeout: %q %+v", res.Text, res)
	}
	gate, openGate := testkit.Gate(t)
	sid := shellPID(t, h, "b")
	// The job prints only after the call that started it has returned.
	// Its last line is cut; the next shell's output does not continue it.
	bash(t, h, "b", "(read go < "+gate+"; echo LAST-WORDS; printf CUT; kill -9 $$) &")
	openGate("go")
	testkit.SessionGone(t, sid)
	next := bash(t, h, "b", "echo next")
	if !strings.Contains(next.Text, "LAST-WORDS\nCUT") || strings.Contains(next.Text, "CUTnext") ||
		!strings.Contains(next.Text, "SIGKILL") || !strings.HasSuffix(next.Text, "\nnext\n") {
		t.Fatalf("after the shell died: %q %+v", next.Text, next)
	}
}

// Nothing of the protocol shows: not with promptvars off, not under set -v,
// not in the history, not to tracing and traps that see every command,
// whichever file descriptor they write to.
func TestTheProtocolNeverShows(t *testing.T) {
	h := newHost(t, nil)
	for _, setup := range []string{
		"shopt -u promptvars", "set -v; PS1='$ '", "set -x; PS1='x> '",
		"BASH_XTRACEFD=1; set -x; PS1='$ '",
		"exec 7>&1; BASH_XTRACEFD=7; set -x; readonly PS1='$ '",
		// A DEBUG trap that writes to /dev/tty itself sees the query's
		// commands under functrace; to its standard output, nothing.
		"set -T; trap 'echo \"DBG $BASH_COMMAND\"' DEBUG; PS1='$ '",
		"set -T; trap 'echo \"RET $FUNCNAME\"' RETURN; PS1='$ '",
		"set -T; trap 'echo \"DBG $BASH_COMMAND\"' DEBUG; readonly PS1='$ '",
	} {
		agent := fmt.Sprintf("p%d", len(setup))
		for _, c := range []string{setup, "echo one", "echo two\necho three", "(exit 3)", "history"} {
			res := bash(t, h, agent, c)
			if strings.Contains(res.Text, "DSH") || strings.Contains(res.Text, "__dsh") || strings.Contains(res.Text, "\x1e") {
				t.Fatalf("%q then %q: %q", setup, c, res.Text)
			}
		}
	}
}

// A PS2 that PROMPT_COMMAND changes at every prompt, aliases of the
// reserved words the runtime could use, a closed stderr.
func TestPromptStateThatChangesUnderTheRuntime(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `X=kept; PROMPT_COMMAND='PS2="> "'`)
	// Status 2 and bash's message: as one eval line (its syntax error), or,
	// since the status query asked before the text sets PROMPT_COMMAND
	// aside for its own prompt and so leaves PS2 ours, as incomplete text
	// cancelled.
	if res := bash(t, h, "a", "echo 'inc"); res.ExitCode == nil || *res.ExitCode != 2 || !strings.Contains(strings.ToLower(res.Text), "unexpected e") {
		t.Fatalf("incomplete with a foreign PS2: %q %+v", res.Text, res)
	}
	wantText(t, bash(t, h, "a", "echo $X\necho two"), "kept\ntwo\n")

	bash(t, h, "b", "X=kept; shopt -s expand_aliases; alias '{'='echo HIJACK;{' '}'='echo HIJ2;}' '[['='echo H3;[['; PS1='$ '")
	if res := bash(t, h, "b", "echo $X\necho two"); res.Text != "kept\ntwo\n" || res.FreshShell {
		t.Fatalf("aliases: %q %+v", res.Text, res)
	}

	bash(t, h, "c", "X=kept; exec 2>&-")
	for range 2 {
		if res := bash(t, h, "c", "echo $X; false"); res.Text != "kept\n[exit code: 1]" || res.FreshShell {
			t.Fatalf("closed stderr: %q %+v", res.Text, res)
		}
	}
}

// A bash that stops itself is continued; one whose stdin left the terminal
// is reset with the reason.
func TestStoppedShellAndLostStdin(t *testing.T) {
	h := newHost(t, nil)
	res := bash(t, h, "a", "X=1; kill -STOP $$; echo after")
	if !strings.Contains(res.Text, "after\n") || !strings.Contains(res.Text, "SIGCONT") || exitCode(res) != "0" {
		t.Fatalf("stopped: %q %+v", res.Text, res)
	}
	wantText(t, bash(t, h, "a", "echo $X"), "1\n")
	bash(t, h, "b", "exec 0< <(sleep 100)")
	res = bash(t, h, "b", "echo never")
	if !res.ShellReset || !strings.Contains(res.Text, "standard input") {
		t.Fatalf("stdin gone: %q %+v", res.Text, res)
	}
}

// A command left waiting that ended by itself before the next call (a read
// with a timeout, a program under timeout(1)) is not interrupted: its end
// and its output are reported.
func TestAWaitThatEndsByItselfIsNotInterrupted(t *testing.T) {
	h := newHost(t, nil)
	fifo, ended := testkit.Signal(t)
	res := bash(t, h, "a", "timeout --foreground 0.5 cat; echo ended-$?; echo x > "+fifo)
	if !res.WaitingForInput {
		t.Fatalf("%q %+v", res.Text, res)
	}
	ended()
	next := bash(t, h, "a", "echo next")
	if strings.Contains(next.Text, "SIGINT") || !strings.Contains(next.Text, "ended by itself") ||
		!strings.Contains(next.Text, "ended-124") || !strings.HasSuffix(next.Text, "next\n") {
		t.Fatalf("%q %+v", next.Text, next)
	}
}

// A call queued behind one that ends in a reset (a timeout, exit) runs in
// the fresh shell. It was typed into the shell being reset and then
// answered "internal error: the shell actor failed".
func TestACallQueuedBehindAResetRunsInTheFreshShell(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "true")
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			args := shell.Args{Command: "echo hi"}
			switch i % 3 {
			case 0:
				args = shell.Args{Command: "sleep 10", TimeoutMs: 50}
			case 1:
				args = shell.Args{Command: "exit 3"}
			}
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
			defer cancel()
			res, err := h.Bash(ctx, "a", args)
			switch {
			case err != nil:
				t.Errorf("%q: %v", args.Command, err)
			case i%3 == 0 && !res.TimedOut:
				t.Errorf("%q: %+v, want a timeout", args.Command, res)
			case i%3 == 1 && res.ShellExited == "":
				t.Errorf("%q: %+v, want the shell's exit", args.Command, res)
			case i%3 == 2 && !strings.HasSuffix(res.Text, "hi\n"):
				t.Errorf("%q: %q, want hi", args.Command, res.Text)
			}
		})
	}
	wg.Wait()
}
