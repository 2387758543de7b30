package shell_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// oneSlot is a host whose gate lets one bash call in at a time, with the
// given lease.
func oneSlot(t *testing.T, leaseMs int64) *host.Host {
	return newHost(t, func(c *config.Config) { c.Admission = config.Admission{Slots: 1, LeaseMs: leaseMs} })
}

// holdSlot starts a call on agent that holds the gate's one slot until
// release is called, and returns a function that waits for its answer.
func holdSlot(t *testing.T, h *host.Host, agent string) (release func(), answered <-chan shell.Result) {
	t.Helper()
	sig, running := testkit.Signal(t)
	gate, open := testkit.Gate(t)
	done := make(chan shell.Result, 1)
	go func() {
		res, err := h.Bash(context.Background(), agent, shell.Args{Command: "echo > " + sig + "; read line < " + gate + "; echo got $line"})
		if err != nil {
			t.Errorf("the slot holder's call: %v", err)
		}
		done <- res
	}()
	running()
	return func() { open("go") }, done
}

func TestACallWaitingForItsTurnTimesOutWithoutTouchingItsShell(t *testing.T) {
	h := oneSlot(t, 60_000)
	pid := shellPID(t, h, "a")
	bash(t, h, "a", "export KEEP=kept")
	release, answered := holdSlot(t, h, "b")

	res := bashArgs(t, h, "a", shell.Args{Command: "echo $KEEP", TimeoutMs: 200})
	if !res.TimedOut || res.ShellReset || !strings.Contains(res.Text, "waiting for its turn") || strings.Contains(res.Text, "kept") {
		t.Fatalf("a call that never got in: %+v", res)
	}
	release()
	if res := <-answered; !strings.Contains(res.Text, "got go") {
		t.Fatalf("the slot holder: %+v", res)
	}
	res = bash(t, h, "a", "echo $KEEP; "+testkit.ShellPID)
	if !strings.HasPrefix(res.Text, "kept\n") || testkit.HostPID(t, res.Text) != pid {
		t.Fatalf("after the call that never got in: %q, want kept and shell %d", res.Text, pid)
	}
}

func TestACallThatOutlivesItsLeaseLetsTheNextIn(t *testing.T) {
	h := oneSlot(t, 20)
	release, answered := holdSlot(t, h, "b")
	wantText(t, bash(t, h, "a", "echo hi"), "hi\n")
	select {
	case res := <-answered:
		t.Fatalf("the slot holder ended before it was released: %+v", res)
	default:
	}
	release()
	if res := <-answered; !strings.Contains(res.Text, "got go") {
		t.Fatalf("the slot holder: %+v", res)
	}
}

func TestACancelledWaiterTakesNoSlotAndLeavesItsShell(t *testing.T) {
	h := oneSlot(t, 60_000)
	pid := shellPID(t, h, "a")
	release, answered := holdSlot(t, h, "b")

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := h.Bash(ctx, "a", shell.Args{Command: "echo never"})
		errc <- err
	}()
	// The call waits at the gate (the slot is b's) until it is cancelled.
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", err)
	}
	release()
	<-answered
	// The slot is free again (the cancelled call took none), and a's shell
	// was never reset.
	wantText(t, bash(t, h, "c", "echo c"), "c\n")
	if got := shellPID(t, h, "a"); got != pid {
		t.Fatalf("a's shell is %d, was %d", got, pid)
	}
}

// Calls queued behind a call whose shell then cannot start (its directory
// is gone) are each answered, with the reason. The second of them once
// waited for ever: the answer came inside the step that started it, and
// nothing started the next.
func TestCallsQueuedBehindAShellThatCannotStartAreAllAnswered(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	h := hosttest.Start(t, nil, host.Options{Dir: dir})
	sig, running := testkit.Signal(t)
	gate, release := testkit.Gate(t)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		// The shell ends with this call; the next one must start another.
		h.Bash(hosttest.Context(t), "a", shell.Args{Command: "echo > " + sig + "; read line < " + gate + "; exit 0"})
	}()
	running()
	const n = 3
	results := make(chan shell.Result, n)
	for i := range n {
		go func() {
			res, err := h.Bash(hosttest.Context(t), "a", shell.Args{Command: "echo queued " + strconv.Itoa(i)})
			if err != nil {
				t.Errorf("queued call %d: %v", i, err)
			}
			results <- res
		}()
	}
	os.RemoveAll(dir)
	release("go")
	<-answered
	for range n {
		res := <-results
		if strings.Contains(res.Text, "queued") {
			continue // it ran before the directory went
		}
		if !res.IsError || !strings.Contains(res.Text, dir) || !strings.Contains(res.Text, "not a directory that exists") {
			t.Errorf("a queued call: %+v", res)
		}
	}
}

// A shell that died while no call ran is told to the call that runs next,
// also when the call before that ran out of time waiting for its turn (it
// once said "the shell is as it was", and nobody was told).
func TestAShellDeathIsToldEvenAfterATimeoutAtTheGate(t *testing.T) {
	h := oneSlot(t, 60_000)
	pid := shellPID(t, h, "a")
	bash(t, h, "a", "export KEEP=kept")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.SessionGone(t, pid)
	release, answered := holdSlot(t, h, "b")
	res := bashArgs(t, h, "a", shell.Args{Command: "echo $KEEP", TimeoutMs: 200})
	if !res.TimedOut || !strings.Contains(res.Text, "waiting for its turn") || strings.Contains(res.Text, "as it was") {
		t.Fatalf("the call that timed out at the gate: %+v", res)
	}
	release()
	<-answered
	res = bash(t, h, "a", "echo [$KEEP]")
	if !strings.Contains(res.Text, "killed by signal: SIGKILL") || !strings.HasSuffix(res.Text, "[]\n") {
		t.Fatalf("the next call was not told its shell had died: %q", res.Text)
	}
}
