package shell_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
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
	wantText(t, bash(t, h, "a", "echo $KEEP $$"), "kept "+strconv.Itoa(pid)+"\n")
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
	wantText(t, bash(t, h, "a", "echo $$"), strconv.Itoa(pid)+"\n")
}
