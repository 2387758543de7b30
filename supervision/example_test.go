package supervision_test

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dsh-actors/dsh-actors/supervision"
)

func ExampleDecide() {
	decide := supervision.Decide(
		supervision.Is(fs.ErrNotExist, actor.StopDirective),
		supervision.OnValue[string](actor.ResumeDirective),
		supervision.Default(actor.EscalateDirective),
	)
	fmt.Println(decide(fmt.Errorf("open config: %w", fs.ErrNotExist)))
	fmt.Println(decide("bad input"))
	fmt.Println(decide(errors.New("disk full")))
	// Output:
	// StopDirective
	// ResumeDirective
	// EscalateDirective
}

func ExampleBackoff_Delay() {
	b := supervision.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for n := 1; n <= 5; n++ {
		fmt.Println(n, b.Delay(n))
	}
	// Output:
	// 1 100ms
	// 2 200ms
	// 3 400ms
	// 4 800ms
	// 5 1s
}

// host is a supervisor: it implements actor.SupervisorStrategy by
// delegating to a Strategy, and tells the Strategy about stops.
type host struct {
	strategy *supervision.Strategy
	shell    *actor.Props
}

func (h *host) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	h.strategy.HandleFailure(sys, sup, child, rs, reason, msg)
}

func (h *host) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		ctx.Spawn(h.shell)
	case *actor.Stopping, *actor.Restarting:
		h.strategy.Stopping()
	case *actor.Terminated:
		if h.strategy.ChildTerminated(msg.Who) {
			ctx.Spawn(h.shell)
		}
	}
}

func ExampleStrategy() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(discardLogs))
	defer system.Shutdown()

	// A shell that fails on its first "run", and says when it starts.
	starts := make(chan *actor.PID, 4)
	shell := actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *actor.Started:
			starts <- ctx.Self()
		case string:
			panic(errors.New("bash exited"))
		}
	})
	strategy, err := supervision.New(supervision.Policy{
		Restart:     supervision.Transient,
		MaxRestarts: 3,
		Within:      time.Minute,
		Backoff:     supervision.Backoff{Min: 10 * time.Millisecond},
	})
	if err != nil {
		panic(err)
	}
	decided := make(chan supervision.Decision, 4)
	strategy.OnDecision(func(d supervision.Decision) { decided <- d })
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &host{strategy: strategy, shell: shell}
	}))
	defer func() { _ = system.Root.StopFuture(pid).Wait() }()

	first := <-starts
	system.Root.Send(first, "run")
	d := <-decided
	fmt.Printf("%v after %q (failure %d, delay %v)\n", d.Directive, d.Reason, d.Failures, d.Delay)
	again := <-starts
	fmt.Println("same PID:", again.Equal(first))
	// Output:
	// RestartDirective after "bash exited" (failure 1, delay 10ms)
	// same PID: true
}
