package testkit_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// fatalTB records a Fatalf and ends the goroutine that called it, as
// testing.T does, so tests can check that a helper fails.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// failure runs fn with a fatalTB on its own goroutine and returns the
// message it failed with, or "" if it returned normally.
func failure(t *testing.T, fn func(tb testing.TB)) string {
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.msg
}

func TestNewSystemIsQuiet(t *testing.T) {
	t.Setenv("DSH_TEST_LOG", "")
	system := testkit.NewSystem(t)
	if system.Logger().Enabled(context.Background(), slog.LevelError) {
		t.Error("the system's logger is enabled")
	}
}

// The probe forwards what it is sent, in order, but not its own Started.
func TestProbeForwardsMessages(t *testing.T) {
	system := testkit.NewSystem(t)
	probe := testkit.NewProbe(t, system)
	system.Root.Send(probe.PID(), "first")
	system.Root.Send(probe.PID(), 2)

	if got := testkit.Expect[any](t, probe, testkit.Timeout); got != "first" {
		t.Errorf("first message: got %v, want %q", got, "first")
	}
	if got := testkit.Expect[int](t, probe, testkit.Timeout); got != 2 {
		t.Errorf("second message: got %v, want 2", got)
	}
}

// Lifecycle messages forwarded by other actors are skipped by Expect of
// another type, and returned by Expect of their own.
func TestExpectSkipsLifecycle(t *testing.T) {
	system := testkit.NewSystem(t)
	probe := testkit.NewProbe(t, system)
	system.Root.Send(probe.PID(), &actor.Started{})
	system.Root.Send(probe.PID(), "after")
	system.Root.Send(probe.PID(), &actor.Restarting{})

	if got := testkit.Expect[string](t, probe, testkit.Timeout); got != "after" {
		t.Errorf("got %q, want %q", got, "after")
	}
	testkit.Expect[*actor.Restarting](t, probe, testkit.Timeout)
}

func TestExpectFailsOnUnexpectedType(t *testing.T) {
	system := testkit.NewSystem(t)
	probe := testkit.NewProbe(t, system)
	system.Root.Send(probe.PID(), 42)

	msg := failure(t, func(tb testing.TB) { testkit.Expect[string](tb, probe, testkit.Timeout) })
	if !strings.Contains(msg, "expected string, received int: 42") {
		t.Errorf("failure message %q", msg)
	}
}

func TestExpectFailsAfterTimeout(t *testing.T) {
	system := testkit.NewSystem(t)
	probe := testkit.NewProbe(t, system)

	msg := failure(t, func(tb testing.TB) { testkit.Expect[string](tb, probe, time.Millisecond) })
	if !strings.Contains(msg, "no string within 1ms") {
		t.Errorf("failure message %q", msg)
	}
}

func TestNext(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := testkit.Next(t, ch, testkit.Timeout); got != 7 {
		t.Errorf("got %d, want 7", got)
	}
	msg := failure(t, func(tb testing.TB) { testkit.Next(tb, ch, time.Millisecond) })
	if !strings.Contains(msg, "no int within 1ms") {
		t.Errorf("failure message %q", msg)
	}
	close(ch)
	msg = failure(t, func(tb testing.TB) { testkit.Next(tb, ch, testkit.Timeout) })
	if !strings.Contains(msg, "closed") {
		t.Errorf("failure message %q", msg)
	}
}

// SupervisorEvents sees the decision of protoactor's default strategy for
// a root actor that panics.
func TestSupervisorEvents(t *testing.T) {
	system := testkit.NewSystem(t)
	events := testkit.SupervisorEvents(t, system)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if ctx.Message() == "fail" {
			panic("boom")
		}
	}))
	t.Cleanup(func() { testkit.Stop(t, system, pid) })
	system.Root.Send(pid, "fail")

	ev := testkit.Next(t, events, testkit.Timeout)
	if !ev.Child.Equal(pid) || ev.Reason != "boom" || ev.Directive != actor.RestartDirective {
		t.Errorf("event %+v, want a restart of %v for %q", ev, pid, "boom")
	}
}

// A message to a stopped actor starts protoactor's dead-letter throttle
// goroutine, which outlives the system for a second; LeakOptions covers it
// and nothing else is left.
func TestLeakOptionsCoverDeadLetters(t *testing.T) {
	system := testkit.NewSystem(t)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	testkit.Stop(t, system, pid)
	system.Root.Send(pid, "to the dead")
	if err := goleak.Find(); err == nil || !strings.Contains(err.Error(), "NewThrottle") {
		t.Errorf("without LeakOptions goleak reported %v; if the throttle goroutine is gone, LeakOptions can shrink", err)
	}
	if err := goleak.Find(testkit.LeakOptions()...); err != nil {
		t.Error(err)
	}
}

// skipTB records a Skipf or Fatalf and ends the goroutine that called it.
type skipTB struct {
	fatalTB
	skipped string
}

func (s *skipTB) Skipf(format string, args ...any) {
	s.mu.Lock()
	s.skipped = fmt.Sprintf(format, args...)
	s.mu.Unlock()
	runtime.Goexit()
}

// A missing prerequisite fails the test, naming the opt-out; the opt-out
// skips it, except under CI=true.
func TestMissing(t *testing.T) {
	for _, c := range []struct {
		skip, ci     string
		fatal, skips string
	}{
		{"", "", "run this\n(set DSH_TEST_SKIP=hosts to skip instead)", ""},
		{"e2e,host", "", "run this\n(set DSH_TEST_SKIP=hosts to skip instead)", ""},
		{"e2e, hosts", "", "", "run this (skipped: DSH_TEST_SKIP names hosts)"},
		{"hosts", "true", "run this\n(DSH_TEST_SKIP=hosts is not honoured when CI=true)", ""},
		{"", "true", "run this\n(set DSH_TEST_SKIP=hosts to skip instead)", ""},
	} {
		t.Setenv(testkit.SkipVariable, c.skip)
		t.Setenv("CI", c.ci)
		tb := &skipTB{fatalTB: fatalTB{TB: t}}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testkit.Missing(tb, "hosts", "run this")
		}()
		<-done
		if tb.msg != c.fatal || tb.skipped != c.skips {
			t.Errorf("DSH_TEST_SKIP=%q CI=%q: failed with %q, skipped with %q; want %q, %q", c.skip, c.ci, tb.msg, tb.skipped, c.fatal, c.skips)
		}
	}
}
