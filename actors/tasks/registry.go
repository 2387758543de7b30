package tasks

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/terminal"
	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/internal/safetext"
	"github.com/dsh-actors/dsh-actors/messages"
)

var stopTasks = actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })

// Registry owns an agent's background tasks, one child actor each.
type Registry struct {
	opts  Options
	next  int
	tasks map[string]*entry
	// stopping: protoactor still delivers messages to a stopping actor,
	// and a task spawned then would never be stopped, nor the registry.
	stopping bool
}

type entry struct {
	pid      *actor.PID
	terminal string
	text     string
	since    time.Time
	running  bool
	started  bool
	ready    terminal.Readiness
	// hold counts the task against the host's limit while it runs.
	hold *limits.Hold
}

// maxFinished is how many finished tasks are remembered (their final
// output can still be collected); older ones are forgotten.
const maxFinished = 256

// Receive handles the registry's messages.
func (r *Registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started, *actor.Stopped:
	case *actor.Stopping, *actor.Restarting:
		r.stopping = true
	case *Start:
		if r.stopping {
			ctx.Respond(errorResult(m.CallID, terminal.ToolSend, "terminal_send: the agent is stopping"))
			return
		}
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
			if !e.running {
				e.hold.Release() // finished: its output may still be read
			}
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
	hold, err := r.opts.Limits.Take()
	if err != nil {
		ctx.Respond(errorResult(m.CallID, terminal.ToolSend, "terminal_send: "+err.Error()))
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
	}, append(r.opts.PropsOptions, limits.ReleaseOnStop(hold))...))
	r.tasks[id] = &entry{pid: pid, terminal: m.TerminalID, text: m.Text, since: time.Now(), running: true, hold: hold}
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
