package testkit

import "go.uber.org/goleak"

// LeakOptions are the goleak options for goroutines that protoactor leaves
// running by design after its actors have stopped and its system has been
// shut down. Found by experiment on the pinned protoactor version: spawn,
// fail, stop and message dead actors, shut the system down, and list what
// goleak reports.
//
// There is one such goroutine. The first dead letter in a throttle window (a
// message sent to a stopped actor, which supervision produces routinely)
// starts a goroutine in the dead-letter logging throttle (actor/throttler.go,
// NewThrottle) that waits on a ticker for DeadLetterThrottleInterval (1s by
// default), then ends by itself. goleak gives up well before a second has
// passed, so it would report it. Its top function is named by the compiler:
// NewThrottle is inlined into NewDeadLetter in a normal build, and is not
// with -gcflags=-l, hence two names for the one goroutine.
//
// Actors themselves need no entry: an idle protoactor actor owns no
// goroutine, and the dispatcher's goroutines end when their mailbox is empty.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewThrottle.func1.1"),
	}
}
