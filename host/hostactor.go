package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/agent"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/admission"
	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
	"github.com/dsh-actors/dsh-actors/metrics"
	"github.com/dsh-actors/dsh-actors/sessionlog"
	"github.com/dsh-actors/dsh-actors/supervision"
)

// Messages of the host actor.
type (
	// ensureAgent asks for the PID of an agent, spawning it if needed. The
	// answer is the *actor.PID or an error.
	ensureAgent struct{ id string }
	// stopAgent stops an agent; the answer, *agentStopped, comes once the
	// agent and its children have terminated.
	stopAgent    struct{ id string }
	agentStopped struct{}
)

type agentOptions struct {
	cfg  config.Config
	dir  string
	env  []string
	log  *slog.Logger
	gate *admission.Gate
	// session opens the session log; listeners run before each step.
	session   func() (*sessionlog.Log, error)
	listeners []agent.Listener
	limits    *limits.Set
	metrics   *metrics.Metrics
	// sandboxLevel is the host's choice of an agent's sandbox level.
	sandboxLevel func(agentID string) string
	// spares holds a sandbox made ahead for the next agent.
	spares *sandbox.Spares
}

// agentPolicy: an agent that panics is restarted (its children are stopped
// and its processes killed by the restart); one that keeps failing is
// stopped, never escalated, since the host must outlive every agent. The next
// call to that id starts it afresh.
func agentPolicy() supervision.Policy {
	return supervision.Policy{
		Restart:     supervision.Transient,
		MaxRestarts: 5,
		Within:      10 * time.Second,
		Backoff:     supervision.Backoff{Min: 10 * time.Millisecond, Max: time.Second, Jitter: 0.2},
		OnLimit:     supervision.StopChild,
	}
}

// resumeGuardian supervises the host actor itself: it keeps no state that a
// failed message could have corrupted beyond repair, and a restart would stop
// every agent, so a failure resumes it.
var resumeGuardian = mustStrategy(supervision.Policy{
	Restart: supervision.Permanent,
	Decider: func(any) actor.Directive { return actor.ResumeDirective },
})

// mustStrategy is for the host's own fixed policies, which are valid.
func mustStrategy(p supervision.Policy) *supervision.Strategy {
	s, err := supervision.New(p)
	if err != nil {
		panic("host: " + err.Error())
	}
	return s
}

type agentEntry struct {
	pid           *actor.PID
	hold          *limits.Hold
	reaper        *ptyproc.Reaper
	stopping      bool
	stopWaiters   []*actor.PID
	ensureWaiters []*actor.PID
}

// hostActor is the parent of every agent.
type hostActor struct {
	h        *Host
	opts     agentOptions
	agents   map[string]*agentEntry
	byPID    map[string]string
	strategy *supervision.Strategy
	// incarnation numbers the agents' actor names: an agent started again
	// under the same id gets a new name, so a PID cached for the old one
	// never reaches the new one while protoactor is still setting it up.
	incarnation atomic.Uint64
}

func newHostActor(h *Host, opts agentOptions) *hostActor {
	return &hostActor{
		h:        h,
		opts:     opts,
		agents:   map[string]*agentEntry{},
		byPID:    map[string]string{},
		strategy: mustStrategy(agentPolicy()),
	}
}

func (a *hostActor) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	a.strategy.HandleFailure(system, sup, child, rs, reason, message)
}

func (a *hostActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
	case *actor.Stopping, *actor.Restarting:
		a.strategy.Stopping()
	case *actor.Stopped:
		a.h.agents.Range(func(k, _ any) bool { a.h.agents.Delete(k); return true })
	case *ensureAgent:
		e := a.agents[m.id]
		switch {
		case e == nil && !a.strategy.MaySpawn():
			ctx.Respond(ErrStopped)
		case e == nil:
			ctx.Respond(a.spawn(ctx, m.id))
		case e.stopping:
			e.ensureWaiters = append(e.ensureWaiters, ctx.Sender())
		default:
			ctx.Respond(e.pid)
		}
	case *stopAgent:
		e := a.agents[m.id]
		if e == nil {
			ctx.Respond(&agentStopped{})
			return
		}
		e.stopWaiters = append(e.stopWaiters, ctx.Sender())
		if !e.stopping {
			e.stopping = true
			a.strategy.StoppingChild(e.pid)
			a.h.agents.CompareAndDelete(m.id, e.pid)
			ctx.Stop(e.pid)
		}
	case *actor.Terminated:
		id, ok := a.byPID[m.Who.Id]
		if !ok {
			return
		}
		e := a.agents[id]
		delete(a.byPID, m.Who.Id)
		delete(a.agents, id)
		a.h.agents.CompareAndDelete(id, e.pid)
		a.strategy.ChildTerminated(m.Who)
		e.hold.Release()
		// The agent's actors are gone; its processes may still be dying.
		// Stop waiters are answered once they are.
		a.h.reaping.Add(1)
		go func(root *actor.RootContext, r *ptyproc.Reaper, waiters []*actor.PID) {
			defer a.h.reaping.Done()
			if err := r.Wait(context.Background()); err != nil {
				a.opts.log.Warn("host: killing an agent's processes", "agent", id, "err", err)
			}
			for _, w := range waiters {
				root.Send(w, &agentStopped{})
			}
		}(ctx.ActorSystem().Root, e.reaper, e.stopWaiters)
		if len(e.ensureWaiters) > 0 {
			ans := a.spawn(ctx, id)
			for _, w := range e.ensureWaiters {
				ctx.Send(w, ans)
			}
		}
	default:
		a.opts.log.Warn("host: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// spawn starts agent id and answers its PID, or an error.
func (a *hostActor) spawn(ctx actor.Context, id string) any {
	hold, err := a.opts.limits.Pool(limits.Agents).Take()
	if err != nil {
		return fmt.Errorf("host: starting agent %q: %w", id, err)
	}
	var level string
	if a.opts.sandboxLevel != nil {
		level = a.opts.sandboxLevel(id)
		if level != "" && !sandbox.Level(level).Valid() {
			hold.Release()
			return fmt.Errorf("host: starting agent %q: %w: %q (one of %v)", id, ErrInvalidSandboxLevel, level, sandbox.Levels)
		}
	}
	reaper := &ptyproc.Reaper{}
	pid, err := ctx.SpawnNamed(agent.Props(agent.Options{
		ID:           id,
		Config:       a.opts.cfg,
		Dir:          a.opts.dir,
		Env:          a.opts.env,
		SandboxLevel: level,
		Spares:       a.opts.spares,
		Logger:       a.opts.log,
		Reaper:       reaper,
		Gate:         a.opts.gate,
		Dispatcher:   dispatcher,
		Session:      a.opts.session,
		Listeners:    a.opts.listeners,
		Limits:       a.opts.limits,
		Metrics:      a.opts.metrics,
	}), fmt.Sprintf("%s#%d", id, a.incarnation.Add(1)))
	if err != nil {
		hold.Release()
		return fmt.Errorf("host: starting agent %q: %w", id, err)
	}
	a.agents[id] = &agentEntry{pid: pid, hold: hold, reaper: reaper}
	a.byPID[pid.Id] = id
	a.h.agents.Store(id, pid)
	return pid
}

// MaxAgentIDLen bounds agent ids.
const MaxAgentIDLen = 128

// ValidateAgentID checks an agent id: 1 to 128 characters of ASCII letters,
// digits, '.', '_', ':', '@' and '-', starting with a letter or a digit.
func ValidateAgentID(id string) error {
	rule := "use 1 to 128 of the characters A-Z a-z 0-9 . _ : @ -, starting with a letter or digit"
	if id == "" {
		return errors.New("host: agent id is empty: " + rule)
	}
	if len(id) > MaxAgentIDLen {
		return fmt.Errorf("host: agent id %.20q... is %d bytes long: %s", id, len(id), rule)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i > 0 {
			ok = ok || c == '.' || c == '_' || c == ':' || c == '@' || c == '-'
		}
		if !ok {
			r, _ := utf8.DecodeRuneInString(id[i:])
			return fmt.Errorf("host: agent id %q has %q at byte %d: %s", id, r, i, rule)
		}
	}
	return nil
}
