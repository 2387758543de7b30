package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/agent"
	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/actors/terminal"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/executor"
	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
	"github.com/dsh-actors/dsh-actors/internal/sigstate"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/metrics"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

// ErrStopped is returned by calls on a host that has been stopped.
var ErrStopped = errors.New("host: stopped")

// ErrInvalidSandboxLevel is returned for an agent whose Options.SandboxLevel
// is not a level.
var ErrInvalidSandboxLevel = errors.New("host: not a sandbox level")

// Options configure a host. The zero value is a host with the default
// configuration on an actor system of its own.
type Options struct {
	// System is an actor system the embedding program already runs. Nil
	// makes one for the host, which Stop shuts down.
	System *actor.ActorSystem
	// Config is the runtime configuration; nil means config.Default().
	Config *config.Config
	// Dir is where agents' shells start; empty means the host's working
	// directory.
	Dir string
	// Env is the base environment of agents' processes; nil means the host's.
	Env []string
	// Logger receives the runtime's logs; nil means slog.Default() at
	// warnings and errors only. The actor system made for the host logs
	// warnings and errors only.
	Logger *slog.Logger
	// SessionLog is the session log the agents append to, owned by the
	// caller. Nil means the file of the configuration's session.path, which
	// the host opens at the first use of a session feature and closes in
	// Stop.
	SessionLog *sessionlog.Log
	// Listeners run before each step of every agent, after the plugins the
	// configuration turns on (the tmux location).
	Listeners []agent.Listener
	// Executor runs plugins' commands; nil means one with
	// executor.AllowAll.
	Executor *executor.Executor
	// SandboxLevel chooses an agent's sandbox level (one of auto, off,
	// process, limits, nonet, fs) in place of the configuration's
	// sandbox.level; nil, or "", keeps the configuration's. An unknown
	// level fails the agent's calls with ErrInvalidSandboxLevel.
	SandboxLevel func(agentID string) string
	// Metrics records the host's calls, failures and usage; nil records
	// nothing. The actor system made for the host (System nil) carries
	// protoactor's instruments when the Metrics has them.
	Metrics *metrics.Metrics
}

// Host runs agents. It is safe for concurrent use.
type Host struct {
	system    *actor.ActorSystem
	ownSystem bool
	cfg       config.Config
	spares    *sandbox.Spares
	log       *slog.Logger
	pid       *actor.PID

	// agents caches agent PIDs. The host actor stores and clears them; Call
	// also drops a PID it found dead (CompareAndDelete, so a newer one stays).
	agents   sync.Map // string -> *actor.PID
	calls    atomic.Uint64
	stopped  atomic.Bool
	stopOnce sync.Once
	stopDone chan struct{}
	stopErr  error
	// reaping counts agents whose processes are still being killed.
	reaping sync.WaitGroup
	// session opens the session log once; ownLog: the host opened it, and
	// closes it in Stop.
	session func() (*sessionlog.Log, error)
	ownLog  atomic.Pointer[sessionlog.Log]
	// limits count what the host runs against the configuration's limits.
	limits  *limits.Set
	metrics *metrics.Metrics
	// listeners is how many pre-step listeners every agent runs.
	listeners int
}

// dispatcher runs every actor of the host on the goroutine that sends it a
// message, instead of a new goroutine per mailbox activation: a bash call
// then costs two goroutine wake-ups (the PTY reader's and the caller's)
// instead of five. It is safe because no Receive of the host's actors blocks:
// processes are killed by reapers, and PTY reads and waits run in goroutines
// of their own. See DESIGN.md.
var dispatcher = actor.NewSynchronizedDispatcher(300)

// Start starts a host.
func Start(opts Options) (*Host, error) {
	cfg := config.Default()
	if opts.Config != nil {
		cfg = *opts.Config
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		// Warnings and errors only: a shell reset is logged at Info, and a
		// program that did not ask for logs should not get a line for each.
		log = slog.New(minLevel{slog.Default().Handler(), slog.LevelWarn})
	}
	if st, err := sigstate.Inherited(); err == nil && !st.Clean() {
		log.Warn("programs started by this host inherit a signal state that breaks terminals; call host.ResetInheritedSignals first in main",
			"signals", st.String())
	}
	h := &Host{system: opts.System, cfg: cfg, log: log, stopDone: make(chan struct{})}
	if h.system == nil {
		quiet := slog.New(minLevel{log.Handler(), slog.LevelWarn})
		sysOpts := append([]actor.ConfigOption{actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet })},
			opts.Metrics.ActorSystemOptions()...)
		h.system = actor.NewActorSystem(sysOpts...)
		h.ownSystem = true
	}
	h.metrics = opts.Metrics
	h.session = sessionOpener(h, opts.SessionLog, cfg.Session)
	listeners := append(plugins(cfg, opts.Executor, log), opts.Listeners...)
	h.listeners = len(listeners)
	gate := cfg.Admission.NewGate()
	h.limits = cfg.Limits.NewSet()
	opts.Metrics.KnownTools(agent.AllToolNames()...)
	opts.Metrics.ReportUsage(func() []metrics.Usage {
		var out []metrics.Usage
		for _, u := range h.Usage() {
			out = append(out, metrics.Usage(u))
		}
		return out
	})
	// A sandbox made ahead for the next agent at the configured level (an
	// agent given another level by SandboxLevel makes its own).
	h.spares = sandbox.NewSpares(cfg.Sandbox.Want("", "", opts.Dir), log, func(r sandbox.Report, took time.Duration) {
		opts.Metrics.SandboxMade(string(r.Asked), r.Obtained.String(), took)
	})
	props := actor.PropsFromProducer(func() actor.Actor {
		return newHostActor(h, agentOptions{cfg: cfg, dir: opts.Dir, env: opts.Env, log: log, gate: gate,
			session: h.session, listeners: listeners, limits: h.limits, metrics: opts.Metrics, sandboxLevel: opts.SandboxLevel,
			spares: h.spares})
	}, actor.WithGuardian(resumeGuardian), actor.WithDispatcher(dispatcher))
	pid, err := h.system.Root.SpawnNamed(props, "dsh-host-"+h.system.ProcessRegistry.NextId())
	if err != nil {
		_ = h.spares.Close()
		if h.ownSystem {
			h.system.Shutdown()
		}
		return nil, fmt.Errorf("host: %w", err)
	}
	h.pid = pid
	return h, nil
}

// ResetInheritedSignals makes sure the shells and terminal programs this
// process starts get no blocked or ignored signal from it. Go passes a child
// the signal mask the process itself started with, and keeps SIGHUP and
// SIGINT ignored if they were, so a program started with SIGWINCH blocked
// (some CI runners do that) or from `nohup`/`&` would start terminals that
// never see a resize or a ^C. When that is so, ResetInheritedSignals
// executes the program again, with the same arguments and environment and a
// clean state, and does not return; otherwise it returns at once.
//
// Call it first thing in main, before anything else runs. It returns an
// error naming the signals when the state cannot be cleaned. [Start] logs a
// warning when it finds such a state.
func ResetInheritedSignals() error { return sigstate.Reexec() }

// System returns the actor system the host runs on.
func (h *Host) System() *actor.ActorSystem { return h.system }

// HasListeners tells whether agents run pre-step listeners (a plugin the
// configuration turns on, or Options.Listeners).
func (h *Host) HasListeners() bool { return h.listeners > 0 }

// Metrics returns the host's metrics; nil when it has none.
func (h *Host) Metrics() *metrics.Metrics { return h.metrics }

// Config returns the host's configuration.
func (h *Host) Config() config.Config { return h.cfg }

// Agent is a handle on one agent of a host.
type Agent struct {
	h  *Host
	id string
}

// ID is the agent's id.
func (a *Agent) ID() string { return a.id }

// Call runs a tool of the agent; see Host.Call.
func (a *Agent) Call(ctx context.Context, tool string, args json.RawMessage) (*messages.ToolResult, error) {
	return a.h.Call(ctx, a.id, tool, args)
}

// Bash runs the bash tool of the agent; see Host.Bash.
func (a *Agent) Bash(ctx context.Context, args shell.Args) (shell.Result, error) {
	return a.h.Bash(ctx, a.id, args)
}

// Agent returns the agent with the given id, starting it if it does not run.
func (h *Host) Agent(ctx context.Context, id string) (*Agent, error) {
	if _, err := h.agentPID(ctx, id); err != nil {
		return nil, err
	}
	return &Agent{h: h, id: id}, nil
}

func (h *Host) agentPID(ctx context.Context, id string) (*actor.PID, error) {
	if h.stopped.Load() {
		return nil, ErrStopped
	}
	if pid, ok := h.agents.Load(id); ok {
		return pid.(*actor.PID), nil
	}
	if err := ValidateAgentID(id); err != nil {
		return nil, err
	}
	res, err := newReplyBox(h.system).request(ctx, h.pid, &ensureAgent{id: id})
	if err != nil {
		if errors.Is(err, errDeadLetter) {
			return nil, ErrStopped
		}
		return nil, err
	}
	switch r := res.(type) {
	case *actor.PID:
		return r, nil
	case error:
		return nil, r
	}
	return nil, fmt.Errorf("host: unexpected answer %T", res)
}

// Call runs one tool call: the tool's name and its JSON arguments, as a
// model produced them. A tool that fails (bad arguments, unknown tool, a
// timeout) answers with a result whose IsError is set; the error return is
// for the call itself: a bad agent id, a stopped host, a cancelled context.
//
// Cancelling ctx withdraws the call, as semaphore.Acquire has it: Call
// returns ctx's error and the call holds nothing afterwards. The bash tool
// resets its shell; a terminal_send releases the terminal's reservation; a
// terminal_open closes the terminal nobody saw; a terminal_read or
// task_output stops waiting; a background send, whose task id the caller
// may not have seen, is stopped as task_kill would. Output an answer
// carried to a caller that had gone comes again in the terminal's or the
// task's next result, or that result says which bytes to page.
func (h *Host) Call(ctx context.Context, agentID, tool string, args json.RawMessage) (*messages.ToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // withdrawn before it started: nothing runs
	}
	return h.call(ctx, agentID, tool, args, "c"+strconv.FormatUint(h.calls.Add(1), 10))
}

// Progress is how a running call is getting on (see CallWithProgress).
type Progress struct {
	// Elapsed is the time since the call was made.
	Elapsed time.Duration
	// Line is the last line of output the call has printed so far (bash
	// calls; empty for other tools and before any output), at most 200
	// bytes of it.
	Line string
}

// CallWithProgress is Call, and while the call runs it reports the call's
// progress to report every interval (for an MCP client that gave a
// progress token, so that it knows the call is alive and can renew its
// own timeout). report runs on a goroutine of the call's and must not
// block for long; it is not called after CallWithProgress returns.
func (h *Host) CallWithProgress(ctx context.Context, agentID, tool string, args json.RawMessage, interval time.Duration, report func(Progress)) (*messages.ToolResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if interval <= 0 || report == nil {
		return h.Call(ctx, agentID, tool, args)
	}
	callID := "c" + strconv.FormatUint(h.calls.Add(1), 10)
	start := time.Now()
	done := make(chan struct{})
	var reporting sync.WaitGroup
	reporting.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			p := Progress{Elapsed: time.Since(start)}
			if pid, ok := h.agents.Load(agentID); ok && tool == shell.ToolName {
				// A look that takes long is skipped: the elapsed time
				// still goes.
				peekCtx, cancel := context.WithTimeout(ctx, interval/2)
				if m, err := newReplyBox(h.system).request(peekCtx, pid.(*actor.PID), &shell.Peek{CallID: callID}); err == nil {
					if pk, ok := m.(*shell.Peeked); ok {
						p.Line = pk.Line
					}
				}
				cancel()
			}
			select {
			case <-done:
				return
			default:
				report(p)
			}
		}
	})
	defer reporting.Wait()
	defer close(done)
	return h.call(ctx, agentID, tool, args, callID)
}

func (h *Host) call(ctx context.Context, agentID, tool string, args json.RawMessage, callID string) (*messages.ToolResult, error) {
	call := &messages.ToolCall{CallId: callID, AgentId: agentID, Tool: tool, Arguments: args}
	start := time.Now()
	res, pid, err := h.ask(ctx, agentID, call, nil)
	if err != nil {
		cancelled := ctx.Err() != nil
		if pid != nil && cancelled {
			h.system.Root.Send(pid, &messages.CancelCall{CallId: callID})
		}
		h.metrics.Call(tool, time.Since(start), false, nil, err, cancelled)
		return nil, err
	}
	r, ok := res.(*messages.ToolResult)
	if !ok {
		return nil, fmt.Errorf("host: unexpected answer %T to a tool call", res)
	}
	h.metrics.Call(tool, time.Since(start), r.IsError, r.Data, nil, false)
	return r, nil
}

// Withdraw takes back an answer Call returned that never reached its
// reader (a connection that closed before the answer could be written),
// by the result's CallId. It is the cancel that comes just after the
// answer (see Call): what the answer carried comes again in the next
// result, or that result names the bytes to page. The agent remembers its
// last answers for this; an older one, or one whose agent has stopped, is
// beyond reach.
func (h *Host) Withdraw(agentID, callID string) {
	if h.stopped.Load() || callID == "" {
		return
	}
	if pid, ok := h.agents.Load(agentID); ok {
		h.system.Root.Send(pid.(*actor.PID), &messages.CancelCall{CallId: callID})
	}
}

// ask sends msg to the agent and waits for its answer. An agent that
// stopped since its PID was cached (a dead letter), or whose answer says
// (again) that it never began the request, is started anew and asked again,
// up to three times. pid is the agent asked last.
func (h *Host) ask(ctx context.Context, agentID string, msg any, again func(any) bool) (res any, pid *actor.PID, err error) {
	for attempt := 0; ; attempt++ {
		if pid, err = h.agentPID(ctx, agentID); err != nil {
			return nil, nil, err
		}
		res, err = newReplyBox(h.system).request(ctx, pid, msg)
		retry := errors.Is(err, errDeadLetter) || (err == nil && again != nil && again(res))
		switch {
		case retry && attempt < 3:
			h.agents.CompareAndDelete(agentID, pid)
			continue
		case errors.Is(err, errDeadLetter):
			return nil, pid, fmt.Errorf("host: agent %q keeps stopping", agentID)
		}
		return res, pid, err
	}
}

// Bash runs the bash tool with typed arguments and returns its typed result.
func (h *Host) Bash(ctx context.Context, agentID string, args shell.Args) (shell.Result, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return shell.Result{}, err
	}
	r, err := h.Call(ctx, agentID, shell.ToolName, raw)
	if err != nil {
		return shell.Result{}, err
	}
	var res shell.Result
	if len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &res); err != nil {
			return shell.Result{}, fmt.Errorf("host: decoding the bash result: %w", err)
		}
	}
	res.Text, res.IsError = r.Text, r.IsError
	return res, nil
}

// StopAgent stops an agent and everything it started, and returns when all
// of it is gone. Stopping an agent that does not run is not an error.
func (h *Host) StopAgent(ctx context.Context, id string) error {
	if h.stopped.Load() {
		return ErrStopped
	}
	if err := ValidateAgentID(id); err != nil {
		return err
	}
	_, err := newReplyBox(h.system).request(ctx, h.pid, &stopAgent{id: id})
	if errors.Is(err, errDeadLetter) {
		return ErrStopped
	}
	return err
}

// Agents lists the ids of the running agents.
func (h *Host) Agents() []string {
	var ids []string
	h.agents.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	return ids
}

// Stop stops every agent and every process they started, and returns when
// all of them are gone; then, if the host made its own actor system, it
// shuts that down. Calls made after Stop fail with ErrStopped. If ctx ends
// first, Stop returns its error while the stop goes on.
func (h *Host) Stop(ctx context.Context) error {
	h.stopOnce.Do(func() {
		h.stopped.Store(true)
		go func() {
			defer close(h.stopDone)
			if err := h.system.Root.StopFuture(h.pid).Wait(); err != nil {
				h.stopErr = fmt.Errorf("host: stopping: %w", err)
			}
			// Every agent has terminated; their processes may still be dying.
			h.reaping.Wait()
			if err := h.spares.Close(); err != nil && h.stopErr == nil {
				h.stopErr = fmt.Errorf("host: closing the spare sandbox: %w", err)
			}
			if l := h.ownLog.Load(); l != nil {
				if err := l.Close(); err != nil && h.stopErr == nil {
					h.stopErr = fmt.Errorf("host: closing the session log: %w", err)
				}
			}
			if h.ownSystem {
				h.system.Shutdown()
			}
		}()
	})
	select {
	case <-h.stopDone:
		return h.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ToolInfo describes a tool for a model.
type ToolInfo struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema json.RawMessage
}

// Tools lists the tools every agent of this host offers, as configured.
func (h *Host) Tools() []ToolInfo {
	var out []ToolInfo
	for _, t := range agent.Tools(h.cfg) {
		out = append(out, ToolInfo{Name: t.Name, Description: t.Description, InputSchema: t.Schema})
	}
	return out
}

// Guidance is text for the model's system prompt about when to use which
// tool.
func (h *Host) Guidance() string { return terminal.Guidance }

// minLevel filters a handler to records at or above a level.
type minLevel struct {
	slog.Handler
	level slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.level && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(attrs), m.level}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{m.Handler.WithGroup(name), m.level}
}

// Usage is how much of one kind the host runs, against its limit.
type Usage struct {
	// Kind is agents, shells, terminals or tasks (the key under limits).
	Kind string
	// InUse is how many run now; Max is the limit, 0 for none.
	InUse, Max int64
	// Refused counts what was turned down at the limit.
	Refused uint64
}

// Usage reports every kind the host limits, in a fixed order.
func (h *Host) Usage() []Usage {
	var out []Usage
	for _, p := range h.limits.Pools() {
		out = append(out, Usage{Kind: string(p.Kind()), InUse: p.InUse(), Max: p.Max(), Refused: p.Refused()})
	}
	return out
}
