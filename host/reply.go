package host

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// errDeadLetter: the target actor no longer exists.
var errDeadLetter = errors.New("host: the actor is gone")

// replyBox is a one-shot mailbox outside the actor system: a registered
// Process whose single reply lands in a channel, so a caller can wait for it
// together with a context. protoactor's Future cannot be waited on with a
// context, and wakes only one waiter (notes/protoactor.md, trap 2).
type replyBox struct {
	system *actor.ActorSystem
	pid    *actor.PID
	ch     chan any
	// done: the wait is over, and a reply that comes late (the caller gave
	// up) is dropped, not kept: the box stays reachable through its PID
	// (the watcher set of the actor it asked keeps removed PIDs in its
	// spare capacity, and protoactor caches the box in the PID).
	done atomic.Bool
}

func newReplyBox(system *actor.ActorSystem) *replyBox {
	r := &replyBox{system: system, ch: make(chan any, 1)}
	pid, ok := system.ProcessRegistry.Add(r, "reply$"+system.ProcessRegistry.NextId())
	if !ok {
		// NextId is unique per system; a clash means the registry is broken.
		panic("host: reply id already registered: " + pid.Id)
	}
	r.pid = pid
	return r
}

// SendUserMessage keeps the first reply; later ones are dropped.
func (r *replyBox) SendUserMessage(_ *actor.PID, message any) {
	if r.done.Load() {
		return
	}
	select {
	case r.ch <- actor.UnwrapEnvelopeMessage(message):
		if r.done.Load() {
			r.drain() // the wait ended as it came
		}
	default:
	}
}

// drain drops a reply nobody waits for.
func (r *replyBox) drain() {
	select {
	case <-r.ch:
	default:
	}
}

// SendSystemMessage takes the target's Terminated (the box watches it): a
// target that stops without answering (protoactor drops the messages left
// in a stopped actor's mailbox) ends the wait as a dead letter, not never.
func (r *replyBox) SendSystemMessage(_ *actor.PID, message any) {
	if _, ok := message.(*actor.Terminated); ok && !r.done.Load() {
		select {
		case r.ch <- &actor.DeadLetterResponse{}:
		default:
		}
	}
}

func (r *replyBox) Stop(*actor.PID) {}

// request sends msg to target with the box as sender and waits for the
// reply or the context. The box is unregistered on return.
func (r *replyBox) request(ctx context.Context, target *actor.PID, msg any) (any, error) {
	defer r.system.ProcessRegistry.Remove(r.pid)
	defer func() {
		r.done.Store(true)
		r.drain() // a reply that came as the wait ended
	}()
	// Watched before the request goes, so that its Terminated comes after
	// any answer it sends.
	proc, _ := r.system.ProcessRegistry.Get(target)
	proc.SendSystemMessage(target, &actor.Watch{Watcher: r.pid})
	defer proc.SendSystemMessage(target, &actor.Unwatch{Watcher: r.pid})
	r.system.Root.RequestWithCustomSender(target, msg, r.pid)
	select {
	case m := <-r.ch:
		if _, dead := m.(*actor.DeadLetterResponse); dead {
			return nil, errDeadLetter
		}
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
