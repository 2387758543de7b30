package terminal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/messages"
)

// heldSignal is the SIGINT of a cancelled terminal_send, held back until
// the terminal's program has taken the text the send typed (task_kill has a
// protocol of its own: taskKill): no input pending, and the program
// either back reading the terminal or no longer in the foreground. (A shell without job control keeps the
// foreground while its command runs: there the bound decides.) A line editor keeps typed-ahead bytes of its
// own that no signal clears, so a SIGINT that lands while it works through
// them cuts the line and runs the rest ("s^C" then "leep 30": command not
// found). A command the shell forked is signalled once it has executed
// its program. Held at most heldSignalMax.
type heldSignal struct {
	taskID string // the send's call id
	until  time.Time
	timer  *time.Timer
	// send is always set: the SIGINT goes only while nobody holds the
	// terminal.
	send bool
}

// heldRetry asks again whether the typed text was taken.
type heldRetry struct{ h *heldSignal }

const heldSignalMax = 250 * time.Millisecond

// holder holds the send reservation.
type holder struct {
	id         string // call id or task id
	task       bool
	since      time.Time
	subscriber *actor.PID
	sent       int64 // history offset up to which the task has its output
	// feed is a task's input not typed yet (see taskFeed).
	feed *taskFeed
}

// busy describes who holds the reservation.
func (a *Actor) busy() string {
	h := a.holder
	age := time.Since(h.since).Round(time.Millisecond)
	if h.task {
		return fmt.Sprintf("terminal %s is busy: background task %s has been running on it since %s (%v ago); collect it with task_output or stop it with task_kill",
			a.opts.ID, h.id, h.since.Format("15:04:05.000"), age)
	}
	return fmt.Sprintf("terminal %s is busy: another terminal_send has been sending to it since %s (%v ago) and waits for the program; its keystrokes are not mixed with yours, so wait for it to return",
		a.opts.ID, h.since.Format("15:04:05.000"), age)
}

// readBusy says why an unread read is refused while the reservation is held.
func (a *Actor) readBusy() string {
	if h := a.holder; h.task {
		return fmt.Sprintf("terminal %s is held by background task %s, and what it prints is the task's: read it with task_output (terminal_read with offset pages the history without taking anything)", a.opts.ID, h.id)
	}
	return fmt.Sprintf("terminal %s is held by a terminal_send that waits for the program, and its result will carry what the program prints (terminal_read with offset pages the history without taking anything)", a.opts.ID)
}

// busyResult refuses a call because the reservation is held.
func (a *Actor) busyResult(callID, tool, text string) *messages.ToolResult {
	busy := a.errorResult(callID, tool, text)
	busy.Data, _ = json.Marshal(map[string]any{"terminal_id": a.opts.ID, "running": true, "busy": true})
	return busy
}

// yieldReads answers the reads waiting for output before a send or a task
// takes the terminal: what came before the hold is theirs, what comes after
// is the holder's.
func (a *Actor) yieldReads(ctx actor.Context) {
	var reads []*waiter
	a.dropWaiters(func(w *waiter) bool {
		if w.kind == waitRead {
			reads = append(reads, w)
			return true
		}
		return false
	})
	for _, w := range reads {
		a.answer(ctx, w, Readiness{Reason: ReadyRunning, Detail: "a send took the terminal; its result carries what follows"})
	}
}

// withdrawAnswered handles the cancel of a call already answered: its
// caller had gone when the answer came, so the output it carried reached
// nobody. It comes again in the next result when it was the latest answer
// and nothing was taken since; otherwise the next result says where to page
// it. An open nobody saw is to be closed (the answer is true).
func (a *Actor) withdrawAnswered(callID string) (opening bool) {
	i := slices.IndexFunc(a.answered, func(x answered) bool { return x.callID == callID })
	if i < 0 {
		return false
	}
	l, latest := a.answered[i], i == len(a.answered)-1
	a.answered = slices.Delete(a.answered, i, i+1)
	a.lost.AddAll(l.notes) // they reached nobody either
	switch {
	case l.kind == waitOpen:
		return true
	case l.to <= l.from:
	case latest && a.holder == nil && a.readPos == l.to:
		a.readPos = l.from
	default:
		a.lost.Add(l.from, l.to)
	}
	return false
}

// answeredKept is how many answers a terminal remembers (see
// withdrawAnswered): a caller withdraws at once when its context ends.
const answeredKept = 64

// noteAnswer remembers an answer that took the unread output from to.
func (a *Actor) noteAnswer(callID string, kind waiterKind, from, to int64) {
	if len(a.answered) == answeredKept {
		a.answered = slices.Delete(a.answered, 0, 1)
	}
	a.answered = append(a.answered, answered{callID: callID, kind: kind, from: from, to: to, notes: a.carried.Take()})
}

// lostNotes are the notices of withdrawAnswered, and of sends cancelled
// while they waited, for the next result.
func (a *Actor) lostNotes(head []string) []string {
	a.carried = a.lost.Take()
	notes := append(a.carried.Notes(a.opts.ID), a.interrupted...)
	a.interrupted = nil
	return append(notes, head...)
}

// interruptCancelledSend: the caller of a terminal_send gave up while it
// waited for the program (a host's own timeout, a user's cancel). As Ctrl-C
// would, the foreground program gets SIGINT (and input it has not read is
// dropped); the terminal and its session stay, and what the program printed
// stays unread for the next result, which says what happened.
//
// Like task_kill's, the SIGINT is held until the program has taken the text
// the send typed (see heldSignal), so that a line editor never runs the rest
// of a cut line; it is not sent if another call holds the terminal by then.
func (a *Actor) interruptCancelledSend(callID string) {
	a.dropHeld()
	a.held = &heldSignal{taskID: callID, send: true, until: time.Now().Add(heldSignalMax)}
	a.proc.ProbeSignal(a.held, syscall.SIGINT)
}

// sendInterrupt sends a cancelled send's SIGINT, noted for the next result.
func (a *Actor) sendInterrupt() {
	note := fmt.Sprintf("[a terminal_send on %s was cancelled by its caller while it waited: sent SIGINT to the foreground program, as Ctrl-C would; what it printed is below, unread until now]", a.opts.ID)
	if err := a.proc.Signal(syscall.SIGINT); err != nil {
		note = fmt.Sprintf("[a terminal_send on %s was cancelled by its caller while it waited; SIGINT could not be sent (%v)]", a.opts.ID, err)
	}
	if len(a.interrupted) < lostLines {
		a.interrupted = append(a.interrupted, note)
	}
}

// cancel withdraws a call (see Cancel).
func (a *Actor) cancel(ctx actor.Context, callID string) {
	opening, waiting := false, false
	a.dropWaiters(func(w *waiter) bool {
		if w.kind == waitTask || w.callID != callID {
			return false
		}
		opening = opening || w.kind == waitOpen
		waiting = true
		return true
	})
	if !waiting {
		opening = a.withdrawAnswered(callID)
	}
	if h := a.holder; h != nil && !h.task && h.id == callID {
		a.holder = nil
		if waiting && a.exit == nil && a.proc != nil {
			a.interruptCancelledSend(callID)
		}
	}
	if opening {
		// Nobody knows this terminal's id: it would be held for good.
		a.teardown(ctx, "the terminal_open that started this terminal was cancelled")
		ctx.Stop(ctx.Self())
	}
}

func (a *Actor) foregroundSend(ctx actor.Context, m *Send) {
	switch {
	case a.exit != nil:
		ctx.Respond(a.exitedResult(m.CallID, ToolSend))
		return
	case a.holder != nil:
		ctx.Respond(a.busyResult(m.CallID, ToolSend, a.busy()))
		return
	}
	a.yieldReads(ctx)
	a.holder = &holder{id: m.CallID, since: time.Now()}
	notes := a.longLines(m.Input)
	a.type_(m.Input)
	a.addWaiter(ctx, &waiter{kind: waitSend, callID: m.CallID, sender: ctx.Sender(), settle: m.Settle, notes: notes}, m.Wait)
}

// maxCanonLine is the most a terminal in canonical mode keeps of a line
// (N_TTY_BUF_SIZE less one byte for the line's end): the rest is dropped.
const maxCanonLine = 4095

// longLines warns when input has a line longer than a line-mode reader can
// get: the program reads in canonical mode (the terminal edits the line:
// read, cat, input() without a line editor), and the terminal keeps only the
// first maxCanonLine bytes of a line. A line editor (bash's prompt, a
// python3 REPL) reads in raw mode and gets every byte.
func (a *Actor) longLines(input []byte) []string {
	longest, count := 0, 0
	for line := range bytes.FieldsFuncSeq(input, func(r rune) bool { return r == '\r' || r == '\n' }) {
		if len(line) > maxCanonLine {
			longest, count = max(longest, len(line)), count+1
		}
	}
	if count == 0 {
		return nil
	}
	t, err := a.proc.Termios()
	if err != nil || t.Lflag&unix.ICANON == 0 {
		return nil
	}
	return []string{fmt.Sprintf("[warning: %d typed line(s) longer than %d bytes (the longest %d) went to a program that reads in line mode: the terminal keeps only the first %d bytes of a line and drops the rest, so the program got them cut. Pass long data through a file, or in shorter lines]",
		count, maxCanonLine, longest, maxCanonLine)}
}

// type_ writes input; the shell's prompt, if it showed, is no longer idle.
func (a *Actor) type_(input []byte) {
	a.promptIdle = false
	a.proc.Write(input)
}

func (a *Actor) reserve(ctx actor.Context, m *Reserve) {
	switch {
	case a.exit != nil:
		ctx.Respond(&Busy{Reason: fmt.Sprintf("terminal %s has exited (%s)", a.opts.ID, a.exit), Exited: true})
		return
	case a.holder != nil:
		ctx.Respond(&Busy{Reason: a.busy()})
		return
	}
	a.yieldReads(ctx)
	r := a.reserved(m.TaskID, m.CallID, a.longLines(m.Input))
	ctx.Respond(r)
	a.holder = &holder{id: m.TaskID, task: true, since: time.Now(), subscriber: m.Subscriber, sent: r.Offset}
	a.startFeed(m.Input)
	a.addWaiter(ctx, &waiter{kind: waitTask, callID: m.TaskID}, 0)
}

// reserved answers a Reserve: what follows is the task's, and what came
// before and was not read yet goes with the background send's result.
func (a *Actor) reserved(taskID, callID string, notes []string) *Reserved {
	end := a.returnable()
	raw, from := a.hist.slice(a.readPos, end)
	p := page{raw: raw, from: from, asked: a.readPos,
		tail: []string{fmt.Sprintf("[started in the background as %s on terminal %s; collect its output with task_output, stop it with task_kill]", taskID, a.opts.ID)}}
	if from < end || from > a.readPos {
		p.cover = a.coverage()
	}
	p.head = a.lostNotes(notes)
	a.noteAnswer(callID, waitSend, p.asked, end)
	a.readPos = end
	data, _ := json.Marshal(map[string]any{"task_id": taskID, "terminal_id": a.opts.ID, "running": true})
	text, _, _ := p.render(a.opts.Config.MaxResultBytes - len(data))
	return &Reserved{Offset: end, Text: text, Data: data}
}

func (a *Actor) heldProbed(p *ptyproc.Probe, h *heldSignal) {
	if h != a.held {
		return
	}
	// Taken: a command has the terminal, or the program is back reading
	// it. (Blocked elsewhere is not enough: a shell that forked the command
	// but has not handed it the terminal yet would get the signal instead,
	// and the command would run on unseen.)
	leaderReads := p.Wait.State == procfs.WaitingInput && p.Wait.PID == a.proc.PID()
	taken := p.Err == nil && !p.InputPending && (p.Pgrp != a.proc.PID() && !p.ForegroundForked || leaderReads)
	if !taken && time.Now().Before(h.until) {
		send := a.send
		h.timer = time.AfterFunc(time.Millisecond, func() { send(&heldRetry{h}) })
		return
	}
	a.held = nil
	switch {
	case h.send && a.holder == nil && a.exit == nil && p.Err == nil && (p.InputPending || p.Wait.State != procfs.WaitingInput):
		// (A program back reading the terminal has nothing to interrupt;
		// a SIGINT would still reach a shell at its prompt, and bash may
		// then drop the next line typed or end the next wait early.)
		a.sendInterrupt()
	}
}

func (a *Actor) dropHeld() {
	if a.held != nil && a.held.timer != nil {
		a.held.timer.Stop()
	}
	a.held = nil
}

// feedTask streams new history bytes to the background task.
func (a *Actor) feedTask(ctx actor.Context) {
	h := a.holder
	if h == nil || !h.task {
		return
	}
	end := a.returnable()
	if end <= h.sent {
		return
	}
	raw, _ := a.hist.slice(h.sent, end)
	h.sent = end
	ctx.Send(h.subscriber, &TaskEvent{TaskID: h.id, Output: append([]byte(nil), raw...)})
}
