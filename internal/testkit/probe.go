package testkit

import (
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// bufferSize is the capacity of the channels testkit fills from actors. An
// actor never blocks on them: a message that finds one full is counted and
// reported as a test error.
const bufferSize = 1024

// A Probe is an actor that forwards every message it receives to a channel,
// so a test can send it messages from the actors under test and wait for
// them with [Expect].
//
// The probe's own *actor.Started is not forwarded (its own Stopping and
// Stopped come at cleanup, when nobody reads any more). Lifecycle messages
// that other actors send it, such as an actor under test forwarding its
// ctx.Message(), are forwarded like any other message.
type Probe struct {
	pid      *actor.PID
	messages chan any
	dropped  counter
	started  bool // owned by the probe actor's goroutine
}

// NewProbe spawns a probe on system. t.Cleanup stops it and waits for it, and
// reports messages dropped because nobody read them.
func NewProbe(t testing.TB, system *actor.ActorSystem) *Probe {
	t.Helper()
	p := &Probe{messages: make(chan any, bufferSize)}
	p.pid = system.Root.Spawn(actor.PropsFromFunc(p.receive))
	t.Cleanup(func() {
		Stop(t, system, p.pid)
		if n := p.dropped.load(); n > 0 {
			t.Errorf("testkit: probe dropped %d messages: the buffer of %d was full", n, bufferSize)
		}
	})
	return p
}

// PID is the address actors under test send to.
func (p *Probe) PID() *actor.PID { return p.pid }

func (p *Probe) receive(ctx actor.Context) {
	msg := ctx.Message()
	if !p.started {
		if _, ok := msg.(*actor.Started); ok {
			p.started = true
			return
		}
	}
	select {
	case p.messages <- msg:
	default:
		p.dropped.add()
	}
}

// Expect waits for the probe's next message and returns it as a T. Lifecycle
// messages (*actor.Started, *actor.Stopping, *actor.Stopped,
// *actor.Restarting) that are not a T are skipped; any other message that is
// not a T fails the test, and so does a timeout.
func Expect[T any](t testing.TB, p *Probe, timeout time.Duration) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case msg := <-p.messages:
			if v, ok := msg.(T); ok {
				return v
			}
			if isLifecycle(msg) {
				continue
			}
			t.Fatalf("testkit: probe expected %s, received %T: %+v", typeName[T](), msg, msg)
		case <-timer.C:
			t.Fatalf("testkit: probe received no %s within %v", typeName[T](), timeout)
		}
	}
}

func isLifecycle(msg any) bool {
	switch msg.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return true
	}
	return false
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

type counter struct{ n atomic.Int64 }

func (c *counter) add()        { c.n.Add(1) }
func (c *counter) load() int64 { return c.n.Load() }
