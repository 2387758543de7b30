package host

import (
	"context"
	"errors"

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
	select {
	case r.ch <- actor.UnwrapEnvelopeMessage(message):
	default:
	}
}

// SendSystemMessage takes the target's Terminated (the box watches it): a
// target that stops without answering (protoactor drops the messages left
// in a stopped actor's mailbox) ends the wait as a dead letter, not never.
func (r *replyBox) SendSystemMessage(_ *actor.PID, message any) {
	if _, ok := message.(*actor.Terminated); ok {
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
