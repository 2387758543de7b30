package shell_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// cancelWhenStarted runs command (which must write to the fifo testkit
// gives it as $GO, then block) and cancels the call once it has started.
func cancelWhenStarted(t *testing.T, h *host.Host, agent, command string) {
	t.Helper()
	if err := cancelAfterStart(t, h, agent, command); err != context.Canceled {
		t.Fatalf("the cancelled call returned %v", err)
	}
}

// cancelAfterStart runs command, in which $GO names a FIFO the command
// writes to once it has started, cancels the call then, and returns what
// the call returned.
func cancelAfterStart(t *testing.T, h *host.Host, agent, command string) error {
	t.Helper()
	fifo, started := testkit.Signal(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.Bash(ctx, agent, shell.Args{Command: strings.ReplaceAll(command, "$GO", fifo)})
		done <- err
	}()
	started()
	cancel()
	return <-done
}

// A cancelled call is Ctrl-C: the command is interrupted, the rest of its
// text is not typed, the shell and its state stay, and what the call
// printed opens the next result.
func TestACancelledCallIsInterruptedAndTheShellKept(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "export MARK=old; cd /tmp")
	sid := shellPID(t, h, "a")
	sleep := fmt.Sprintf("sleep %d.5", 100000+rand.IntN(800000))
	cancelWhenStarted(t, h, "a", "echo partial-output\necho go > $GO; "+sleep+"\necho third-line")
	testkit.Eventually(t, "the interrupted sleep gone", func() (bool, string) {
		left := testkit.CommandsRunning(sleep)
		return len(left) == 0, strings.Join(left, ", ")
	})
	next := bash(t, h, "a", `echo "[$MARK $PWD]"; `+testkit.ShellPID)
	for _, want := range []string{
		"cancelled by its caller, so its command was interrupted with SIGINT",
		"the shell and its working directory, variables and jobs are kept",
		"partial-output\n",
		"[exit code: 130]",
		"[line 3 of the command was not run]",
		"[old /tmp]\n",
	} {
		if !strings.Contains(next.Text, want) {
			t.Errorf("next result lacks %q:\n%s", want, next.Text)
		}
	}
	if got := testkit.HostPID(t, next.Text); got != sid {
		t.Errorf("the shell is %d, was %d", got, sid)
	}
	if next.FreshShell || next.ShellReset || strings.Contains(next.Text, "third-line") {
		t.Errorf("next result: %+v", next)
	}
	// Told once: the call after has nothing of it.
	wantText(t, bash(t, h, "a", "echo again"), "again\n")
}

// A command that ignores SIGINT gets SIGTERM after bash.cancelGraceMs, and
// the shell is still kept; also in a shell without job control, where the
// command runs in bash's own group (the interactive bash ignores SIGTERM).
func TestACancelledCommandThatIgnoresSIGINTGetsSIGTERM(t *testing.T) {
	for _, setup := range []string{"export MARK=kept", "set +m; export MARK=kept"} {
		t.Run(setup, func(t *testing.T) {
			h := newHost(t, func(c *config.Config) { c.Bash.CancelGraceMs = 100 })
			bash(t, h, "a", setup)
			sleep := fmt.Sprintf("sleep %d.5", 100000+rand.IntN(800000))
			cancelWhenStarted(t, h, "a", `bash -c 'trap "" INT; echo go > $GO; exec `+sleep+`'`)
			next := bash(t, h, "a", `echo "[$MARK]"`)
			for _, want := range []string{"interrupted with SIGINT", "sent SIGTERM to the foreground job", "[exit code: 143]", "[kept]\n"} {
				if !strings.Contains(next.Text, want) {
					t.Errorf("next result lacks %q:\n%s", want, next.Text)
				}
			}
			if next.FreshShell {
				t.Errorf("the shell was reset: %q", next.Text)
			}
			testkit.Eventually(t, sleep+" gone", func() (bool, string) {
				left := testkit.CommandsRunning(sleep)
				return len(left) == 0, strings.Join(left, ", ")
			})
		})
	}
}

// A command that survives SIGINT, SIGTERM and SIGKILL to its job (bash
// itself looping with SIGINT ignored) costs the shell, and the next result
// says so.
func TestACancelledCallThatCannotBeStoppedResetsTheShell(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.CancelGraceMs = 50 })
	sid := shellPID(t, h, "a")
	cancelWhenStarted(t, h, "a", `trap '' INT; echo go > $GO; while :; do :; done`)
	testkit.SessionGone(t, sid)
	next := bash(t, h, "a", `echo "[${MARK-}]"`)
	if !next.FreshShell || !strings.Contains(next.Text, "could not be stopped, so the shell was killed") {
		t.Fatalf("next result: %q", next.Text)
	}
}

// A call cancelled while it waits behind another, or whose text is not
// typed yet, does not run at all.
func TestACancelledQueuedCallNeverRuns(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	fifo, started := testkit.Signal(t)
	first := make(chan shell.Result, 1)
	go func() {
		first <- bash(t, h, "a", "echo go > "+fifo+"; sleep 0.3")
	}()
	started()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.Bash(ctx, "a", shell.Args{Command: "touch " + dir + "/ran"})
		done <- err
	}()
	// The second call waits behind the first (or has not reached the
	// shell yet): withdrawn there, it never runs.
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("cancelled: %v", err)
	}
	<-first
	res := bash(t, h, "a", "ls "+dir)
	if strings.Contains(res.Text, "ran") {
		t.Fatalf("the cancelled call ran: %q", res.Text)
	}
}

// Every token a call prints reaches exactly one result: the call's own, or
// (when its caller gave up, at any moment) a later one. A call cancelled
// before its line ran prints nothing, which is allowed; but a token whose
// call went on to leave its file behind was printed, and must be seen
// exactly once.
func TestCancelledCallsLoseAndRepeatNoOutput(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.CancelGraceMs = 50 })
	seen := map[string]int{}
	var mu sync.Mutex
	count := func(text string) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range strings.Fields(text) {
			if strings.HasPrefix(f, "tok-") {
				seen[f]++
			}
		}
	}
	const calls = 150
	dir := t.TempDir()
	answered := map[string]bool{}
	for i := range calls {
		tok := fmt.Sprintf("tok-%d-end", i)
		timeout := time.Duration(rand.IntN(4000)) * time.Microsecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		res, err := h.Bash(ctx, "a", shell.Args{Command: "echo " + tok + "; : > " + dir + "/" + tok})
		cancel()
		if err == nil {
			count(res.Text)
			if res.ExitCode != nil && *res.ExitCode == 0 && !res.FreshShell {
				answered[tok] = true
			}
		}
	}
	count(bash(t, h, "a", "echo tok-last-end").Text)
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if seen[f.Name()] != 1 {
			t.Errorf("%s ran to its end, but was seen %d times", f.Name(), seen[f.Name()])
		}
	}
	for tok, n := range seen {
		if n != 1 {
			t.Errorf("%s came %d times", tok, n)
		}
	}
	for tok := range answered {
		if seen[tok] == 0 {
			t.Errorf("%s: answered, but not in its result", tok)
		}
	}
	t.Logf("%d of %d calls answered, %d ran to their end, %d tokens seen", len(answered), calls, len(files), len(seen))
}

// Calls cancelled one after another each open the next result once, in
// order, under a heading of their own; past their budget (four times
// maxOutputChars) the oldest are dropped, and counted.
func TestCancelledCallsInARowAreToldOnceEach(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.MaxOutputChars = 1000 })
	const calls = 10
	for i := range calls {
		cancelWhenStarted(t, h, "a", fmt.Sprintf("printf 'out-%d %%0300d\\n' 0; echo go > $GO; sleep 100", i))
	}
	next := bash(t, h, "a", "echo probe")
	kept := strings.Count(next.Text, "[the previous call was cancelled by its caller")
	dropped := calls - kept
	if kept < 2 || kept == calls || !strings.Contains(next.Text, fmt.Sprintf("[the results of %d earlier cancelled calls were dropped", dropped)) {
		t.Fatalf("%d kept, and no notice of %d dropped:\n%s", kept, dropped, next.Text)
	}
	if len(next.Text) > 4*1000+600 {
		t.Errorf("%d bytes, past the budget:\n%s", len(next.Text), next.Text)
	}
	last := -1
	for i := dropped; i < calls; i++ {
		out := fmt.Sprintf("out-%d 0", i)
		at := strings.Index(next.Text, out)
		if at < last || strings.Count(next.Text, out) != 1 {
			t.Errorf("%s at %d (after %d), or not once:\n%s", out, at, last, next.Text)
		}
		last = at
		// Each output follows its own heading.
		if head := strings.LastIndex(next.Text[:max(at, 0)], "[the previous call was cancelled"); head < 0 || strings.Contains(next.Text[head:max(at, 0)], "[end of the previous call's result]") {
			t.Errorf("%s is not under a heading of its own:\n%s", out, next.Text)
		}
	}
	if !strings.HasSuffix(next.Text, "probe\n") {
		t.Errorf("%q", next.Text)
	}
}
