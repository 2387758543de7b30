package terminal

import (
	"encoding/json"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/messages"
)

func (a *Actor) read(ctx actor.Context, m *Read) {
	if m.Args.Offset != nil {
		a.respondPage(ctx, m)
		return
	}
	if a.holder != nil && a.exit == nil {
		// What the program prints now is the holder's: a read that took it
		// too would return the same bytes twice.
		ctx.Respond(a.busyResult(m.CallID, ToolRead, a.readBusy()))
		return
	}
	w := &waiter{kind: waitRead, callID: m.CallID, sender: ctx.Sender(), args: m.Args, settle: m.Args.WaitMs == nil,
		onOutput: m.Args.WaitFor == WaitForOutput}
	wait := a.opts.Config.Wait(m.Args.WaitMs)
	if a.exit != nil || wait == 0 {
		a.answer(ctx, w, a.currentState())
		return
	}
	if w.onOutput && a.returnable() > a.readPos {
		// Output nobody has read is new output already.
		r := a.currentState()
		if r.Reason == ReadyRunning {
			r.Detail = "new output came before this read began; the program may still be working"
		}
		a.answer(ctx, w, r)
		return
	}
	a.addWaiter(ctx, w, wait)
}

// returnable is where the output a result can take now ends: a character
// whose rest has not arrived yet goes with the next result, whole, unless
// the program has exited and nothing more comes.
func (a *Actor) returnable() int64 {
	if a.exit != nil {
		return a.hist.end()
	}
	return a.hist.settled()
}

// coverage is for a result's last line, which says what of the history it
// shows.
func (a *Actor) coverage() *coverage {
	return &coverage{id: a.opts.ID, end: a.hist.end(), first: a.hist.first()}
}

// result builds a tool result with the structured fields a harness reads.
func (a *Actor) result(callID, tool string, p page, r Readiness, isError bool) *messages.ToolResult {
	data := map[string]any{
		"terminal_id":  a.opts.ID,
		"ready_reason": r.Reason,
		"running":      a.exit == nil,
	}
	if r.Exit != nil || a.exit != nil {
		st := r.Exit
		if st == nil {
			st = a.exit
		}
		data["exit_status"] = ExitData(*st)
	}
	ranged := p.raw != nil || p.asked > 0 || p.from > 0
	if ranged {
		// As long as the range can get: what is shown is known once the
		// text is fitted into what the data leaves.
		data["output_from"], data["output_to"] = a.hist.end(), a.hist.end()
	}
	b, _ := json.Marshal(data)
	// The cap is for text and data together.
	text, from, to := p.render(a.opts.Config.MaxResultBytes - len(b))
	if ranged {
		data["output_from"], data["output_to"] = from, to
		b, _ = json.Marshal(data)
	}
	return &messages.ToolResult{CallId: callID, Tool: tool, Text: text, IsError: isError, Data: b}
}

// ExitData is the structured form of an exit status in results' data:
// {"code": N} or {"signal": "SIGKILL"}.
func ExitData(st ptyproc.ExitStatus) map[string]any {
	if st.Signal != 0 {
		return map[string]any{"signal": ptyproc.SignalName(st.Signal)}
	}
	return map[string]any{"code": st.Code}
}

func (a *Actor) errorResult(callID, tool, text string) *messages.ToolResult {
	b, _ := json.Marshal(map[string]any{"terminal_id": a.opts.ID, "running": a.exit == nil && a.proc != nil})
	r := messages.ErrorResult(callID, tool, text)
	r.Data = b
	return r
}

// exitedResult answers a call on a terminal whose program has exited: its
// final unread output and status.
func (a *Actor) exitedResult(callID, tool string) *messages.ToolResult {
	end := a.hist.end()
	raw, from := a.hist.slice(a.readPos, end)
	p := page{raw: raw, from: from, asked: a.readPos,
		head:  a.lostNotes([]string{fmt.Sprintf("[terminal %s has exited (%s); nothing more can be sent to it. Close it with terminal_close]", a.opts.ID, a.exit)}),
		cover: a.coverage()}
	a.noteAnswer(callID, waitRead, p.asked, end)
	a.readPos = end
	return a.result(callID, tool, p, Readiness{Reason: ReadyExited, Detail: a.exit.String(), Exit: a.exit}, true)
}

func (a *Actor) respondPage(ctx actor.Context, m *Read) {
	from := *m.Args.Offset
	past := from > a.hist.end()
	to := a.returnable() // a character still being written is not shown in halves
	from = min(from, to)
	asked := from
	if first := a.hist.first(); from < first {
		// The start was dropped: the page begins with the first bytes
		// retained, and says where (see page.render).
		_, from = a.hist.slice(first, a.hist.end())
	}
	// A page starts and ends on character boundaries: an offset or a limit
	// inside a character takes it whole at the start and leaves it to the
	// next page at the end (unless it is all the page would hold).
	from = a.hist.charStart(from)
	if m.Args.Limit != nil && *m.Args.Limit < to-from { // no overflow: to-from is small
		to = from + *m.Args.Limit
		if cut := a.hist.charStart(to); cut > from {
			to = cut
		} else {
			to = a.hist.charEnd(from)
		}
	}
	raw, start := a.hist.slice(from, to)
	p := page{raw: raw, from: start, asked: min(asked, start), keepHead: true, cover: a.coverage()}
	if past {
		p.head = []string{fmt.Sprintf("[offset %d is past the end of the output (%d bytes so far)]", *m.Args.Offset, a.hist.end())}
	}
	ctx.Respond(a.result(m.CallID, ToolRead, p, a.currentState(), false))
}
