package supervision_test

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/supervision"
)

// A failed Permanent child is restarted in place: the same PID receives
// Restarting, then Started on a new instance, and answers afterwards.
func TestPermanentChildRestartsInPlace(t *testing.T) {
	h := newHarness(t, supervision.Policy{})
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, "boom", actor.RestartDirective)
	h.expectRestart(pid)
	h.expectAlive(pid, 1)
}

// The event for a decision carries the child and the panic value.
func TestEventCarriesReason(t *testing.T) {
	h := newHarness(t, supervision.Policy{})
	pid := h.spawn("worker", nil)
	reason := errors.New("boom")
	h.system.Root.Send(pid, fail{reason})
	testkit.Expect[failing](t, h.children, testkit.Timeout)
	ev := h.expectEvent(pid, actor.RestartDirective)
	if ev.Reason != reason {
		t.Errorf("event reason = %v, want %v", ev.Reason, reason)
	}
	h.expectRestart(pid)
}

// A Permanent child that stops without failing is respawned as a new child.
func TestPermanentChildRespawnedAfterNormalStop(t *testing.T) {
	h := newHarness(t, supervision.Policy{Restart: supervision.Permanent})
	pid := h.spawn("worker", nil)

	h.system.Root.Send(pid, quit{})
	h.expectTerminated(pid, true)
	again := testkit.Expect[spawned](t, h.reports, testkit.Timeout)
	if again.pid.Equal(pid) {
		t.Fatalf("respawned child has the old PID %v", pid)
	}
	h.expectStarted(again.pid)
	h.expectAlive(again.pid, 1)
}

// A Transient child is restarted after a failure but not respawned after it
// stops without failing.
func TestTransientChild(t *testing.T) {
	h := newHarness(t, supervision.Policy{Restart: supervision.Transient})
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, "boom", actor.RestartDirective)
	h.expectRestart(pid)

	h.system.Root.Send(pid, quit{})
	h.expectTerminated(pid, false)
}

// A Temporary child is never restarted: a Restart decision becomes Stop, and
// its termination asks for no respawn.
func TestTemporaryChild(t *testing.T) {
	h := newHarness(t, supervision.Policy{Restart: supervision.Temporary})
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, "boom", actor.StopDirective)
	h.expectTerminated(pid, false)
}

// A child's own policy, set with SetPolicy, overrides the default one.
func TestSetPolicyOverridesDefault(t *testing.T) {
	h := newHarness(t, supervision.Policy{Restart: supervision.Permanent})
	temp := h.spawn("temporary", &supervision.Policy{Restart: supervision.Temporary})
	perm := h.spawn("permanent", nil)

	h.failAndExpect(temp, "boom", actor.StopDirective)
	h.expectTerminated(temp, false)
	h.failAndExpect(perm, "boom", actor.RestartDirective)
	h.expectRestart(perm)
}

// A Permanent child the supervisor stops on purpose is not respawned.
func TestStoppingChildIsNotRespawned(t *testing.T) {
	h := newHarness(t, supervision.Policy{Restart: supervision.Permanent})
	pid := h.spawn("worker", nil)

	h.system.Root.Send(h.sup, stopChild{pid})
	h.expectTerminated(pid, false)
}

// MaxRestarts failures within the period are restarted; the next one stops
// the child and fails the supervisor, whose own parent receives the failure
// with the child's reason.
func TestLimitEscalates(t *testing.T) {
	type escalated struct {
		who    *actor.PID
		reason any
	}
	parentSaw := make(chan escalated, 1)
	parent := strategyFunc(func(_ *actor.ActorSystem, sup actor.Supervisor, who *actor.PID, reason any) {
		parentSaw <- escalated{who, reason}
		sup.StopChildren(who)
	})
	h := newHarness(t, supervision.Policy{MaxRestarts: 2, Within: time.Hour}, withParent(parent))
	pid := h.spawn("worker", nil)

	for range 2 {
		h.failAndExpect(pid, "boom", actor.RestartDirective)
		h.expectRestart(pid)
	}
	h.failAndExpect(pid, "third", actor.EscalateDirective)
	h.expectTerminated(pid, false)

	got := testkit.Next(t, parentSaw, testkit.Timeout)
	if !got.who.Equal(h.sup) || got.reason != "third" {
		t.Fatalf("parent saw failure of %v with %v, want %v with %q", got.who, got.reason, h.sup, "third")
	}
}

// With OnLimit StopChild, the failure past the limit stops the child for
// good (even a Permanent one) and the supervisor carries on.
func TestLimitStopsChild(t *testing.T) {
	h := newHarness(t, supervision.Policy{Restart: supervision.Permanent, OnLimit: supervision.StopChild})
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, "first", actor.RestartDirective)
	h.expectRestart(pid)
	h.failAndExpect(pid, "second", actor.StopDirective)
	h.expectTerminated(pid, false)

	h.spawn("next", nil) // the supervisor still works
}

// Failures further apart than the period do not add up; failures within it
// do. The strategy's clock is moved by hand.
func TestFailuresOutsidePeriodDoNotAccumulate(t *testing.T) {
	clk := newClock()
	h := newHarness(t, supervision.Policy{MaxRestarts: 1, Within: time.Minute, OnLimit: supervision.StopChild},
		withClock(clk.Now))
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, "boom", actor.RestartDirective)
	h.expectRestart(pid)
	clk.Advance(time.Minute)
	h.failAndExpect(pid, "boom", actor.RestartDirective) // the first one has left the period
	h.expectRestart(pid)
	clk.Advance(time.Minute - time.Nanosecond)
	h.failAndExpect(pid, "boom", actor.StopDirective) // two within a minute
	h.expectTerminated(pid, false)
}

// A backoff delays each restart by at least its delay, doubling with each
// restart in the period; a message sent to the failed child waits and is
// delivered after the restart.
func TestBackoffDelaysRestart(t *testing.T) {
	const min = 20 * time.Millisecond
	h := newHarness(t, supervision.Policy{MaxRestarts: 3, Within: time.Hour, Backoff: supervision.Backoff{Min: min}})
	decisions := make(chan supervision.Decision, 8)
	h.strategy.OnDecision(func(d supervision.Decision) { decisions <- d })
	pid := h.spawn("worker", nil)

	for i, want := range []time.Duration{min, 2 * min} {
		h.system.Root.Send(pid, fail{"boom"})
		h.system.Root.Send(pid, ping{i}) // queued behind the failure
		f := testkit.Expect[failing](t, h.children, testkit.Timeout)
		h.expectEvent(pid, actor.RestartDirective)
		d := testkit.Next(t, decisions, testkit.Timeout)
		if d.Delay != want || d.Failures != i+1 {
			t.Fatalf("restart %d: decision delay %v after %d failures, want %v after %d", i+1, d.Delay, d.Failures, want, i+1)
		}
		s := h.expectRestart(pid)
		if waited := s.at.Sub(f.at); waited < want {
			t.Errorf("restart %d: started %v after the failure, want at least %v", i+1, waited, want)
		}
		p := testkit.Expect[pong](t, h.children, testkit.Timeout)
		if p.n != i || p.at.Sub(f.at) < want {
			t.Errorf("restart %d: ping #%d answered %v after the failure, want #%d after at least %v", i+1, p.n, p.at.Sub(f.at), i, want)
		}
	}
}

// A restart waiting for its backoff is cancelled when the supervisor stops
// the child on purpose: the child terminates and no timer is left.
func TestPendingRestartCancelledByStoppingChild(t *testing.T) {
	h := newHarness(t, supervision.Policy{Backoff: supervision.Backoff{Min: time.Hour}})
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, "boom", actor.RestartDirective)
	h.system.Root.Send(h.sup, stopChild{pid})
	h.expectTerminated(pid, false)
	if n := supervision.PendingRestarts(h.strategy); n != 0 {
		t.Errorf("%d restarts still pending", n)
	}
}

// A supervisor that stops while a child's restart waits for its backoff
// stops completely: the restart is cancelled rather than reviving the child.
func TestPendingRestartCancelledBySupervisorStop(t *testing.T) {
	h := newHarness(t, supervision.Policy{Backoff: supervision.Backoff{Min: time.Hour}})
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, "boom", actor.RestartDirective)
	testkit.Stop(t, h.system, h.sup)
	h.expectTerminated(pid, false)
	if n := supervision.PendingRestarts(h.strategy); n != 0 {
		t.Errorf("%d restarts still pending", n)
	}
}

// OnDecision sees every decision with the child, the reason and the
// directive, in order.
func TestOnDecision(t *testing.T) {
	h := newHarness(t, supervision.Policy{Restart: supervision.Transient, OnLimit: supervision.StopChild})
	decisions := make(chan supervision.Decision, 8)
	h.strategy.OnDecision(func(d supervision.Decision) { decisions <- d })
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, "one", actor.RestartDirective)
	h.expectRestart(pid)
	h.failAndExpect(pid, "two", actor.StopDirective)
	h.expectTerminated(pid, false)

	for _, want := range []supervision.Decision{
		{Child: pid, Reason: "one", Directive: actor.RestartDirective, Failures: 1},
		{Child: pid, Reason: "two", Directive: actor.StopDirective, Failures: 2},
	} {
		got := testkit.Next(t, decisions, testkit.Timeout)
		if !got.Child.Equal(want.Child) || got.Reason != want.Reason || got.Directive != want.Directive || got.Failures != want.Failures || got.Delay != 0 {
			t.Errorf("decision %+v, want %+v", got, want)
		}
	}
}

// With a dispatcher that runs actors on the sender's goroutine, a delayed
// restart runs the supervisor and the child on the timer's goroutine. A child
// that fails again in Started then hands its failure to the strategy on that
// same goroutine, which must not be holding the strategy's lock.
func TestDelayedRestartWithSynchronizedDispatcher(t *testing.T) {
	h := newHarness(t, supervision.Policy{MaxRestarts: 3, Within: time.Hour, Backoff: supervision.Backoff{Min: time.Millisecond}},
		withDispatcher(actor.NewSynchronizedDispatcher(300)))
	pid := h.spawn("worker", nil)

	h.failStarts.Store(1)
	h.failAndExpect(pid, "boom", actor.RestartDirective)
	testkit.Expect[restarting](t, h.children, testkit.Timeout)
	testkit.Expect[failing](t, h.children, testkit.Timeout) // in Started
	h.expectEvent(pid, actor.RestartDirective)
	h.expectRestart(pid)
	h.expectAlive(pid, 1)
}

// The tests above again, with the supervisor and its children run on the
// sender's goroutine, as the host runs them.
func TestWithSynchronizedDispatcher(t *testing.T) {
	defaultDispatcher = actor.NewSynchronizedDispatcher(300)
	t.Cleanup(func() { defaultDispatcher = nil })
	for _, test := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"PermanentChildRestartsInPlace", TestPermanentChildRestartsInPlace},
		{"PermanentChildRespawnedAfterNormalStop", TestPermanentChildRespawnedAfterNormalStop},
		{"TransientChild", TestTransientChild},
		{"TemporaryChild", TestTemporaryChild},
		{"StoppingChildIsNotRespawned", TestStoppingChildIsNotRespawned},
		{"LimitEscalates", TestLimitEscalates},
		{"LimitStopsChild", TestLimitStopsChild},
		{"BackoffDelaysRestart", TestBackoffDelaysRestart},
		{"PendingRestartCancelledByStoppingChild", TestPendingRestartCancelledByStoppingChild},
		{"PendingRestartCancelledBySupervisorStop", TestPendingRestartCancelledBySupervisorStop},
		{"DeciderOnLiveChildren", TestDeciderOnLiveChildren},
		{"LogPanicsLetsStopComplete", TestLogPanicsLetsStopComplete},
	} {
		t.Run(test.name, test.run)
	}
}
