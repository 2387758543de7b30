package tasks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/terminal"
	"github.com/dsh-actors/dsh-actors/internal/safetext"
	"github.com/dsh-actors/dsh-actors/messages"
)

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

	offset  int64  // the terminal history offset of pending[0]
	pending []byte // output not yet returned
	// answered are the last task_output answers, taken back if their
	// callers turn out to have gone (see withdrawAnswered), and lost says
	// what could not be.
	answered []answeredOutput
	lost     terminal.LostOutput
	dropped  int64 // bytes of pending dropped to stay bounded
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
		ctx.Request(t.start.Terminal, &terminal.Reserve{TaskID: t.id, CallID: t.start.CallID, Input: t.start.Input, Subscriber: self})
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
	case *actor.Stopped:
		// Its actor stays reachable through any stale *actor.PID
		// (protoactor caches the process in the PID): it keeps no output.
		t.pending, t.answered, t.lost, t.waiters, t.killing = nil, nil, terminal.LostOutput{}, nil, nil
	case *actor.Restarting:
	case *terminal.Reserved:
		t.offset = m.Offset
		// The registry hears first, so a task_output sent right after the
		// answer finds the task.
		ctx.Send(t.registry, &status{id: t.id, running: !t.done, started: true, ready: t.ready})
		ctx.Send(t.caller, &messages.ToolResult{CallId: t.start.CallID, Tool: terminal.ToolSend, Data: m.Data, Text: m.Text})
	case *terminal.Busy:
		// The registry hears first, so the caller's next send finds the id
		// given back.
		ctx.Send(t.registry, &status{id: t.id})
		busy := errorResult(t.start.CallID, terminal.ToolSend, "terminal_send: "+m.Reason)
		busy.Data, _ = json.Marshal(map[string]any{"terminal_id": t.start.TerminalID, "busy": !m.Exited})
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
			t.offset += int64(over)
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
				note := fmt.Sprintf("[%s stopped after %s]", t.id, killSteps[k.step])
				if k.step >= len(killSignals) {
					note = fmt.Sprintf("[%s: SIGINT, SIGTERM and SIGKILL did not bring its terminal back to a proven state; the task let go of it]", t.id)
				}
				ctx.Send(k.sender, t.result(k.callID, ToolKill, note))
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
	notes := t.lost.Take()
	head, tail := notes.Notes(t.start.TerminalID), []string(nil)
	if note != "" {
		head = append(head, note)
	}
	if t.dropped > 0 {
		head = append(head, fmt.Sprintf("[%d earlier bytes of this task's output were dropped before they were collected; terminal_read on %s with offset %d pages them while its history holds them]", t.dropped, t.start.TerminalID, t.offset-t.dropped))
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
	text, left := fitTaskShown(head, t.pending, t.offset, t.start.TerminalID, tail, t.cfg.MaxResultBytes-len(b))
	t.offset += int64(len(t.pending))
	if len(t.answered) == answeredKept {
		t.answered = slices.Delete(t.answered, 0, 1)
	}
	if n := len(t.answered); n > 0 {
		// Only the latest answer's output can come again (see
		// withdrawAnswered): the older ones keep their range alone.
		t.answered[n-1].out = nil
	}
	// What a task remembers of output is bounded in bytes: the output the
	// latest answer showed (within maxResultBytes), not what it named for
	// paging, nor every answer's.
	shown := t.pending
	if left > 0 {
		shown = slices.Clone(t.pending[left:])
	}
	t.answered = append(t.answered, answeredOutput{callID: callID, from: t.offset - int64(len(t.pending)), n: int64(len(t.pending)), out: shown, notes: notes})
	t.pending, t.dropped = nil, 0
	return &messages.ToolResult{CallId: callID, Tool: tool, Text: text, Data: b}
}

// fitTask joins head, output and tail within max bytes, keeping the end of
// the output. from is the terminal history offset of out[0], where what
// is not shown can be paged.
func fitTask(head []string, out []byte, from int64, terminalID string, tail []string, limit int) string {
	text, _ := fitTaskShown(head, out, from, terminalID, tail, limit)
	return text
}

// fitTaskShown is fitTask, and also tells where in out the output shown
// starts.
func fitTaskShown(head []string, out []byte, from int64, terminalID string, tail []string, limit int) (string, int) {
	fixed := 0
	for _, l := range append(append([]string(nil), head...), tail...) {
		fixed += len(l) + 1
	}
	text := safetext.String(out)
	left := 0
	if room := limit - fixed - 160; len(text) > room {
		shown := safetext.TailFitting(out, max(room, 0))
		left = len(out) - len(shown)
		head = append(head, fmt.Sprintf("[%d earlier bytes of this output not shown: terminal_read on %s with offset %d pages them while its history holds them]", left, terminalID, from))
		text = safetext.String(shown)
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
	return safetext.Head(b.String(), limit), left
}

var killSteps = []string{"SIGINT", "SIGTERM", "SIGKILL", "giving up its reservation"}

var killSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL}

// answeredOutput is a task_output answer: the n bytes of output it carried,
// from the terminal history offset from; while the answer is the latest,
// out holds the last of them, those it showed (the first were named for
// paging).
type answeredOutput struct {
	callID string
	from   int64
	n      int64
	out    []byte
	notes  terminal.LostOutput // what of lost it named
}

// answeredKept is how many answers a task remembers: a caller withdraws at
// once when its context ends.
const answeredKept = 16

// withdrawAnswered handles the cancel of a task_output already answered:
// its caller had gone, so the output it carried reached nobody. The latest
// answer's output comes again; an older one's is named, with where to page
// it, in the next result.
func (t *task) withdrawAnswered(callID string) {
	i := slices.IndexFunc(t.answered, func(x answeredOutput) bool { return x.callID == callID })
	if i < 0 {
		return
	}
	l, latest := t.answered[i], i == len(t.answered)-1
	t.answered = slices.Delete(t.answered, i, i+1)
	t.lost.AddAll(l.notes) // they reached nobody either
	switch {
	case l.n == 0:
	case latest && t.dropped == 0 && l.out != nil:
		// What it showed comes again; what it named for paging is named
		// again.
		shownFrom := l.from + l.n - int64(len(l.out))
		t.lost.Add(l.from, shownFrom)
		t.offset = shownFrom
		t.pending = append(l.out, t.pending...)
	default:
		t.lost.Add(l.from, l.from+l.n)
	}
}

func (t *task) cancel(ctx actor.Context, callID string) {
	t.withdrawAnswered(callID)
	if k := t.killing; k != nil && k.callID == callID {
		// The kill goes on (its signals are sent), but nobody waits for
		// its answer: the output stays for the next task_output.
		k.callID, k.sender = "", nil
	}
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
	if callID == t.start.CallID {
		// The output nobody had read before the task, which the answer
		// carried, may have reached nobody: the terminal says so.
		ctx.Send(t.start.Terminal, &terminal.Cancel{CallID: callID})
	}
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
	t.event(ctx, &terminal.TaskEvent{TaskID: t.id, Done: true, Ready: terminal.Readiness{Reason: terminal.ReadyKilled, Detail: "the terminal was not proven ready after SIGINT, SIGTERM and SIGKILL: what its program is doing, and whether its line editor still holds part of the task's input, is not known; the task let go of the terminal"}})
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
