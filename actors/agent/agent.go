package agent

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/actors/tasks"
	"github.com/dsh-actors/dsh-actors/actors/terminal"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/admission"
	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/safetext"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/metrics"
	"github.com/dsh-actors/dsh-actors/sessionlog"
	"github.com/dsh-actors/dsh-actors/supervision"
)

// Options configure an agent actor.
type Options struct {
	// ID is the agent's id, as the host knows it.
	ID string
	// Config is the runtime configuration; its sections configure the tools.
	Config config.Config
	// Dir is the working directory the agent's shells start in; empty means
	// the host's.
	Dir string
	// Env is the base environment of the agent's processes; nil means the
	// host's.
	Env []string
	// Logger receives the agent's log lines; nil means slog.Default().
	Logger *slog.Logger
	// Reaper kills the processes of the agent's shells and terminals in the
	// background; the agent's owner waits for it after stopping the agent.
	// Nil means one of the agent's own.
	Reaper *ptyproc.Reaper
	// Gate is the host's admission gate for bash calls; nil admits all.
	Gate *admission.Gate
	// Dispatcher runs the agent and its children; nil means protoactor's
	// default, a goroutine per mailbox activation.
	Dispatcher actor.Dispatcher
	// ShellPolicy is how the agent supervises its shell. The zero value means
	// DefaultShellPolicy.
	ShellPolicy *supervision.Policy
	// Session opens the session log the agent appends to (called on the
	// session goroutine, at its first use; the host opens its file once for
	// all agents). Nil, or a nil log, means no session log: the session
	// protocol is answered with ErrNoSessionLog.
	Session func() (*sessionlog.Log, error)
	// Listeners run before each step, in this order (see Listener).
	Listeners []Listener
	// Limits are the host's limits on shells, terminals and tasks; nil
	// means none.
	Limits *limits.Set
	// Metrics records the failures of the agent and its actors; nil
	// records nothing.
	Metrics *metrics.Metrics
	// SandboxLevel, when not empty, is the sandbox level of this agent in
	// place of the configuration's sandbox.level (a host's choice).
	SandboxLevel string
	// Spares, when set, may hold a sandbox made ahead for this agent (the
	// host's, shared by its agents).
	Spares *sandbox.Spares
}

// DefaultShellPolicy restarts the shell after each reset (timeout, exit,
// cancel): a fresh bash on the next call. Resets are expected failures and
// never counted; the limit catches a shell actor that keeps panicking (a
// bug), and past it the failure escalates to the agent.
func DefaultShellPolicy() supervision.Policy {
	return supervision.Policy{
		Restart:     supervision.Transient,
		MaxRestarts: 100,
		Within:      10e9, // 10s
		Decider: supervision.Decide(
			supervision.On[*shell.ResetError](actor.RestartDirective),
		),
	}
}

// Actor is one agent: it owns its tools' actors and dispatches calls to
// them. See the package documentation.
type Actor struct {
	opts     Options
	log      *slog.Logger
	strategy *supervision.Strategy
	shell    *actor.PID
	tasks    *actor.PID
	// terminals maps the agent's terminal ids to their actors: the only way
	// to reach a terminal, so another agent's id is simply not found.
	terminals   map[string]*actor.PID
	terminalIDs map[string]string // PID id -> terminal id
	// terminalHolds count the terminals against the host's limit; a
	// closed one gives its hold back when its close is answered, so that
	// the next terminal_open may use it (its actor's stop comes a little
	// later, and gives it back too if nothing did).
	terminalHolds map[string]*limits.Hold // PID id -> hold
	lastTerminal  int
	// inflight are the calls handed to a child and not answered yet. The
	// child answers the agent, which passes the answer on; a child that
	// stops with calls in its mailbox (protoactor drops them) cannot leave
	// a caller waiting, because the agent answers those itself.
	inflight map[string]inflight
	// answered are the last calls answered by terminals and tasks: a caller
	// that had gone when the answer came withdraws the call after it was
	// answered, and the child says what the answer carried to the next
	// result (see withdraw).
	answered []answeredCall
	// lists are the terminal_list calls waiting for their terminals.
	lists map[string]*listing
	// lost survives a restart of the agent (it is shared with the
	// producer): what the failed agent had, so that a later call naming one
	// of its terminals or tasks is told what happened to it.
	lost *lostNote
	// session runs the session protocol; started at its first message.
	session *session
	// sandbox is where the agent's shell, terminals and tasks run; shared
	// with the producer like lost.
	sandbox *sandbox.Holder
	// warmed: the sandbox was asked for at the agent's start.
	warmed bool
}

// lostNote says what an agent restart took away.
type lostNote struct{ text string }

// answeredCall is a call a terminal or the tasks answered.
type answeredCall struct {
	callID string
	child  *actor.PID
}

// answeredKept is how many answered calls the agent remembers: a caller
// withdraws at once when its context ends. The records hold no output (the
// child keeps what it needs to give it back), but their PIDs would keep a
// stopped child's actor reachable (protoactor caches the process in the
// PID), so the records of a closed terminal are forgotten with it.
const answeredKept = 64

// forgetAnswered drops the answered calls of child, which has closed or
// stopped (a terminal, or a shell or task registry that a new one replaces):
// nothing is left there to give their output back.
func (a *Actor) forgetAnswered(child *actor.PID) {
	a.answered = slices.DeleteFunc(a.answered, func(c answeredCall) bool { return c.child.Equal(child) })
}

// release lets go of what the agent kept once it has stopped: its actor
// stays reachable through any stale *actor.PID (its parent's child set
// keeps removed PIDs in its spare capacity), and must not keep its
// children's actors reachable in turn.
func (a *Actor) release() {
	a.answered = nil
	clear(a.terminals)
	clear(a.terminalIDs)
	clear(a.terminalHolds)
	clear(a.inflight)
	clear(a.lists)
	a.shell, a.tasks, a.session = nil, nil, nil
}

// carriesOutput reports whether tool's answers carry a terminal's output
// (or its id), which a withdrawn answer must not lose.
func carriesOutput(tool string) bool {
	switch tool {
	case shell.ToolName, terminal.ToolOpen, terminal.ToolSend, terminal.ToolRead, tasks.ToolOutput, tasks.ToolKill:
		return true
	}
	return false
}

// inflight is a call a child has.
type inflight struct {
	caller *actor.PID
	child  *actor.PID
	tool   string
}

// childGone is sent to itself when a child has stopped: queued behind the
// answers the child sent before it stopped, so those are passed on first.
type childGone struct{ who *actor.PID }

var _ actor.SupervisorStrategy = (*Actor)(nil)

// Props returns the props of an agent actor.
func Props(opts Options) *actor.Props {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Reaper == nil {
		opts.Reaper = &ptyproc.Reaper{}
	}
	log := opts.Logger.With("agent", opts.ID)
	policy := DefaultShellPolicy()
	if opts.ShellPolicy != nil {
		policy = *opts.ShellPolicy
	}
	lost := &lostNote{}
	// The base environment (nil: the host's), as the policy lets it
	// through.
	opts.Env = opts.Config.Sandbox.Env.Filter(opts.Env)
	// The sandbox outlives a restart of the agent (it is shared with the
	// producer) and ends when the agent stops.
	sb := sandbox.NewHolder(opts.Config.Sandbox.Want(opts.ID, opts.SandboxLevel, opts.Dir), opts.Spares, log,
		func(r sandbox.Report, took time.Duration) {
			opts.Metrics.SandboxMade(string(r.Asked), r.Obtained.String(), took)
		})
	return actor.PropsFromProducer(func() actor.Actor {
		strategy, err := supervision.New(policy)
		if err != nil {
			// Options.Validate rejects such a policy before any spawn.
			panic(fmt.Sprintf("agent: invalid shell policy: %v", err))
		}
		return &Actor{opts: opts, log: log, strategy: strategy,
			terminals: map[string]*actor.PID{}, terminalIDs: map[string]string{}, terminalHolds: map[string]*limits.Hold{}, inflight: map[string]inflight{}, lists: map[string]*listing{}, lost: lost, sandbox: sb}
	}, opts.propsOptions(log)...)
}

// propsOptions are the props options the agent and its children share.
func (o Options) propsOptions(log *slog.Logger) []actor.PropsOption {
	opts := []actor.PropsOption{actor.WithReceiverMiddleware(o.Metrics.Failures(), supervision.LogPanics(log))}
	if o.Dispatcher != nil {
		opts = append(opts, actor.WithDispatcher(o.Dispatcher))
	}
	return opts
}

// Validate checks the options that can be wrong.
func (o Options) Validate() error {
	if o.ShellPolicy != nil {
		if err := o.ShellPolicy.Validate(); err != nil {
			return fmt.Errorf("agent: shell policy: %w", err)
		}
	}
	return o.Config.Validate()
}

// childPolicies: a terminal that fails is not resurrected (Temporary); the
// task registry is restarted like the shell.
var (
	terminalPolicy = supervision.Policy{Restart: supervision.Temporary}
	tasksPolicy    = supervision.Policy{Restart: supervision.Transient, MaxRestarts: 10, Within: 10e9}
)

// HandleFailure lets the agent supervise its children with its own policies.
func (a *Actor) HandleFailure(system *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, message any) {
	a.strategy.HandleFailure(system, sup, child, rs, reason, message)
}

// Receive dispatches tool calls and keeps track of children.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if !a.warmed {
			// The sandbox is made while the first call is on its way, not
			// in the shell's or terminal's start.
			a.warmed = true
			done := a.opts.Reaper.Hold()
			go func(h *sandbox.Holder) {
				defer done()
				_, _ = h.Get()
			}(a.sandbox)
		}
	case *actor.Stopping, *actor.Restarting:
		// protoactor stops the children next; each cleans up its own
		// processes. No restart may be scheduled meanwhile. What they have
		// of calls is answered here, as their answers may not get through.
		a.strategy.Stopping()
		if a.session != nil {
			a.session.stop() // the Reaper waits for its goroutine
			a.session = nil
		}
		why := "the agent is stopping"
		if _, ok := m.(*actor.Restarting); ok {
			why = "the agent failed and is restarting; its shell, terminals and tasks are gone"
			ids := make([]string, 0, len(a.terminals))
			for id := range a.terminals {
				ids = append(ids, id)
			}
			sort.Slice(ids, func(i, j int) bool { return terminalNumber(ids[i]) < terminalNumber(ids[j]) })
			a.lost.text = fmt.Sprintf("the agent failed and was restarted at %s: its shell, its terminals (%s) and its background tasks were lost",
				time.Now().Format("15:04:05"), strings.Join(ids, ", "))
			if len(ids) == 0 {
				a.lost.text = fmt.Sprintf("the agent failed and was restarted at %s: its shell and background tasks were lost", time.Now().Format("15:04:05"))
			}
		}
		for id, f := range a.inflight {
			delete(a.inflight, id)
			ctx.Send(f.caller, messages.ErrorResult(id, f.tool, f.tool+": "+why))
		}
		for _, l := range a.lists {
			a.answerList(ctx, l) // with what came
		}
	case *actor.Stopped:
		// The children have stopped and handed their processes to the
		// Reaper; the sandbox ends with whatever is left in it, and the
		// agent's owner, waiting for the Reaper, waits for that too.
		done := a.opts.Reaper.Hold()
		go func(h *sandbox.Holder) {
			defer done()
			if err := h.Close(); err != nil {
				a.log.Error("sandbox: ending the agent's sandbox", "err", err)
			}
		}(a.sandbox)
		a.release()
	case *messages.ToolCall:
		a.dispatch(ctx, m)
	case *Record, *Inject, *PrepareStep, *BeginTurn:
		if !a.strategy.MaySpawn() {
			ctx.Respond(refusal(m, ErrStopping)) // a session now would outlive the agent
			return
		}
		if a.session == nil {
			a.session = newSession(a, ctx.ActorSystem().Root)
		}
		a.session.add(sessionWork{msg: m, sender: ctx.Sender()})
	case *shell.Peek:
		// How a running bash call is getting on: its shell says.
		if f, ok := a.inflight[m.CallID]; ok && f.child.Equal(a.shell) {
			ctx.Forward(a.shell)
		} else {
			ctx.Respond(&shell.Peeked{})
		}
	case *messages.CancelCall:
		// The child that has the call withdraws it; nobody waits for its
		// answer any more.
		f, ok := a.inflight[m.CallId]
		if ok {
			delete(a.inflight, m.CallId)
			a.withdraw(ctx, m.CallId, f.child)
			break
		}
		for _, c := range a.answered {
			if c.callID == m.CallId {
				a.withdraw(ctx, m.CallId, c.child)
			}
		}
	case *messages.ToolResult:
		if f, ok := a.inflight[m.CallId]; ok {
			delete(a.inflight, m.CallId)
			if m.IsError && a.lost.text != "" && strings.Contains(m.Text, "no such task") {
				m.Text += " (" + a.lost.text + ")"
			}
			if f.tool != shell.ToolName {
				m = fitResult(m, a.opts.Config.Terminal.MaxResultBytes)
			}
			if carriesOutput(f.tool) {
				if len(a.answered) == answeredKept {
					a.answered = slices.Delete(a.answered, 0, 1)
				}
				a.answered = append(a.answered, answeredCall{callID: m.CallId, child: f.child})
			}
			if f.tool == terminal.ToolClose && !m.IsError {
				// Closed: the id is gone now, not when the actor's stop
				// is reported (a send in between would reach nobody).
				if id, ok := a.terminalIDs[f.child.Id]; ok {
					delete(a.terminalIDs, f.child.Id)
					delete(a.terminals, id)
				}
				a.terminalHolds[f.child.Id].Release()
				delete(a.terminalHolds, f.child.Id)
				a.forgetAnswered(f.child)
			}
			if n := a.sandbox.Notice(); n != "" && !m.IsError {
				m.Text += "\n" + n
			}
			ctx.Send(f.caller, m)
		}
	case *actor.DeadLetterResponse:
		a.failCalls(ctx, m.Target, "it had stopped")
	case *childGone:
		a.failCalls(ctx, m.who, "it stopped before answering")
		for _, l := range a.lists {
			for id, pidID := range l.ids {
				if pidID == m.who.Id {
					delete(l.ids, id) // closed meanwhile: not listed
				}
			}
			if l.complete() {
				a.answerList(ctx, l)
			}
		}
	case *terminal.Info:
		a.listed(ctx, m)
	case *listDue:
		if l, ok := a.lists[m.callID]; ok {
			a.answerList(ctx, l)
		}
	case *crash:
		panic(m.reason)
	case *actor.Terminated:
		switch {
		case a.shell != nil && m.Who.Equal(a.shell):
			a.shell = nil
		case a.tasks != nil && m.Who.Equal(a.tasks):
			a.tasks = nil
		default:
			if id, ok := a.terminalIDs[m.Who.Id]; ok {
				delete(a.terminalIDs, m.Who.Id)
				delete(a.terminals, id)
			}
			delete(a.terminalHolds, m.Who.Id)
		}
		a.forgetAnswered(m.Who)
		a.strategy.ChildTerminated(m.Who)
		ctx.Send(ctx.Self(), &childGone{who: m.Who})
	default:
		a.log.Warn("agent: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

func (a *Actor) dispatch(ctx actor.Context, call *messages.ToolCall) {
	if !a.strategy.MaySpawn() {
		// Stopping or restarting (protoactor still delivers messages): a
		// child spawned now would never be stopped, nor would the agent.
		ctx.Respond(errorResult(call, call.Tool+": the agent is stopping"))
		return
	}
	h, ok := handlers[call.Tool]
	if !ok || (isTaskTool(call.Tool) && !a.opts.Config.Terminal.EnableRunInBackground) {
		ctx.Respond(errorResult(call, fmt.Sprintf("unknown tool %q: this agent has %s", call.Tool, strings.Join(ToolNames(a.opts.Config), ", "))))
		return
	}
	h(a, ctx, call)
}

// errorResult answers a call the agent refuses itself (bad arguments, an
// unknown tool or terminal). An error repeats little of what it was given.
func errorResult(call *messages.ToolCall, text string) *messages.ToolResult {
	return messages.ErrorResult(call.CallId, call.Tool, safetext.Clip(text, maxErrorText))
}

// maxErrorText bounds the text of an error the agent gives.
const maxErrorText = 4096

// forward hands a call to the child that does the work; its answer comes
// back here and goes on to the caller.
func (a *Actor) forward(ctx actor.Context, call *messages.ToolCall, child *actor.PID, msg any) {
	a.inflight[call.CallId] = inflight{caller: ctx.Sender(), child: child, tool: call.Tool}
	ctx.Request(child, msg)
}

// fitResult makes sure a terminal or task result, text and data together,
// is within max bytes, whatever its tool put in it. The tools fit their
// own results; this is the guarantee behind them.
func fitResult(r *messages.ToolResult, max int) *messages.ToolResult {
	if len(r.Text)+len(r.Data) <= max {
		return r
	}
	out := &messages.ToolResult{CallId: r.CallId, Tool: r.Tool, IsError: r.IsError, Data: r.Data}
	note := fmt.Sprintf("\n[result cut to terminal.maxResultBytes (%d bytes)]", max)
	if len(out.Data) > max/2 {
		out.Data = nil
		note = fmt.Sprintf("\n[result cut to terminal.maxResultBytes (%d bytes); its data was too large to keep]", max)
	}
	out.Text = safetext.Head(r.Text, max-len(out.Data)-len(note)) + note
	return out
}

// failCalls answers with an error every call that child had.
func (a *Actor) failCalls(ctx actor.Context, child *actor.PID, why string) {
	for id, f := range a.inflight {
		if f.child.Equal(child) {
			delete(a.inflight, id)
			ctx.Send(f.caller, messages.ErrorResult(id, f.tool,
				fmt.Sprintf("%s: internal error: the actor that had this call was gone (%s); nothing of it can be reported", f.tool, why)))
		}
	}
}

// shellPID returns the agent's shell actor, spawning it on first use; the
// error is the host's limit on shells, reached.
func (a *Actor) shellPID(ctx actor.Context) (*actor.PID, error) {
	if a.shell == nil {
		hold, err := a.opts.Limits.Pool(limits.Shells).Take()
		if err != nil {
			return nil, err
		}
		a.shell = ctx.Spawn(shell.Props(shell.Options{
			Config:  a.opts.Config.Bash,
			Dir:     a.opts.Dir,
			Env:     a.opts.Env,
			Logger:  a.log,
			Reaper:  a.opts.Reaper,
			Gate:    a.opts.Gate,
			Sandbox: a.sandbox.Get,
		}, append(a.opts.propsOptions(a.log), limits.ReleaseOnStop(hold))...))
	}
	return a.shell, nil
}

// tasksPID returns the agent's task registry, spawning it on first use.
func (a *Actor) tasksPID(ctx actor.Context) *actor.PID {
	if a.tasks == nil {
		a.tasks = ctx.Spawn(tasks.Props(tasks.Options{
			Terminal:     a.opts.Config.Terminal,
			Logger:       a.log,
			PropsOptions: a.opts.propsOptions(a.log),
			Limits:       a.opts.Limits.Pool(limits.Tasks),
		}, a.opts.propsOptions(a.log)...))
		_ = a.strategy.SetPolicy(a.tasks, tasksPolicy)
	}
	return a.tasks
}

// crash makes the agent fail with reason. Only tests send it, to prove on a
// real actor system that a failure is logged with its stack, supervised, and
// contained.
type crash struct{ reason any }

// withdraw tells the child that has (or answered) a call that its caller
// is gone.
func (a *Actor) withdraw(ctx actor.Context, callID string, child *actor.PID) {
	switch {
	case child.Equal(a.shell):
		ctx.Send(child, &shell.Cancel{CallID: callID})
	case child.Equal(a.tasks):
		ctx.Send(child, &tasks.Cancel{CallID: callID})
	default:
		ctx.Send(child, &terminal.Cancel{CallID: callID})
	}
}
