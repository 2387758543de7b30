package tasks

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/terminal"
	"github.com/dsh-actors/dsh-actors/internal/safetext"
	"github.com/dsh-actors/dsh-actors/internal/toolargs"
	"github.com/dsh-actors/dsh-actors/messages"
)

// Tool names.
const (
	ToolOutput = "task_output"
	ToolKill   = "task_kill"
	ToolList   = "task_list"
)

// OutputArgs are task_output's arguments.
type OutputArgs struct {
	TaskID string `json:"task_id" jsonschema:"the id terminal_send returned for a background send"`
	WaitMs *int64 `json:"wait_ms,omitempty" jsonschema:"wait up to this long for the task to finish or print something new"`
}

// KillArgs are task_kill's arguments.
type KillArgs struct {
	TaskID string `json:"task_id" jsonschema:"the id terminal_send returned for a background send"`
}

// Messages of the registry, from the agent. Each answers its sender with a
// *messages.ToolResult.
type (
	// Start reserves Terminal for a new task and types Input there; the
	// answer carries the task id, or says why it could not start.
	Start struct {
		CallID     string
		TerminalID string
		Terminal   *actor.PID
		Input      []byte
		// Text is what the model typed, for task_list.
		Text string
	}
	// Output returns the task's output not returned before.
	Output struct {
		CallID string
		Args   OutputArgs
		Wait   time.Duration
	}
	// Kill stops the task: SIGINT, then SIGTERM, then SIGKILL.
	Kill struct {
		CallID string
		TaskID string
	}
	// Cancel withdraws a call whose caller is gone: a waiting task_output
	// ends with no answer; a background send whose task id nobody may have
	// seen is stopped as task_kill would. Unknown ids are ignored.
	Cancel struct{ CallID string }
	// List lists the agent's tasks.
	List struct{ CallID string }
)

// status is what a task tells the registry when it changes.
type status struct {
	id      string
	running bool
	ready   terminal.Readiness
	started bool // the reservation was granted
}

// Options configure the registry.
type Options struct {
	Terminal terminal.Config
	Logger   *slog.Logger
	// PropsOptions are given to every task actor (dispatcher, middleware).
	PropsOptions []actor.PropsOption
}

// Props returns the props of a task registry.
func Props(opts Options, extra ...actor.PropsOption) *actor.Props {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// A task that fails is stopped, never restarted: a restart would type
	// its input again.
	extra = append([]actor.PropsOption{actor.WithSupervisor(stopTasks)}, extra...)
	return actor.PropsFromProducer(func() actor.Actor {
		return &Registry{opts: opts, tasks: map[string]*entry{}}
	}, extra...)
}

var stopTasks = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

// Registry owns an agent's background tasks, one child actor each.
type Registry struct {
	opts  Options
	next  int
	tasks map[string]*entry
}

type entry struct {
	pid      *actor.PID
	terminal string
	text     string
	since    time.Time
	running  bool
	started  bool
	ready    terminal.Readiness
}

// maxFinished is how many finished tasks are remembered (their final
// output can still be collected); older ones are forgotten.
const maxFinished = 256

// Receive handles the registry's messages.
func (r *Registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
	case *Start:
		r.start(ctx, m)
	case *Output:
		r.forward(ctx, m.CallID, ToolOutput, m.Args.TaskID, m)
	case *Kill:
		r.forward(ctx, m.CallID, ToolKill, m.TaskID, m)
	case *List:
		ctx.Respond(r.list(m.CallID))
	case *Cancel:
		for _, e := range r.tasks {
			ctx.Send(e.pid, m)
		}
	case *status:
		if !m.started && !m.running {
			// Never started: nothing to collect, and its id was never shown,
			// so the next task may take it. (Its Terminated may have come
			// first and removed the entry already.)
			delete(r.tasks, m.id)
			if m.id == "task-"+strconv.Itoa(r.next) {
				r.next--
			}
			break
		}
		if e, ok := r.tasks[m.id]; ok {
			e.running, e.ready, e.started = m.running, m.ready, m.started
			r.forgetOld(ctx)
		}
	case *actor.Terminated:
		for id, e := range r.tasks {
			if e.pid.Equal(m.Who) {
				delete(r.tasks, id)
			}
		}
	default:
		r.opts.Logger.Warn("tasks: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

func (r *Registry) start(ctx actor.Context, m *Start) {
	running := 0
	for _, e := range r.tasks {
		if e.running {
			running++
		}
	}
	if running >= r.opts.Terminal.MaxTasks {
		ctx.Respond(errorResult(m.CallID, terminal.ToolSend, fmt.Sprintf(
			"terminal_send: %d background tasks are already running, the limit (terminal.maxTasks); wait for one with task_output or stop one with task_kill", running)))
		return
	}
	r.next++
	id := "task-" + strconv.Itoa(r.next)
	// Taken now: a producer runs again on a restart, when ctx is another
	// message's (tasks are not restarted, but the producer must not depend
	// on that).
	caller, self := ctx.Sender(), ctx.Self()
	pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &task{id: id, start: m, caller: caller, cfg: r.opts.Terminal, registry: self}
	}, r.opts.PropsOptions...))
	r.tasks[id] = &entry{pid: pid, terminal: m.TerminalID, text: m.Text, since: time.Now(), running: true}
}

func (r *Registry) forward(ctx actor.Context, callID, tool, id string, msg any) {
	e, ok := r.tasks[id]
	if !ok || !e.started {
		ctx.Respond(errorResult(callID, tool, fmt.Sprintf("%s: no such task %q", tool, id)))
		return
	}
	ctx.RequestWithCustomSender(e.pid, msg, ctx.Sender())
}

// forgetOld stops the oldest finished tasks past maxFinished.
func (r *Registry) forgetOld(ctx actor.Context) {
	var done []string
	for id, e := range r.tasks {
		if !e.running {
			done = append(done, id)
		}
	}
	if len(done) <= maxFinished {
		return
	}
	sort.Slice(done, func(i, j int) bool { return r.tasks[done[i]].since.Before(r.tasks[done[j]].since) })
	for _, id := range done[:len(done)-maxFinished] {
		ctx.Stop(r.tasks[id].pid)
		delete(r.tasks, id)
	}
}

func (r *Registry) list(callID string) *messages.ToolResult {
	ids := make([]string, 0, len(r.tasks))
	for id, e := range r.tasks {
		if e.started {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return r.tasks[ids[i]].since.Before(r.tasks[ids[j]].since) })
	var b strings.Builder
	type item struct {
		TaskID     string               `json:"task_id"`
		TerminalID string               `json:"terminal_id"`
		Running    bool                 `json:"running"`
		Reason     terminal.ReadyReason `json:"ready_reason,omitempty"`
		Text       string               `json:"text"`
	}
	items := []item{}
	if len(ids) == 0 {
		b.WriteString("[no background tasks]")
	}
	for _, id := range ids {
		e := r.tasks[id]
		state := "running"
		if !e.running {
			state = "finished: " + string(e.ready.Reason)
			if e.ready.Detail != "" {
				state += " (" + e.ready.Detail + ")"
			}
		}
		fmt.Fprintf(&b, "%s on %s, %s, started %s ago: %q\n", id, e.terminal, state, time.Since(e.since).Round(time.Millisecond), preview(e.text))
		items = append(items, item{TaskID: id, TerminalID: e.terminal, Running: e.running, Reason: e.ready.Reason, Text: safetext.Clip(e.text, 200)})
	}
	data, _ := json.Marshal(map[string]any{"tasks": items})
	return &messages.ToolResult{CallId: callID, Tool: ToolList, Text: strings.TrimSuffix(b.String(), "\n"), Data: data}
}

func preview(s string) string { return safetext.Head(s, 80) }

var errorResult = messages.ErrorResult

// task is one background send: it holds the terminal's reservation until
// the program is ready again, and keeps the output the model has not
// collected.
type task struct {
	id       string
	start    *Start
	caller   *actor.PID
	cfg      terminal.Config
	registry *actor.PID
	send     func(any)

	offset   int64
	pending  []byte // output not yet returned
	dropped  int64  // bytes of pending dropped to stay bounded
	done     bool
	ready    terminal.Readiness
	waiters  []*outputWaiter
	killing  *killState
	finished time.Time
}

type outputWaiter struct {
	callID string
	sender *actor.PID
	timer  *time.Timer
	// settle is armed when output arrives: the answer goes out once the
	// output pauses briefly, not on its first byte.
	settle *time.Timer
}

type killState struct {
	callID string
	sender *actor.PID
	step   int
	timer  *time.Timer
}

type (
	waitTick   struct{ w *outputWaiter }
	settleTick struct{ w *outputWaiter }
	killTick   struct {
		k    *killState
		step int
	}
)

// settle is how long output must pause before a waiting task_output answers.
const settle = 50 * time.Millisecond

func (t *task) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		root, self := ctx.ActorSystem().Root, ctx.Self()
		t.send = func(msg any) { root.Send(self, msg) }
		ctx.Request(t.start.Terminal, &terminal.Reserve{TaskID: t.id, Input: t.start.Input, Subscriber: self})
	case *actor.Stopping:
		t.stopTimers()
		for _, w := range t.waiters {
			ctx.Send(w.sender, errorResult(w.callID, ToolOutput, "task_output: the task's agent is stopping"))
		}
		if t.killing != nil && t.killing.sender != nil {
			ctx.Send(t.killing.sender, errorResult(t.killing.callID, ToolKill, "task_kill: the task's agent is stopping"))
		}
		if !t.done {
			ctx.Send(t.start.Terminal, &terminal.Release{TaskID: t.id})
		}
	case *actor.Stopped, *actor.Restarting:
	case *terminal.Reserved:
		t.offset = m.Offset
		// The registry hears first, so a task_output sent right after the
		// answer finds the task.
		ctx.Send(t.registry, &status{id: t.id, running: !t.done, started: true, ready: t.ready})
		data, _ := json.Marshal(map[string]any{"task_id": t.id, "terminal_id": t.start.TerminalID, "running": true})
		ctx.Send(t.caller, &messages.ToolResult{CallId: t.start.CallID, Tool: terminal.ToolSend, Data: data,
			Text: fmt.Sprintf("[started in the background as %s on terminal %s; collect its output with task_output, stop it with task_kill]", t.id, t.start.TerminalID)})
	case *terminal.Busy:
		// The registry hears first, so the caller's next send finds the id
		// given back.
		ctx.Send(t.registry, &status{id: t.id})
		busy := errorResult(t.start.CallID, terminal.ToolSend, "terminal_send: "+m.Reason)
		busy.Data, _ = json.Marshal(map[string]any{"terminal_id": t.start.TerminalID, "busy": true})
		ctx.Send(t.caller, busy)
		ctx.Stop(ctx.Self())
	case *actor.DeadLetterResponse:
		ctx.Send(t.caller, errorResult(t.start.CallID, terminal.ToolSend, "terminal_send: the terminal is gone"))
		ctx.Send(t.registry, &status{id: t.id})
		ctx.Stop(ctx.Self())
	case *terminal.TaskEvent:
		t.event(ctx, m)
	case *Output:
		t.output(ctx, m)
	case *Kill:
		t.kill(ctx, m)
	case *Cancel:
		t.cancel(ctx, m.CallID)
	case *waitTick:
		t.answerWaiter(ctx, m.w)
	case *settleTick:
		t.answerWaiter(ctx, m.w)
	case *killTick:
		t.killStep(ctx, m)
	}
}

func (t *task) event(ctx actor.Context, m *terminal.TaskEvent) {
	if len(m.Output) > 0 {
		t.pending = append(t.pending, m.Output...)
		// Keep the latest output within a bound; say how much was dropped.
		if over := len(t.pending) - 4*t.cfg.MaxResultBytes; over > 0 {
			t.dropped += int64(over)
			t.pending = append(t.pending[:0], t.pending[over:]...)
		}
		for _, w := range t.waiters {
			if w.settle == nil {
				w.settle = afterFunc(settle, t.send, &settleTick{w})
			} else {
				w.settle.Reset(settle)
			}
		}
	}
	if m.Done && !t.done {
		t.done, t.ready, t.finished = true, m.Ready, time.Now()
		ctx.Send(t.registry, &status{id: t.id, ready: m.Ready, started: true})
		for len(t.waiters) > 0 {
			t.answerWaiter(ctx, t.waiters[0])
		}
		if k := t.killing; k != nil {
			t.killing = nil
			if k.timer != nil {
				k.timer.Stop()
			}
			if k.sender != nil {
				ctx.Send(k.sender, t.result(k.callID, ToolKill, fmt.Sprintf("[%s stopped after %s]", t.id, killSteps[k.step])))
			}
		}
	}
}

func afterFunc(d time.Duration, send func(any), msg any) *time.Timer {
	return time.AfterFunc(d, func() { send(msg) })
}

func (t *task) output(ctx actor.Context, m *Output) {
	w := &outputWaiter{callID: m.CallID, sender: ctx.Sender()}
	if t.done || len(t.pending) > 0 || t.dropped > 0 || m.Wait <= 0 {
		ctx.Respond(t.result(m.CallID, ToolOutput, ""))
		return
	}
	w.timer = afterFunc(m.Wait, t.send, &waitTick{w})
	t.waiters = append(t.waiters, w)
}

func (t *task) answerWaiter(ctx actor.Context, w *outputWaiter) {
	for i, x := range t.waiters {
		if x == w {
			t.waiters = append(t.waiters[:i], t.waiters[i+1:]...)
			if w.timer != nil {
				w.timer.Stop()
			}
			if w.settle != nil {
				w.settle.Stop()
			}
			ctx.Send(w.sender, t.result(w.callID, ToolOutput, ""))
			return
		}
	}
}

// result returns the pending output and the task's state, and marks the
// output as returned.
func (t *task) result(callID, tool, note string) *messages.ToolResult {
	var head, tail []string
	if note != "" {
		head = append(head, note)
	}
	if t.dropped > 0 {
		head = append(head, fmt.Sprintf("[%d earlier bytes of this task's output were dropped before they were collected]", t.dropped))
	}
	data := map[string]any{"task_id": t.id, "terminal_id": t.start.TerminalID, "running": !t.done}
	if t.done {
		line := "[" + t.id + " finished: " + string(t.ready.Reason)
		if t.ready.Detail != "" {
			line += " — " + t.ready.Detail
		}
		tail = append(tail, line+"]")
		data["ready_reason"] = t.ready.Reason
		if t.ready.Exit != nil {
			data["exit_status"] = terminal.ExitData(*t.ready.Exit)
		}
	} else {
		tail = append(tail, fmt.Sprintf("[%s is still running on terminal %s; call task_output again later]", t.id, t.start.TerminalID))
	}
	b, _ := json.Marshal(data)
	// The cap is for text and data together.
	text := fitTask(head, t.pending, tail, t.cfg.MaxResultBytes-len(b))
	t.pending, t.dropped = nil, 0
	return &messages.ToolResult{CallId: callID, Tool: tool, Text: text, Data: b}
}

// fitTask joins head, output and tail within max bytes, keeping the end of
// the output.
func fitTask(head []string, out []byte, tail []string, limit int) string {
	fixed := 0
	for _, l := range append(append([]string(nil), head...), tail...) {
		fixed += len(l) + 1
	}
	text := safetext.String(out)
	if room := limit - fixed - 100; len(text) > room {
		cut := safetext.Tail(text, max(room, 0))
		head = append(head, fmt.Sprintf("[%d earlier bytes of this output not shown]", len(text)-len(cut)))
		text = cut
	}
	var b strings.Builder
	for _, l := range head {
		b.WriteString(l + "\n")
	}
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(strings.Join(tail, "\n"))
	return safetext.Head(b.String(), limit)
}

var killSteps = []string{"SIGINT", "SIGTERM", "SIGKILL", "giving up its reservation"}
var killSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL}

func (t *task) cancel(ctx actor.Context, callID string) {
	kept := t.waiters[:0]
	for _, w := range t.waiters {
		if w.callID != callID {
			kept = append(kept, w)
			continue
		}
		if w.timer != nil {
			w.timer.Stop()
		}
		if w.settle != nil {
			w.settle.Stop()
		}
	}
	t.waiters = kept
	if callID == t.start.CallID && !t.done && t.killing == nil {
		// The send that started this task was withdrawn: its caller may
		// never have seen the task id, so nobody could stop it.
		t.killing = &killState{}
		t.killStep(ctx, &killTick{k: t.killing, step: 0})
	}
}

func (t *task) kill(ctx actor.Context, m *Kill) {
	if t.done {
		ctx.Respond(t.result(m.CallID, ToolKill, fmt.Sprintf("[%s had already finished]", t.id)))
		return
	}
	if t.killing != nil {
		ctx.Respond(errorResult(m.CallID, ToolKill, fmt.Sprintf("task_kill: %s is already being stopped (%s sent)", t.id, killSteps[t.killing.step])))
		return
	}
	t.killing = &killState{callID: m.CallID, sender: ctx.Sender()}
	t.killStep(ctx, &killTick{k: t.killing, step: 0})
}

// killStep sends the step's signal and arms the next step.
func (t *task) killStep(ctx actor.Context, m *killTick) {
	k := t.killing
	if k == nil || k != m.k || t.done {
		return
	}
	k.step = m.step
	if m.step < len(killSignals) {
		ctx.Send(t.start.Terminal, &terminal.Interrupt{TaskID: t.id, Sig: killSignals[m.step]})
		k.timer = afterFunc(time.Duration(t.cfg.KillGraceMs)*time.Millisecond, t.send, &killTick{k: k, step: m.step + 1})
		return
	}
	// Even SIGKILL did not bring the terminal back to ready (a program that
	// is gone but whose shell does not prompt): let go of the terminal.
	ctx.Send(t.start.Terminal, &terminal.Release{TaskID: t.id})
	t.event(ctx, &terminal.TaskEvent{TaskID: t.id, Done: true, Ready: terminal.Readiness{Reason: terminal.ReadyKilled, Detail: "the terminal did not become ready after SIGKILL; its reservation was released"}})
}

func (t *task) stopTimers() {
	for _, w := range t.waiters {
		if w.timer != nil {
			w.timer.Stop()
		}
		if w.settle != nil {
			w.settle.Stop()
		}
	}
	if t.killing != nil && t.killing.timer != nil {
		t.killing.timer.Stop()
	}
}

// Specs returns the task tools as the model sees them; none when background
// sends are turned off.
func Specs(cfg terminal.Config) []toolargs.Spec {
	if !cfg.EnableRunInBackground {
		return nil
	}
	return []toolargs.Spec{
		{Name: ToolOutput, Schema: toolargs.Schema[OutputArgs](),
			Description: "Collect a background task's output that you have not seen yet, and whether it has finished; " +
				"wait_ms waits for it to finish or to print something new."},
		{Name: ToolKill, Schema: toolargs.Schema[KillArgs](),
			Description: "Stop a background task: SIGINT to its terminal's foreground program, then SIGTERM and SIGKILL if it does not stop. " +
				"Frees the terminal."},
		{Name: ToolList, Schema: toolargs.Schema[terminal.NoArgs](),
			Description: "List your background tasks with their terminals and state."},
	}
}
