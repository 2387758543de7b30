package supervision_test

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/supervision"
)

// This file holds a small supervision tree for the tests: a supervisor actor
// that delegates to a supervision.Strategy the way the package documentation
// says, and worker children that report their lifecycle.

// Messages a worker understands.
type (
	fail             struct{ reason any } // panic with reason
	quit             struct{}             // stop without failing
	ping             struct{ n int }      // answer with pong
	failWhenStopping struct{}             // panic on Stopping from now on
)

// What a worker reports to the children's probe.
type (
	started struct {
		pid *actor.PID
		at  time.Time
	}
	restarting struct{ pid *actor.PID }
	failing    struct {
		pid *actor.PID
		at  time.Time
	}
	pong struct {
		pid *actor.PID
		n   int
		at  time.Time
	}
)

type worker struct {
	report       *actor.PID
	failStopping bool          // panic in Stopping
	failStarts   *atomic.Int32 // while positive, Started decrements it and panics
}

func (w *worker) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if w.failStarts.Add(-1) >= 0 {
			ctx.Send(w.report, failing{ctx.Self(), time.Now()})
			explode("failing to start")
		}
		ctx.Send(w.report, started{ctx.Self(), time.Now()})
	case *actor.Restarting:
		ctx.Send(w.report, restarting{ctx.Self()})
	case *actor.Stopping:
		if w.failStopping {
			explode("failing to stop")
		}
	case *actor.Stopped:
	case failWhenStopping:
		w.failStopping = true
	case fail:
		ctx.Send(w.report, failing{ctx.Self(), time.Now()})
		explode(msg.reason)
	case quit:
		ctx.Stop(ctx.Self())
	case ping:
		ctx.Send(w.report, pong{ctx.Self(), msg.n, time.Now()})
	default:
		panic(unexpected{msg})
	}
}

// explode panics with reason; its name shows in logged stacks.
func explode(reason any) { panic(reason) }

type unexpected struct{ msg any }

// Messages the test supervisor understands.
type (
	spawnChild struct {
		name   string
		policy *supervision.Policy // nil: the strategy's default
	}
	stopChild struct{ pid *actor.PID }
)

// What the supervisor reports to its own probe.
type (
	spawned struct {
		name string
		pid  *actor.PID
	}
	terminated struct {
		pid     *actor.PID
		respawn bool
	}
)

type supervisor struct {
	strategy *supervision.Strategy
	child    *actor.Props
	report   *actor.PID
	specs    map[string]spawnChild // by child PID id, to respawn
}

func (s *supervisor) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	s.strategy.HandleFailure(system, sup, child, rs, reason, msg)
}

func (s *supervisor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Stopped:
	case *actor.Stopping, *actor.Restarting:
		s.strategy.Stopping()
	case spawnChild:
		s.spawn(ctx, msg)
	case stopChild:
		s.strategy.StoppingChild(msg.pid)
		ctx.Stop(msg.pid)
	case *actor.Terminated:
		spec := s.specs[msg.Who.Id]
		delete(s.specs, msg.Who.Id)
		respawn := s.strategy.ChildTerminated(msg.Who)
		ctx.Send(s.report, terminated{msg.Who, respawn})
		if respawn {
			s.spawn(ctx, spec)
		}
	default:
		panic(unexpected{msg})
	}
}

func (s *supervisor) spawn(ctx actor.Context, spec spawnChild) {
	pid := ctx.SpawnPrefix(s.child, spec.name)
	if spec.policy != nil {
		if err := s.strategy.SetPolicy(pid, *spec.policy); err != nil {
			panic(err)
		}
	}
	s.specs[pid.Id] = spec
	ctx.Send(s.report, spawned{spec.name, pid})
}

// harness is one supervisor on a fresh system, with a probe for what the
// supervisor reports, a probe for what its children report, and the
// supervision events of the system.
type harness struct {
	t        *testing.T
	system   *actor.ActorSystem
	strategy *supervision.Strategy
	sup      *actor.PID
	reports  *testkit.Probe // from the supervisor
	children *testkit.Probe // from the workers
	events   <-chan *actor.SupervisorEvent
	// failStarts is how many more times a worker's Started panics.
	failStarts atomic.Int32
}

// defaultDispatcher runs the supervisor and its children when a test gives
// no dispatcher; nil is protoactor's default, a goroutine per mailbox run.
var defaultDispatcher actor.Dispatcher

type option func(*harnessConfig)

type harnessConfig struct {
	childOpts  []actor.PropsOption
	dispatcher actor.Dispatcher // for the supervisor and its children
	clock      func() time.Time
	// parent, if set, spawns the supervisor as its child instead of the
	// root context, and receives its failures.
	parent actor.SupervisorStrategy
}

func withChildProps(opts ...actor.PropsOption) option {
	return func(c *harnessConfig) { c.childOpts = append(c.childOpts, opts...) }
}
func withDispatcher(d actor.Dispatcher) option { return func(c *harnessConfig) { c.dispatcher = d } }
func withClock(now func() time.Time) option    { return func(c *harnessConfig) { c.clock = now } }
func withParent(s actor.SupervisorStrategy) option {
	return func(c *harnessConfig) { c.parent = s }
}

func newHarness(t *testing.T, p supervision.Policy, opts ...option) *harness {
	t.Helper()
	var cfg harnessConfig
	for _, o := range opts {
		o(&cfg)
	}
	strategy, err := supervision.New(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.clock != nil {
		supervision.SetClock(strategy, cfg.clock)
	}
	h := &harness{t: t, system: testkit.NewSystem(t), strategy: strategy}
	h.reports = testkit.NewProbe(t, h.system)
	h.children = testkit.NewProbe(t, h.system)
	h.events = testkit.SupervisorEvents(t, h.system)

	if cfg.dispatcher == nil {
		cfg.dispatcher = defaultDispatcher
	}
	var supOpts []actor.PropsOption
	if cfg.dispatcher != nil {
		supOpts = append(supOpts, actor.WithDispatcher(cfg.dispatcher))
		cfg.childOpts = append(cfg.childOpts, actor.WithDispatcher(cfg.dispatcher))
	}
	workerProps := actor.PropsFromProducer(func() actor.Actor {
		return &worker{report: h.children.PID(), failStarts: &h.failStarts}
	}, cfg.childOpts...)
	supProps := actor.PropsFromProducer(func() actor.Actor {
		return &supervisor{strategy: strategy, child: workerProps, report: h.reports.PID(), specs: map[string]spawnChild{}}
	}, supOpts...)

	if cfg.parent == nil {
		h.sup = h.system.Root.Spawn(supProps)
		t.Cleanup(func() { testkit.Stop(t, h.system, h.sup) })
		return h
	}
	// A parent that spawns the supervisor and hands its failures to
	// cfg.parent.
	got := make(chan *actor.PID, 1)
	parent := h.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			got <- ctx.Spawn(supProps)
		}
	}, actor.WithSupervisor(cfg.parent)))
	t.Cleanup(func() { testkit.Stop(t, h.system, parent) })
	h.sup = testkit.Next(t, got, testkit.Timeout)
	return h
}

// spawn has the supervisor spawn a worker and waits until it has started.
func (h *harness) spawn(name string, p *supervision.Policy) *actor.PID {
	h.t.Helper()
	h.system.Root.Send(h.sup, spawnChild{name, p})
	s := testkit.Expect[spawned](h.t, h.reports, testkit.Timeout)
	h.expectStarted(s.pid)
	return s.pid
}

// failAndExpect makes pid panic with reason and checks the event published
// for it.
func (h *harness) failAndExpect(pid *actor.PID, reason any, want actor.Directive) failing {
	h.t.Helper()
	h.system.Root.Send(pid, fail{reason})
	f := testkit.Expect[failing](h.t, h.children, testkit.Timeout)
	h.expectEvent(pid, want)
	return f
}

func (h *harness) expectEvent(pid *actor.PID, want actor.Directive) *actor.SupervisorEvent {
	h.t.Helper()
	ev := testkit.Next(h.t, h.events, testkit.Timeout)
	if !ev.Child.Equal(pid) || ev.Directive != want {
		h.t.Fatalf("supervisor event: got %v for %v (reason %v), want %v for %v", ev.Directive, ev.Child, ev.Reason, want, pid)
	}
	return ev
}

func (h *harness) expectStarted(pid *actor.PID) started {
	h.t.Helper()
	s := testkit.Expect[started](h.t, h.children, testkit.Timeout)
	if !s.pid.Equal(pid) {
		h.t.Fatalf("started: got %v, want %v", s.pid, pid)
	}
	return s
}

// expectRestart waits for pid to receive Restarting and then Started.
func (h *harness) expectRestart(pid *actor.PID) started {
	h.t.Helper()
	r := testkit.Expect[restarting](h.t, h.children, testkit.Timeout)
	if !r.pid.Equal(pid) {
		h.t.Fatalf("restarting: got %v, want %v", r.pid, pid)
	}
	return h.expectStarted(pid)
}

func (h *harness) expectTerminated(pid *actor.PID, respawn bool) {
	h.t.Helper()
	term := testkit.Expect[terminated](h.t, h.reports, testkit.Timeout)
	if !term.pid.Equal(pid) || term.respawn != respawn {
		h.t.Fatalf("terminated: got %v respawn=%v, want %v respawn=%v", term.pid, term.respawn, pid, respawn)
	}
}

// expectAlive checks that pid still answers.
func (h *harness) expectAlive(pid *actor.PID, n int) {
	h.t.Helper()
	h.system.Root.Send(pid, ping{n})
	p := testkit.Expect[pong](h.t, h.children, testkit.Timeout)
	if !p.pid.Equal(pid) || p.n != n {
		h.t.Fatalf("pong: got %v #%d, want %v #%d", p.pid, p.n, pid, n)
	}
}

// clock is a time source tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// strategyFunc is an actor.SupervisorStrategy made of a function.
type strategyFunc func(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, reason any)

func (f strategyFunc) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	f(system, sup, child, reason)
}

func discardLogs(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }
