package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/actors/tasks"
	"github.com/dsh-actors/dsh-actors/actors/terminal"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/internal/toolargs"
	"github.com/dsh-actors/dsh-actors/messages"
)

// handler carries out one tool call. It answers bad arguments itself and
// hands the rest to the child that owns the work (see Actor.forward).
type handler func(a *Actor, ctx actor.Context, call *messages.ToolCall)

var handlers = map[string]handler{
	shell.ToolName:    bashTool,
	terminal.ToolOpen: openTool,
	terminal.ToolSend: sendTool,
	terminal.ToolRead: forTerminal(func(c *messages.ToolCall, a *terminal.ReadArgs) (string, any) {
		return a.TerminalID, &terminal.Read{CallID: c.CallId, Args: *a}
	}),
	terminal.ToolSignal: forTerminal(signalMessage),
	terminal.ToolResize: forTerminal(func(c *messages.ToolCall, a *terminal.ResizeArgs) (string, any) {
		return a.TerminalID, &terminal.Resize{CallID: c.CallId, Cols: a.Cols, Rows: a.Rows}
	}),
	terminal.ToolClose: forTerminal(func(c *messages.ToolCall, a *terminal.IDArgs) (string, any) {
		return a.TerminalID, &terminal.Close{CallID: c.CallId}
	}),
	terminal.ToolList: listTool,
	tasks.ToolOutput:  taskOutputTool,
	tasks.ToolKill:    taskKillTool,
	tasks.ToolList:    taskListTool,
}

func isTaskTool(name string) bool { return strings.HasPrefix(name, "task_") }

// Tools returns the tools an agent offers under cfg, as the model sees them.
func Tools(cfg config.Config) []toolargs.Spec {
	out := []toolargs.Spec{shell.Spec(cfg.Bash)}
	out = append(out, terminal.Specs(cfg.Terminal)...)
	return append(out, tasks.Specs(cfg.Terminal)...)
}

// ToolNames lists the names of Tools(cfg).
func ToolNames(cfg config.Config) []string {
	var names []string
	for _, t := range Tools(cfg) {
		names = append(names, t.Name)
	}
	return names
}

func bashTool(a *Actor, ctx actor.Context, call *messages.ToolCall) {
	args, err := shell.ParseArgs(call.Arguments)
	if err != nil {
		ctx.Respond(errorResult(call, err.Error()))
		return
	}
	pid, err := a.shellPID(ctx)
	if err != nil {
		ctx.Respond(errorResult(call, "bash: "+err.Error()))
		return
	}
	a.forward(ctx, call, pid, &shell.Run{CallID: call.CallId, Args: args})
}

func openTool(a *Actor, ctx actor.Context, call *messages.ToolCall) {
	cfg := a.opts.Config.Terminal
	var args terminal.OpenArgs
	if err := terminal.Parse(call.Tool, call.Arguments, &args, cfg); err != nil {
		ctx.Respond(errorResult(call, err.Error()))
		return
	}
	if len(a.terminals) >= cfg.MaxTerminals {
		ctx.Respond(errorResult(call, fmt.Sprintf("terminal_open: %d terminals are open, the limit (terminal.maxTerminals); close those you no longer need, exited ones too (terminal_list shows them)", len(a.terminals))))
		return
	}
	hold, err := a.opts.Limits.Pool(limits.Terminals).Take()
	if err != nil {
		ctx.Respond(errorResult(call, "terminal_open: "+err.Error()))
		return
	}
	a.lastTerminal++
	id := "t" + strconv.Itoa(a.lastTerminal)
	pid := ctx.Spawn(terminal.Props(terminal.Options{
		ID: id, Args: args, Config: cfg, Env: a.opts.Env, Dir: a.opts.Dir, Logger: a.log, Reaper: a.opts.Reaper,
		Sandbox: a.sandbox.Get,
	}, append(a.opts.propsOptions(a.log), limits.ReleaseOnStop(hold))...))
	_ = a.strategy.SetPolicy(pid, terminalPolicy)
	a.terminals[id] = pid
	a.terminalIDs[pid.Id] = id
	a.terminalHolds[pid.Id] = hold
	a.forward(ctx, call, pid, &terminal.Open{CallID: call.CallId})
}

// lookup finds one of the agent's terminals; a foreign id and an id that
// never existed get the same answer.
func (a *Actor) lookup(ctx actor.Context, call *messages.ToolCall, id string) *actor.PID {
	pid, ok := a.terminals[id]
	if !ok {
		text := fmt.Sprintf("%s: no such terminal %q (terminal_list shows yours)", call.Tool, id)
		if a.lost.text != "" {
			text += "; " + a.lost.text
		}
		ctx.Respond(errorResult(call, text))
	}
	return pid
}

func sendTool(a *Actor, ctx actor.Context, call *messages.ToolCall) {
	cfg := a.opts.Config.Terminal
	var args terminal.SendArgs
	if err := terminal.Parse(call.Tool, call.Arguments, &args, cfg); err != nil {
		ctx.Respond(errorResult(call, err.Error()))
		return
	}
	pid := a.lookup(ctx, call, args.TerminalID)
	if pid == nil {
		return
	}
	keys, _ := terminal.EncodeKeys(args.Keys) // checked by Parse
	input := append([]byte(args.Text), keys...)
	if args.RunInBackground {
		a.forward(ctx, call, a.tasksPID(ctx), &tasks.Start{
			CallID: call.CallId, TerminalID: args.TerminalID, Terminal: pid, Input: input, Text: typed(args),
		})
		return
	}
	a.forward(ctx, call, pid, &terminal.Send{CallID: call.CallId, Input: input, Wait: cfg.Wait(args.WaitMs), Settle: args.WaitMs == nil})
}

func signalMessage(c *messages.ToolCall, a *terminal.SignalArgs) (string, any) {
	sig, _ := terminal.ParseSignal(a.Signal) // checked by Parse
	return a.TerminalID, &terminal.Signal{CallID: c.CallId, Sig: sig}
}

// forTerminal makes a handler that parses T and forwards the message build
// returns to the terminal it names.
func forTerminal[T any](build func(*messages.ToolCall, *T) (string, any)) handler {
	return func(a *Actor, ctx actor.Context, call *messages.ToolCall) {
		var args T
		if err := terminal.Parse(call.Tool, call.Arguments, &args, a.opts.Config.Terminal); err != nil {
			ctx.Respond(errorResult(call, err.Error()))
			return
		}
		id, msg := build(call, &args)
		if pid := a.lookup(ctx, call, id); pid != nil {
			a.forward(ctx, call, pid, msg)
		}
	}
}

// listTool asks every terminal at once to describe itself; the answers
// come back to the agent (see listing), which answers the call when the
// last has come, or when listWait has passed.
func listTool(a *Actor, ctx actor.Context, call *messages.ToolCall) {
	var args terminal.NoArgs
	if err := terminal.Parse(call.Tool, call.Arguments, &args, a.opts.Config.Terminal); err != nil {
		ctx.Respond(errorResult(call, err.Error()))
		return
	}
	l := &listing{call: call, caller: ctx.Sender(), infos: map[string]*terminal.Info{}, ids: map[string]string{}}
	for id, pid := range a.terminals {
		l.ids[id] = pid.Id
		ctx.Request(pid, &terminal.Describe{Tag: call.CallId})
	}
	a.lists[call.CallId] = l
	if len(l.ids) == 0 {
		a.answerList(ctx, l)
		return
	}
	send, self := ctx.ActorSystem().Root, ctx.Self()
	l.timer = time.AfterFunc(listWait, func() { send.Send(self, &listDue{call.CallId}) })
}

// listWait bounds how long terminal_list waits for a terminal that does
// not answer (one that is closing).
const listWait = 2 * time.Second

// listing is a terminal_list under way: the answers so far.
type listing struct {
	call   *messages.ToolCall
	caller *actor.PID
	ids    map[string]string // terminal id -> its actor's PID id, asked
	infos  map[string]*terminal.Info
	timer  *time.Timer
}

// listDue ends a listing that is still waiting.
type listDue struct{ callID string }

// listed takes one terminal's answer.
func (a *Actor) listed(ctx actor.Context, in *terminal.Info) {
	l, ok := a.lists[in.Tag]
	if !ok {
		return
	}
	l.infos[in.ID] = in
	if l.complete() {
		a.answerList(ctx, l)
	}
}

// complete reports whether every terminal still asked has answered. (A
// count would not do: a terminal that answered and then closed is no
// longer asked, and its answer would stand in for another's.)
func (l *listing) complete() bool {
	for id := range l.ids {
		if l.infos[id] == nil {
			return false
		}
	}
	return true
}

// answerList answers a terminal_list with what came, in terminal order.
func (a *Actor) answerList(ctx actor.Context, l *listing) {
	delete(a.lists, l.call.CallId)
	if l.timer != nil {
		l.timer.Stop()
	}
	ids := make([]string, 0, len(l.infos))
	for id := range l.infos {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return terminalNumber(ids[i]) < terminalNumber(ids[j]) })
	var lines []string
	infos := []map[string]any{}
	for _, id := range ids {
		in := l.infos[id]
		lines = append(lines, describe(id, in))
		item := map[string]any{"terminal_id": in.ID, "command": in.Command, "running": in.Running,
			"foreground": in.Foreground, "last_ready": in.LastReady, "reserved_by": in.Holder}
		if in.ExitStatus != nil {
			item["exit_status"] = in.ExitStatus.String()
		}
		infos = append(infos, item)
	}
	text := "[no terminals open]"
	if len(lines) > 0 {
		text = strings.Join(lines, "\n")
	}
	if missing := len(l.ids) - len(l.infos); missing > 0 {
		text += fmt.Sprintf("\n[%d terminal(s) did not answer within %v (closing)]", missing, listWait)
	}
	data, _ := json.Marshal(map[string]any{"terminals": infos})
	ctx.Send(l.caller, fitResult(&messages.ToolResult{CallId: l.call.CallId, Tool: l.call.Tool, Text: text, Data: data}, a.opts.Config.Terminal.MaxResultBytes))
}

func terminalNumber(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "t"))
	return n
}

func describe(id string, in *terminal.Info) string {
	state := "running, foreground: " + in.Foreground
	if !in.Running {
		state = "exited"
		if in.ExitStatus != nil {
			state += " (" + in.ExitStatus.String() + ")"
		}
	}
	s := fmt.Sprintf("%s: %s — %s", id, in.Command, state)
	if in.LastReady != "" {
		s += "; last ready: " + string(in.LastReady)
	}
	if in.Holder != "" {
		s += fmt.Sprintf("; reserved by %s since %s", in.Holder, in.HolderSince.Format("15:04:05.000"))
	}
	return s
}

func taskOutputTool(a *Actor, ctx actor.Context, call *messages.ToolCall) {
	var args tasks.OutputArgs
	if err := toolargs.Decode(call.Tool, call.Arguments, &args, false, `{"task_id": "task-1"}`); err != nil {
		ctx.Respond(errorResult(call, err.Error()))
		return
	}
	if args.TaskID == "" {
		ctx.Respond(errorResult(call, call.Tool+`: "task_id" is missing: give the id a background terminal_send returned (task_list shows them)`))
		return
	}
	cfg := a.opts.Config.Terminal
	if args.WaitMs != nil && (*args.WaitMs < 0 || *args.WaitMs > cfg.MaxWaitMs) {
		ctx.Respond(errorResult(call, fmt.Sprintf(`task_output: "wait_ms" is %d: it must be between 0 and %d`, *args.WaitMs, cfg.MaxWaitMs)))
		return
	}
	wait := time.Duration(0)
	if args.WaitMs != nil {
		wait = time.Duration(*args.WaitMs) * time.Millisecond
	}
	a.forward(ctx, call, a.tasksPID(ctx), &tasks.Output{CallID: call.CallId, Args: args, Wait: wait})
}

func taskKillTool(a *Actor, ctx actor.Context, call *messages.ToolCall) {
	var args tasks.KillArgs
	if err := toolargs.Decode(call.Tool, call.Arguments, &args, false, `{"task_id": "task-1"}`); err != nil {
		ctx.Respond(errorResult(call, err.Error()))
		return
	}
	if args.TaskID == "" {
		ctx.Respond(errorResult(call, call.Tool+`: "task_id" is missing: give the id a background terminal_send returned (task_list shows them)`))
		return
	}
	a.forward(ctx, call, a.tasksPID(ctx), &tasks.Kill{CallID: call.CallId, TaskID: args.TaskID})
}

func taskListTool(a *Actor, ctx actor.Context, call *messages.ToolCall) {
	var args terminal.NoArgs
	if err := toolargs.Decode(call.Tool, call.Arguments, &args, true, "{}"); err != nil {
		ctx.Respond(errorResult(call, err.Error()))
		return
	}
	a.forward(ctx, call, a.tasksPID(ctx), &tasks.List{CallID: call.CallId})
}

// typed shows what a send typed, keys as <Name>, for task_list.
func typed(a terminal.SendArgs) string {
	s := a.Text
	for _, k := range a.Keys {
		s += "<" + k + ">"
	}
	return s
}

// AllToolNames lists every tool an agent can have, whatever the
// configuration turns off, sorted.
func AllToolNames() []string {
	names := make([]string, 0, len(handlers))
	for n := range handlers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
