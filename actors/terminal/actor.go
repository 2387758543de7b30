package terminal

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/inband"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/safetext"
	"github.com/dsh-actors/dsh-actors/internal/waitproof"
	"github.com/dsh-actors/dsh-actors/messages"
)

// Options configure a terminal actor.
type Options struct {
	// ID is the terminal's id within its agent, e.g. "t1".
	ID   string
	Args OpenArgs
	// Config is the terminal tools' configuration.
	Config Config
	// Env is the base environment; nil means the host's. Args.Env is added.
	Env []string
	// Dir is the working directory when Args.Cwd is empty.
	Dir    string
	Logger *slog.Logger
	// Reaper kills the session in the background when the terminal closes
	// or stops. Nil means one of the actor's own.
	Reaper *ptyproc.Reaper
}

// Props returns the props of a terminal actor.
func Props(opts Options, extra ...actor.PropsOption) *actor.Props {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Reaper == nil {
		opts.Reaper = &ptyproc.Reaper{}
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{opts: opts} }, extra...)
}

// Actor is one PTY session. See the package documentation.
type Actor struct {
	opts     Options
	send     func(any)
	proc     *ptyproc.Process
	startErr error
	command  string
	hist     *history
	readPos  int64          // the model's read cursor
	stream   *inband.Stream // prompt markers of the default shell; nil otherwise
	// promptIdle: our shell's prompt marker came and no input since.
	promptIdle bool
	exit       *ptyproc.ExitStatus
	lastReady  ReadyReason
	wait       *waitproof.Tracker
	waiters    []*waiter
	holder     *holder
	closing    *closing
	// held is a task_kill SIGINT waiting for the program to take the text
	// the task typed.
	held *heldSignal
	// promptCheck: the default shell's prompt marker came and a probe looks
	// whether bash has entered its line editor yet.
	promptCheck *promptCheck
}

// promptCheck confirms a prompt marker: bash prints it from PROMPT_COMMAND
// before its line editor takes over the terminal, and text typed in between
// is echoed twice (by the terminal, then by readline). The wait ends when
// bash is proven reading the terminal, or after promptCheckMax.
type promptCheck struct {
	until time.Time
	timer *time.Timer
}

// promptRetry looks again.
type promptRetry struct{ c *promptCheck }

const promptCheckMax = 50 * time.Millisecond

// heldSignal is a task_kill SIGINT held back until the terminal's program
// has taken the text the task typed: no input pending, and the program
// either back reading the terminal or no longer in the foreground. (A shell without job control keeps the
// foreground while its command runs: there the bound decides.) A line editor keeps typed-ahead bytes of its
// own that no signal clears, so a SIGINT that lands while it works through
// them cuts the line and runs the rest ("s^C" then "leep 30": command not
// found). A command the shell forked is signalled once it has executed
// its program. Held at most heldSignalMax.
type heldSignal struct {
	taskID string
	until  time.Time
	timer  *time.Timer
}

// heldRetry asks again whether the typed text was taken.
type heldRetry struct{ h *heldSignal }

const heldSignalMax = 250 * time.Millisecond

// waiter is a call (or a task) waiting for the program to be ready.
type waiter struct {
	kind   waiterKind
	callID string
	sender *actor.PID
	from   int64 // where its output starts in the history
	wait   time.Duration
	timer  *time.Timer
	args   ReadArgs
}

type waiterKind int

const (
	waitOpen waiterKind = iota
	waitSend
	waitRead
	waitTask
)

// holder holds the send reservation.
type holder struct {
	id         string // call id or task id
	task       bool
	since      time.Time
	subscriber *actor.PID
	sent       int64 // history offset up to which the task has its output
}

type closing struct {
	callID string
	sender *actor.PID
	timer  *time.Timer
	// hup repeats SIGHUP: a shell that gets it between printing its prompt
	// and entering its line editor only notes it, and reads on.
	hup      *time.Timer
	hupEvery time.Duration
}

// hupTick sends SIGHUP again to a terminal being closed.
type hupTick struct{ c *closing }

// deadlineTick ends one waiter's wait; graceTick ends a close's grace.
type (
	deadlineTick struct{ w *waiter }
	graceTick    struct{ c *closing }
)

// echoMax bounds a value the model gave (a command, a directory) when an
// answer repeats it: a listing or an error is never a megabyte long.
const echoMax = 200

// shell markers: "\x1eDST" nonce ":" status "\x1e".
const termMarkerLead = "\x1eDST"

// Receive handles the terminal's messages; it never blocks.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		root, self := ctx.ActorSystem().Root, ctx.Self()
		a.send = func(msg any) { root.Send(self, msg) }
		a.wait = waitproof.New(a.send)
		a.hist = newHistory(a.opts.Config.HistoryBytes)
		a.start()
	case *actor.Stopping:
		a.teardown(ctx, "the terminal was stopped because its agent is stopping")
	case *actor.Stopped, *actor.Restarting:
		// A restart is never asked for (terminals are Temporary); a dead
		// terminal is not resurrected.
	case *Open:
		a.open(ctx, m)
	case *Send:
		a.foregroundSend(ctx, m)
	case *Read:
		a.read(ctx, m)
	case *Signal:
		a.signal(ctx, m.CallID, m.Sig)
	case *Resize:
		a.resize(ctx, m)
	case *Close:
		a.close(ctx, m)
	case *Cancel:
		a.cancel(ctx, m.CallID)
	case *Describe:
		in := a.info()
		in.Tag = m.Tag
		ctx.Respond(in)
	case *Reserve:
		a.reserve(ctx, m)
	case *Interrupt:
		a.interrupt(m)
	case *promptRetry:
		if m.c == a.promptCheck && a.proc != nil {
			a.proc.Probe(m.c, true)
		}
	case *heldRetry:
		if m.h == a.held && a.proc != nil {
			a.proc.Probe(m.h, true)
		}
	case *Release:
		if a.holder != nil && a.holder.id == m.TaskID {
			a.dropWaiters(func(w *waiter) bool { return w.kind == waitTask })
			a.holder = nil
		}
	case *ptyproc.Output:
		if m.Proc == a.proc {
			a.output(ctx, m.Data)
		}
		m.Release()
	case *ptyproc.OutputClosed:
	case *ptyproc.Exited:
		if m.Proc == a.proc {
			st := m.Status
			a.exit = &st
			a.resolveAll(ctx, Readiness{Reason: ReadyExited, Detail: st.String(), Exit: &st})
			if a.closing != nil {
				a.finishClose(ctx)
			}
		}
	case *ptyproc.Probe:
		if m.Proc != a.proc {
			break
		}
		switch tag := m.Tag.(type) {
		case *heldSignal:
			a.heldProbed(m, tag)
		case *promptCheck:
			a.promptProbed(ctx, m, tag)
		default:
			a.probed(ctx, m)
		}
	case *waitproof.Tick:
		a.wait.Tick(m)
	case *deadlineTick:
		a.deadline(ctx, m.w)
	case *graceTick:
		if a.closing == m.c {
			a.finishClose(ctx)
		}
	case *hupTick:
		if c := a.closing; c == m.c && a.exit == nil && a.proc != nil {
			a.hangUp(c)
		}
	default:
		a.opts.Logger.Warn("terminal: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// start starts the program.
func (a *Actor) start() {
	args := a.opts.Args
	base := os.Environ()
	if a.opts.Env != nil {
		base = a.opts.Env
	}
	// Later settings override earlier ones; built in one pass (a map), since
	// a model may pass thousands of variables.
	set := map[string]string{"TERM": "dumb"}
	if !a.opts.Config.HostHistory {
		set["HISTFILE"] = "" // no bash here loads or writes the host user's history
	}
	if !a.opts.Config.HostStartupFiles {
		set["INPUTRC"] = "/dev/null"
	}
	var path string
	var argv []string
	if strings.TrimSpace(args.Command) == "" {
		// An interactive bash whose prompt we can see: an invisible marker
		// before each prompt, exported so that a nested bash shows it too.
		var b [8]byte
		_, _ = rand.Read(b[:])
		nonce := hex.EncodeToString(b[:])
		lead := []byte(termMarkerLead + nonce + ":")
		a.stream = &inband.Stream{Scanner: inband.Scanner{Lead: lead, MaxLen: len(lead) + 12, Valid: validStatus}}
		set["PROMPT_COMMAND"] = `printf '\036DST` + nonce + `:%s\036' $?`
		set["PS1"] = `\$ `
		path, argv = "bash", []string{"--norc", "--noprofile", "-i"}
		if a.opts.Config.HostStartupFiles {
			argv = []string{"-i"}
		}
		a.command = "bash"
	} else {
		path, argv = "bash", []string{"-c", args.Command}
		a.command = args.Command
	}
	for k, v := range args.Env {
		set[k] = v
	}
	env := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !hasKey(set, k) {
			env = append(env, kv)
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+set[k])
	}
	dir := args.Cwd
	if dir == "" {
		dir = a.opts.Dir
	}
	if dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			a.startErr = fmt.Errorf("cwd %q is not a directory that exists", safetext.Clip(dir, echoMax))
			return
		}
	}
	cols, rows := args.Cols, args.Rows
	if cols == 0 {
		cols = DefaultCols
	}
	if rows == 0 {
		rows = DefaultRows
	}
	a.proc, a.startErr = ptyproc.Start(ptyproc.Options{
		Path: path, Args: argv, Env: env, Dir: dir,
		Cols: uint16(cols), Rows: uint16(rows), Echo: true, CRLF: true,
	}, a.send)
}

func validStatus(b []byte) bool {
	_, err := strconv.Atoi(string(b))
	return err == nil
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

// teardown hands the process to the reaper and answers everyone still
// waiting.
func (a *Actor) teardown(ctx actor.Context, why string) {
	a.wait.Stop()
	if c := a.promptCheck; c != nil && c.timer != nil {
		c.timer.Stop()
	}
	a.promptCheck = nil
	a.dropHeld()
	for _, w := range a.waiters {
		if w.timer != nil {
			w.timer.Stop()
		}
		if w.kind != waitTask {
			ctx.Send(w.sender, a.errorResult(w.callID, toolOf(w.kind), why))
		} else if a.holder != nil && a.holder.subscriber != nil {
			ctx.Send(a.holder.subscriber, &TaskEvent{TaskID: a.holder.id, Done: true, Ready: Readiness{Reason: ReadyExited, Detail: why}})
		}
	}
	a.waiters = nil
	a.holder = nil
	if c := a.closing; c != nil {
		if c.timer != nil {
			c.timer.Stop()
		}
		if c.hup != nil {
			c.hup.Stop()
		}
	}
	if a.proc != nil {
		a.opts.Reaper.Close(a.proc)
		a.proc = nil
	}
}

func toolOf(k waiterKind) string {
	switch k {
	case waitOpen:
		return ToolOpen
	case waitSend:
		return ToolSend
	}
	return ToolRead
}

func (a *Actor) open(ctx actor.Context, m *Open) {
	if a.startErr != nil {
		what := a.opts.Args.Command
		if strings.TrimSpace(what) == "" {
			what = "bash"
		}
		ctx.Respond(&messages.ToolResult{CallId: m.CallID, Tool: ToolOpen, IsError: true,
			Text: safetext.Clip(fmt.Sprintf("terminal_open: could not start %q: %v", safetext.Clip(what, echoMax), a.startErr), 4*echoMax)})
		ctx.Stop(ctx.Self())
		return
	}
	a.addWaiter(ctx, &waiter{kind: waitOpen, callID: m.CallID, sender: ctx.Sender(), from: 0}, ms(a.opts.Config.DefaultWaitMs))
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

// cancel withdraws a call (see Cancel).
func (a *Actor) cancel(ctx actor.Context, callID string) {
	opening := false
	a.dropWaiters(func(w *waiter) bool {
		if w.kind == waitTask || w.callID != callID {
			return false
		}
		opening = opening || w.kind == waitOpen
		return true
	})
	if h := a.holder; h != nil && !h.task && h.id == callID {
		a.holder = nil
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
		ctx.Respond(a.errorResult(m.CallID, ToolSend, a.busy()))
		return
	}
	a.holder = &holder{id: m.CallID, since: time.Now()}
	a.type_(m.Input)
	a.addWaiter(ctx, &waiter{kind: waitSend, callID: m.CallID, sender: ctx.Sender(), from: a.readPos}, m.Wait)
}

// type_ writes input; the shell's prompt, if it showed, is no longer idle.
func (a *Actor) type_(input []byte) {
	a.promptIdle = false
	a.proc.Write(input)
}

func (a *Actor) reserve(ctx actor.Context, m *Reserve) {
	switch {
	case a.exit != nil:
		ctx.Respond(&Busy{Reason: fmt.Sprintf("terminal %s has exited (%s)", a.opts.ID, a.exit)})
		return
	case a.holder != nil:
		ctx.Respond(&Busy{Reason: a.busy()})
		return
	}
	end := a.hist.end()
	a.holder = &holder{id: m.TaskID, task: true, since: time.Now(), subscriber: m.Subscriber, sent: end}
	a.type_(m.Input)
	ctx.Respond(&Reserved{Offset: end})
	a.addWaiter(ctx, &waiter{kind: waitTask, callID: m.TaskID, from: end}, 0)
}

func (a *Actor) read(ctx actor.Context, m *Read) {
	if m.Args.Offset != nil {
		a.respondPage(ctx, m)
		return
	}
	w := &waiter{kind: waitRead, callID: m.CallID, sender: ctx.Sender(), from: a.readPos, args: m.Args}
	wait := waitFor(m.Args.WaitMs, a.opts.Config)
	if a.exit != nil || wait == 0 {
		a.answer(ctx, w, a.currentState())
		return
	}
	a.addWaiter(ctx, w, wait)
}

// currentState describes the terminal without waiting.
func (a *Actor) currentState() Readiness {
	switch {
	case a.exit != nil:
		return Readiness{Reason: ReadyExited, Detail: a.exit.String(), Exit: a.exit}
	case a.promptIdle:
		return Readiness{Reason: ReadyPrompt}
	}
	return Readiness{Reason: ReadyRunning, Detail: "not waited for"}
}

// addWaiter waits for readiness, at most wait (0 for a task: no bound).
func (a *Actor) addWaiter(ctx actor.Context, w *waiter, wait time.Duration) {
	if a.exit != nil {
		a.answer(ctx, w, a.currentState())
		return
	}
	if a.promptIdle && w.kind != waitTask && w.kind != waitSend {
		a.answer(ctx, w, Readiness{Reason: ReadyPrompt})
		return
	}
	if w.kind != waitTask {
		w.wait = wait
		send := a.send
		w.timer = time.AfterFunc(wait, func() { send(&deadlineTick{w}) })
	}
	a.waiters = append(a.waiters, w)
	if !a.wait.Active() {
		a.wait.Start(a.proc)
	}
}

func (a *Actor) deadline(ctx actor.Context, w *waiter) {
	for i, x := range a.waiters {
		if x == w {
			a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
			a.answer(ctx, w, Readiness{Reason: ReadyTimeout, Detail: fmt.Sprintf("after %d ms; the program may still be working", w.wait.Milliseconds())})
			a.maybeStopTracker()
			return
		}
	}
}

func (a *Actor) maybeStopTracker() {
	if len(a.waiters) == 0 {
		a.wait.Stop()
	}
}

func (a *Actor) dropWaiters(match func(*waiter) bool) {
	kept := a.waiters[:0]
	for _, w := range a.waiters {
		if match(w) {
			if w.timer != nil {
				w.timer.Stop()
			}
			continue
		}
		kept = append(kept, w)
	}
	a.waiters = kept
	a.maybeStopTracker()
}

// resolveAll ends every wait with r.
func (a *Actor) resolveAll(ctx actor.Context, r Readiness) {
	ws := a.waiters
	a.waiters = nil
	a.wait.Stop()
	a.lastReady = r.Reason
	for _, w := range ws {
		if w.timer != nil {
			w.timer.Stop()
		}
		a.answer(ctx, w, r)
	}
}

// answer ends one waiter's wait.
func (a *Actor) answer(ctx actor.Context, w *waiter, r Readiness) {
	switch w.kind {
	case waitTask:
		if h := a.holder; h != nil && h.id == w.callID {
			a.feedTask(ctx)
			ctx.Send(h.subscriber, &TaskEvent{TaskID: w.callID, Done: true, Ready: r})
			// What the task had is the task's (task_output returns it): a
			// read or send on the terminal starts after it.
			a.readPos = max(a.readPos, h.sent)
			a.holder = nil
		}
		return
	case waitSend:
		if a.holder != nil && a.holder.id == w.callID {
			a.holder = nil
		}
	}
	tool := toolOf(w.kind)
	end := a.hist.end()
	raw, from := a.hist.slice(w.from, end)
	a.readPos = end
	p := page{raw: raw, from: from, asked: w.from}
	if w.kind == waitOpen {
		p.head = []string{fmt.Sprintf("[terminal %s opened: %s]", a.opts.ID, a.command)}
	}
	p.tail = []string{readyLine(r), a.historyLine(from, end)}
	ctx.Send(w.sender, a.result(w.callID, tool, p, r, false))
}

func readyLine(r Readiness) string {
	switch r.Reason {
	case ReadyPrompt:
		return "[ready: prompt — the shell is waiting for the next command]"
	case ReadyStdin:
		return "[ready: stdin_read — " + r.Detail + "]"
	case ReadyIdle:
		return "[ready: inferred_idle — " + r.Detail + "; this does not prove the command finished]"
	case ReadyTimeout:
		return "[not ready: timeout " + r.Detail + "]"
	case ReadyExited:
		return "[exited: " + r.Detail + "]"
	}
	return "[state: " + string(r.Reason) + " — " + r.Detail + "]"
}

func (a *Actor) historyLine(from, to int64) string {
	return fmt.Sprintf("[terminal %s: this result covers output bytes %d-%d of %d; history retained from byte %d]", a.opts.ID, from, to, a.hist.end(), a.hist.first())
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
	if p.raw != nil || p.asked > 0 || p.from > 0 {
		data["output_from"], data["output_to"] = p.from, p.from+int64(len(p.raw))
	}
	b, _ := json.Marshal(data)
	// The cap is for text and data together.
	return &messages.ToolResult{CallId: callID, Tool: tool, Text: p.render(a.opts.Config.MaxResultBytes - len(b)), IsError: isError, Data: b}
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
	return &messages.ToolResult{CallId: callID, Tool: tool, Text: text, IsError: true, Data: b}
}

// exitedResult answers a call on a terminal whose program has exited: its
// final unread output and status.
func (a *Actor) exitedResult(callID, tool string) *messages.ToolResult {
	end := a.hist.end()
	raw, from := a.hist.slice(a.readPos, end)
	p := page{raw: raw, from: from, asked: a.readPos,
		head: []string{fmt.Sprintf("[terminal %s has exited (%s); nothing more can be sent to it. Close it with terminal_close]", a.opts.ID, a.exit)},
		tail: []string{a.historyLine(from, end)}}
	a.readPos = end
	return a.result(callID, tool, p, Readiness{Reason: ReadyExited, Detail: a.exit.String(), Exit: a.exit}, true)
}

func (a *Actor) respondPage(ctx actor.Context, m *Read) {
	from := *m.Args.Offset
	to := a.hist.end()
	past := from > to
	if past {
		from = to
	}
	if m.Args.Limit != nil && *m.Args.Limit < to-from { // no overflow: to-from is small
		to = from + *m.Args.Limit
	}
	raw, start := a.hist.slice(from, to)
	p := page{raw: raw, from: start, asked: from, keepHead: true,
		tail: []string{a.historyLine(start, start+int64(len(raw)))}}
	if past {
		p.head = []string{fmt.Sprintf("[offset %d is past the end of the output (%d bytes so far)]", *m.Args.Offset, a.hist.end())}
	}
	ctx.Respond(a.result(m.CallID, ToolRead, p, a.currentState(), false))
}

// interrupt signals the foreground group for task_kill. SIGINT waits until
// the task's text was taken (see heldSignal). SIGTERM and SIGKILL never go
// to the terminal's own program at its input: the command is over, and it
// is the task's end that has not been seen yet.
func (a *Actor) interrupt(m *Interrupt) {
	h := a.holder
	if h == nil || h.id != m.TaskID || a.proc == nil || a.exit != nil {
		return
	}
	if m.Sig == syscall.SIGINT {
		a.dropHeld()
		a.held = &heldSignal{taskID: m.TaskID, until: time.Now().Add(heldSignalMax)}
		a.proc.Probe(a.held, true)
		return
	}
	if fg, err := a.proc.ForegroundGroup(); err == nil && fg == a.proc.PID() {
		if w, err := procfs.TTYWait(fg, a.proc.TTYName()); err == nil && w.State == procfs.WaitingInput && w.PID == fg {
			return
		}
	}
	_ = a.proc.Signal(m.Sig)
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
	taken := p.Err == nil && !p.InputPending && (p.Pgrp != a.proc.PID() && !a.forkedShell(p.Pgrp) || leaderReads)
	if !taken && time.Now().Before(h.until) {
		send := a.send
		h.timer = time.AfterFunc(time.Millisecond, func() { send(&heldRetry{h}) })
		return
	}
	a.held = nil
	if a.holder != nil && a.holder.id == h.taskID && a.exit == nil {
		_ = a.proc.Signal(syscall.SIGINT)
	}
}

// forkedShell reports whether the foreground group's leader is still a copy
// of the terminal's shell that has not executed its command yet: a SIGINT
// then would meet the shell's handler, and the command would run on.
func (a *Actor) forkedShell(pgrp int) bool {
	fg, err1 := procfs.Stat(pgrp)
	sh, err2 := procfs.Stat(a.proc.PID())
	return err1 == nil && err2 == nil && fg.Comm == sh.Comm && fg.PPID == sh.PID
}

func (a *Actor) dropHeld() {
	if a.held != nil && a.held.timer != nil {
		a.held.timer.Stop()
	}
	a.held = nil
}

// output takes program output: markers out, history in, the task fed, the
// tracker told.
func (a *Actor) output(ctx actor.Context, data []byte) {
	a.wait.Output()
	if a.stream == nil {
		a.hist.write(data)
	} else {
		a.stream.Feed(data, a.hist.write, func(_, _ []byte) bool {
			a.promptIdle = true
			return true
		})
	}
	a.feedTask(ctx)
	if a.promptIdle && len(a.waiters) > 0 && a.promptCheck == nil {
		a.promptCheck = &promptCheck{until: time.Now().Add(promptCheckMax)}
		a.proc.Probe(a.promptCheck, true)
	}
}

// promptProbed ends the waits on a prompt once bash reads the terminal
// (see promptCheck).
func (a *Actor) promptProbed(ctx actor.Context, p *ptyproc.Probe, c *promptCheck) {
	if c != a.promptCheck {
		return
	}
	if !a.promptIdle {
		a.promptCheck = nil // typed into meanwhile: a later marker decides
		return
	}
	reading := p.Err == nil && !p.InputPending && p.Wait.State == procfs.WaitingInput
	if !reading && time.Now().Before(c.until) {
		send := a.send
		c.timer = time.AfterFunc(time.Millisecond, func() { send(&promptRetry{c}) })
		return
	}
	a.promptCheck = nil
	if len(a.waiters) > 0 {
		a.resolveAll(ctx, Readiness{Reason: ReadyPrompt})
	}
}

// feedTask streams new history bytes to the background task.
func (a *Actor) feedTask(ctx actor.Context) {
	h := a.holder
	if h == nil || !h.task {
		return
	}
	end := a.hist.end()
	if end <= h.sent {
		return
	}
	raw, _ := a.hist.slice(h.sent, end)
	h.sent = end
	ctx.Send(h.subscriber, &TaskEvent{TaskID: h.id, Output: append([]byte(nil), raw...)})
}

func (a *Actor) probed(ctx actor.Context, p *ptyproc.Probe) {
	verdict, w := a.wait.Probe(p)
	switch verdict {
	case waitproof.Waiting:
		who := "the program"
		if w.Comm != "" {
			who = fmt.Sprintf("%s (pid %d)", w.Comm, w.PID)
		}
		a.resolveAll(ctx, Readiness{Reason: ReadyStdin, Detail: who + " is blocked reading the terminal"})
	case waitproof.Unknown:
		if silent := a.wait.SilentFor(); silent >= ms(a.opts.Config.IdleSilenceMs) {
			a.resolveAll(ctx, Readiness{Reason: ReadyIdle, Detail: fmt.Sprintf("no output for %d ms and its wait cannot be seen in /proc", silent.Milliseconds())})
		}
	}
	if p.Err != nil && a.wait.SilentFor() >= ms(a.opts.Config.IdleSilenceMs) && len(a.waiters) > 0 {
		a.resolveAll(ctx, Readiness{Reason: ReadyIdle, Detail: fmt.Sprintf("no output for %d ms (%v)", a.wait.SilentFor().Milliseconds(), p.Err)})
	}
}

func (a *Actor) signal(ctx actor.Context, callID string, sig syscall.Signal) {
	if a.exit != nil {
		ctx.Respond(a.exitedResult(callID, ToolSignal))
		return
	}
	fg := a.foreground()
	if err := a.proc.Signal(sig); err != nil {
		ctx.Respond(a.errorResult(callID, ToolSignal, fmt.Sprintf("terminal_signal: %v", err)))
		return
	}
	text := fmt.Sprintf("[sent %s to the foreground process group of terminal %s (%s)]", ptyproc.SignalName(sig), a.opts.ID, fg)
	ctx.Respond(a.result(callID, ToolSignal, page{head: []string{text}}, a.currentState(), false))
}

func (a *Actor) resize(ctx actor.Context, m *Resize) {
	if a.exit != nil {
		ctx.Respond(a.exitedResult(m.CallID, ToolResize))
		return
	}
	if err := a.proc.Resize(uint16(m.Cols), uint16(m.Rows)); err != nil {
		ctx.Respond(a.errorResult(m.CallID, ToolResize, fmt.Sprintf("terminal_resize: %v", err)))
		return
	}
	text := fmt.Sprintf("[terminal %s is now %dx%d]", a.opts.ID, m.Cols, m.Rows)
	ctx.Respond(a.result(m.CallID, ToolResize, page{head: []string{text}}, a.currentState(), false))
}

// close asks the program to end (SIGHUP, as when a terminal window closes),
// waits up to the grace for it, then answers with the final output and
// status and kills whatever is left of the session.
func (a *Actor) close(ctx actor.Context, m *Close) {
	if a.closing != nil {
		ctx.Respond(a.errorResult(m.CallID, ToolClose, fmt.Sprintf("terminal %s is already closing", a.opts.ID)))
		return
	}
	a.closing = &closing{callID: m.CallID, sender: ctx.Sender()}
	if a.exit != nil || a.proc == nil {
		a.finishClose(ctx)
		return
	}
	c, send := a.closing, a.send
	c.timer = time.AfterFunc(ms(a.opts.Config.KillGraceMs), func() { send(&graceTick{c}) })
	c.hupEvery = 5 * time.Millisecond
	a.hangUp(c)
}

// hangUp sends SIGHUP to the foreground group and the program, and again
// after a pause that doubles each time, until the program exits or the
// grace ends.
func (a *Actor) hangUp(c *closing) {
	_ = a.proc.Signal(syscall.SIGHUP)
	_ = syscall.Kill(a.proc.PID(), syscall.SIGHUP)
	send := a.send
	c.hup = time.AfterFunc(c.hupEvery, func() { send(&hupTick{c}) })
	c.hupEvery *= 2
}

func (a *Actor) finishClose(ctx actor.Context) {
	c := a.closing
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.hup != nil {
		c.hup.Stop()
	}
	end := a.hist.end()
	raw, from := a.hist.slice(a.readPos, end)
	status := "still running after SIGHUP: killed with SIGKILL"
	if a.exit == nil {
		// The reaper SIGKILLs it right after this answer.
		a.exit = &ptyproc.ExitStatus{Code: -1, Signal: syscall.SIGKILL}
	} else {
		status = a.exit.String()
	}
	r := Readiness{Reason: ReadyExited, Detail: status, Exit: a.exit}
	p := page{raw: raw, from: from, asked: a.readPos,
		head: []string{fmt.Sprintf("[terminal %s closed; its program's status: %s; every process of its session has been ended]", a.opts.ID, status)},
		tail: []string{a.historyLine(from, end)}}
	res := a.result(c.callID, ToolClose, p, r, false)
	a.resolveAll(ctx, r)
	a.teardown(ctx, "the terminal was closed")
	ctx.Send(c.sender, res)
	ctx.Stop(ctx.Self())
}

// foreground names the foreground process group's leader.
func (a *Actor) foreground() string {
	if a.proc == nil || a.exit != nil {
		return "none"
	}
	pgrp, err := a.proc.ForegroundGroup()
	if err != nil {
		return "unknown"
	}
	p, err := procfs.Stat(pgrp)
	if err != nil {
		return fmt.Sprintf("group %d", pgrp)
	}
	return fmt.Sprintf("%s, pid %d", p.Comm, p.PID)
}

func (a *Actor) info() *Info {
	in := &Info{ID: a.opts.ID, Command: safetext.Clip(a.command, echoMax), Running: a.exit == nil && a.proc != nil, ExitStatus: a.exit, LastReady: a.lastReady}
	if in.Running {
		in.Foreground = a.foreground()
	}
	if a.holder != nil {
		in.Holder, in.HolderSince = a.holder.id, a.holder.since
	}
	return in
}
