package testkit

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Timeout is the deadline tests give a message or event that must arrive. It
// is generous on purpose: it is reached only when something is broken.
const Timeout = 10 * time.Second

// NewSystem returns a real actor system whose logger discards everything, or
// writes Debug and above to standard error when the environment variable
// DSH_TEST_LOG is "1". The system is shut down by t.Cleanup. Shutting down a
// protoactor system does not stop its actors: the test stops the root actors
// it spawned itself (actors created through this package are stopped for it).
func NewSystem(t testing.TB) *actor.ActorSystem {
	t.Helper()
	handler := slog.DiscardHandler
	if os.Getenv("DSH_TEST_LOG") == "1" {
		handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	logger := slog.New(handler).With("test", t.Name())
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logger
	}))
	t.Cleanup(system.Shutdown)
	return system
}

// Stop stops pid and waits until it has terminated, failing the test if it has
// not within [Timeout]. Use it in t.Cleanup for root actors a test spawns.
func Stop(t testing.TB, system *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Errorf("testkit: stopping %v: %v", pid, err)
	}
}

// SupervisorEvents returns a channel that receives every
// [actor.SupervisorEvent] published on system's event stream from now on: the
// decisions of protoactor's own strategies and of package supervision. The
// subscription is removed by t.Cleanup. The channel is buffered; events that
// find it full are counted and reported as a test error at cleanup, never
// blocking the actor that published them.
func SupervisorEvents(t testing.TB, system *actor.ActorSystem) <-chan *actor.SupervisorEvent {
	t.Helper()
	events := make(chan *actor.SupervisorEvent, bufferSize)
	var dropped counter
	sub := system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok {
			select {
			case events <- e:
			default:
				dropped.add()
			}
		}
	})
	t.Cleanup(func() {
		system.EventStream.Unsubscribe(sub)
		if n := dropped.load(); n > 0 {
			t.Errorf("testkit: %d supervisor events dropped: the buffer of %d was full", n, bufferSize)
		}
	})
	return events
}

// Next returns the next value from ch, failing the test if none arrives
// within timeout or if ch is closed.
func Next[T any](t testing.TB, ch <-chan T, timeout time.Duration) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("testkit: channel of %s closed", typeName[T]())
		}
		return v
	case <-timer.C:
		t.Fatalf("testkit: no %s within %v", typeName[T](), timeout)
	}
	panic("unreachable")
}
