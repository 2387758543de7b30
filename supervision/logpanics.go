package supervision

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"
)

// Expected is implemented by failures that are part of normal operation,
// such as a shell that timed out and is restarted on purpose. [LogPanics]
// logs those that return true briefly, at Info and without a stack.
type Expected interface {
	ExpectedFailure() bool
}

// isExpected reports whether reason, or an error in its chain, says it is an
// expected failure.
func isExpected(reason any) bool {
	if e, ok := reason.(Expected); ok {
		return e.ExpectedFailure()
	}
	if err, ok := reason.(error); ok {
		var e Expected
		if errors.As(err, &e) {
			return e.ExpectedFailure()
		}
	}
	return false
}

// LogPanics returns a receiver middleware that logs a panic in the actor's
// Receive and panics again with the same value, so that supervision handles
// the failure as before. An unexpected panic is logged at Error with the
// stack of the panicking goroutine (protoactor itself logs panics without
// one); a reason that implements [Expected] and returns true is logged at
// Info without it. Messages are logged by type only, never by content.
//
// A panic while handling *actor.Stopping or *actor.Stopped is logged at
// Error with its stack and not passed on: protoactor cannot supervise it.
// Passed on, it leaves the actor half stopped, so that its parent and
// watchers never receive *actor.Terminated, or, if the supervisor restarts
// it, brings the stopping actor back to life.
//
//	props := actor.PropsFromProducer(newShell,
//		actor.WithReceiverMiddleware(supervision.LogPanics(logger)))
func LogPanics(logger *slog.Logger) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				reason := recover()
				if reason == nil {
					return
				}
				attrs := []any{
					slog.Any("actor", ctx.Self()),
					slog.String("message", fmt.Sprintf("%T", env.Message)),
					slog.Any("reason", reason),
				}
				// Deferred functions run on top of the panicking frames,
				// so debug.Stack shows where the panic began.
				switch env.Message.(type) {
				case *actor.Stopping, *actor.Stopped:
					attrs = append(attrs, slog.String("stack", string(debug.Stack())))
					logger.Error("actor panicked while stopping; the stop goes on", attrs...)
					return
				}
				if isExpected(reason) {
					logger.Info("actor failed as expected", attrs...)
				} else {
					attrs = append(attrs, slog.String("stack", string(debug.Stack())))
					logger.Error("actor panicked", attrs...)
				}
				panic(reason)
			}()
			next(ctx, env)
		}
	}
}
