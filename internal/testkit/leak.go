package testkit

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/dsh-actors/dsh-actors/internal/sigstate"
)

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
	opts := []goleak.Option{
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewThrottle.func1.1"),
	}
	if SandboxForAll {
		opts = append(opts, goleak.IgnoreAnyFunction("github.com/dsh-actors/dsh-actors/internal/sandbox.(*Sandbox).read"))
	}
	return opts
}

// SandboxForAll is set by a package whose tests all run in one sandbox
// that lives as long as the test process (the sandbox matrix): its
// reader is not a leak.
var SandboxForAll bool

// Main runs a package's tests the way every package does: in a process whose
// children inherit no blocked or ignored signal (see [sigstate.Reexec]; some
// CI runners start tests with SIGWINCH blocked), then checking that no
// goroutine outlives them.
func Main(m *testing.M) {
	if err := sigstate.Reexec(); err != nil {
		fmt.Fprintf(os.Stderr, "testkit: %v\n", err)
	}
	goleak.VerifyTestMain(m, LeakOptions()...)
}
