package terminal

import (
	"fmt"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/waitproof"
)

// promptCheck confirms a prompt marker: bash prints it from PROMPT_COMMAND
// before its line editor takes over the terminal, and text typed in between
// is echoed twice (by the terminal, then by readline). The wait ends when
// bash is seen reading the terminal; a marker not confirmed within
// promptCheckMax is no prompt (a command can print it: eval
// "$PROMPT_COMMAND"), and the next marker decides.
type promptCheck struct {
	until time.Time
	timer *time.Timer
}

// cpuSample is a process group's processor time when it was last seen to
// change (see settles).
type cpuSample struct {
	pgrp int
	cpu  uint64
	at   time.Time
}

// groupQuiet is the least time the whole foreground group must be seen
// not to run, on top of the looks' quiet, before a wait settles (a quarter
// of idleSilenceMs when that is longer).
const groupQuiet = 100 * time.Millisecond

// promptRetry looks again.
type promptRetry struct{ c *promptCheck }

const promptCheckMax = time.Second

// waiter is a call (or a task) waiting for the program to be ready.
type waiter struct {
	kind   waiterKind
	callID string
	sender *actor.PID
	wait   time.Duration
	timer  *time.Timer
	args   ReadArgs
	// settle: the caller gave no wait of its own (see settles).
	settle bool
	// notes go at the head of the answer (a send's warnings).
	notes []string
	// onOutput: a terminal_read with wait_for output, which new output
	// also ends once it pauses (outputSettle) or has flowed for
	// outputSettleMax; outTimer is armed from the first new output, at
	// firstOut.
	onOutput bool
	outTimer *time.Timer
	firstOut time.Time
}

// stopTimers stops the waiter's timers.
func (w *waiter) stopTimers() {
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.outTimer != nil {
		w.outTimer.Stop()
	}
}

// outputTick ends a wait_for output wait that saw new output.
type outputTick struct{ w *waiter }

const (
	// outputSettle is how long new output must pause before a wait_for
	// output wait ends, as task_output's.
	outputSettle = 50 * time.Millisecond
	// outputSettleMax bounds that from the first new output: a stream that
	// never pauses (yes, a busy log) is returned in slices.
	outputSettleMax = 500 * time.Millisecond
)

// newOutput arms the wait_for output waits: new output ends them once it
// pauses.
func (a *Actor) newOutput() {
	for _, w := range a.waiters {
		if !w.onOutput || a.returnable() <= a.readPos {
			continue
		}
		d := outputSettle
		if w.outTimer == nil {
			w.firstOut = time.Now()
			send := a.send
			w.outTimer = time.AfterFunc(d, func() { send(&outputTick{w}) })
			continue
		}
		w.outTimer.Reset(min(d, max(0, outputSettleMax-time.Since(w.firstOut))))
	}
}

// outputCame ends a wait_for output wait (see newOutput).
func (a *Actor) outputCame(ctx actor.Context, w *waiter) {
	if !slices.Contains(a.waiters, w) {
		return
	}
	if a.promptCheck != nil {
		// The shell's prompt marker came with the output: its check
		// (at most promptCheckMax) says whether this is the prompt.
		send := a.send
		w.outTimer = time.AfterFunc(outputSettle, func() { send(&outputTick{w}) })
		return
	}
	a.dropWaiters(func(x *waiter) bool { return x == w })
	a.answer(ctx, w, Readiness{Reason: ReadyRunning, Detail: "new output came; the program may still be working"})
}

type waiterKind int

const (
	waitOpen waiterKind = iota
	waitSend
	waitRead
	waitTask
)

// currentState describes the terminal without waiting.
func (a *Actor) currentState() Readiness {
	switch {
	case a.exit != nil:
		return Readiness{Reason: ReadyExited, Detail: a.exit.String(), Exit: a.exit}
	case a.promptIdle && a.promptSeen:
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
	if a.promptIdle && !a.promptSeen && a.promptCheck == nil && w.kind != waitTask && a.proc != nil {
		// The marker came before this wait: confirm it now.
		a.promptCheck = &promptCheck{until: time.Now().Add(promptCheckMax)}
		a.proc.Probe(a.promptCheck, true)
	}
	if a.promptIdle && a.promptSeen && w.kind != waitTask && w.kind != waitSend {
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
			w.stopTimers()
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
			w.stopTimers()
			continue
		}
		kept = append(kept, w)
	}
	a.waiters = kept
	a.maybeStopTracker()
}

// resolveAll ends every wait with r.
// A task still typing, or being killed, waits on (see taskHolds).
func (a *Actor) resolveAll(ctx actor.Context, r Readiness) {
	ws := a.waiters
	a.waiters = nil
	for _, w := range ws {
		if a.taskHolds(w, r) {
			a.waiters = append(a.waiters, w)
			continue
		}
		a.lastReady = r.Reason
		w.stopTimers()
		a.answer(ctx, w, r)
	}
	if len(a.waiters) == 0 {
		a.wait.Stop()
	} else {
		a.wait.Again()
	}
}

// answer ends one waiter's wait.
func (a *Actor) answer(ctx actor.Context, w *waiter, r Readiness) {
	switch w.kind {
	case waitTask:
		if k := a.kill; k != nil && k.taskID == w.callID {
			a.stopKill()
		}
		if h := a.holder; h != nil && h.id == w.callID {
			a.stopFeed()
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
	end := a.returnable()
	// An unread byte goes to one result: a wait that began before another
	// result took its bytes starts where that one ended (and where a
	// withdrawn answer's bytes begin again).
	asked := a.readPos
	raw, from := a.hist.slice(asked, end)
	a.readPos = end
	p := page{raw: raw, from: from, asked: asked, head: a.lostNotes(w.notes)}
	a.noteAnswer(w.callID, w.kind, asked, end)
	if w.kind == waitOpen {
		p.head = append(p.head, fmt.Sprintf("[terminal %s opened: %s]", a.opts.ID, a.command))
	}
	p.tail, p.cover = []string{readyLine(r)}, a.coverage()
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

// output takes program output: markers out, history in, the task fed, the
// tracker told.
func (a *Actor) output(ctx actor.Context, data []byte) {
	a.wait.Output()
	marker := false
	if a.stream == nil {
		a.hist.write(data)
	} else {
		a.stream.Feed(data, a.hist.write, func(_, _ []byte) bool {
			a.promptIdle, a.promptSeen, marker = true, false, true
			return true
		})
	}
	a.killOutput(marker)
	a.newOutput()
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
	// bash itself, the terminal's leader, in its own group: a program
	// started after a marker was printed (eval "$PROMPT_COMMAND"; cat)
	// reads the terminal too, and is no prompt.
	reading := p.Err == nil && !p.InputPending && p.Wait.State == procfs.WaitingInput && a.leaderReads(p)
	if !reading && time.Now().Before(c.until) {
		send := a.send
		c.timer = time.AfterFunc(time.Millisecond, func() { send(&promptRetry{c}) })
		return
	}
	a.promptCheck = nil
	if !reading {
		// Never confirmed: a command that prints the marker itself (eval
		// "$PROMPT_COMMAND") runs on. It is no prompt; the next marker
		// decides.
		a.promptIdle = false
		return
	}
	a.promptSeen = true
	if len(a.waiters) > 0 {
		a.resolveAll(ctx, Readiness{Reason: ReadyPrompt})
	}
}

// settles ends the waits of calls that gave no wait of their own once the
// program is quiet: no output and no processor time for idleSilenceMs,
// and not reading the terminal (a server waiting for connections, a
// sleep). Such a program may run for ever, and the default wait is a
// guess; a caller that gave wait_ms waits for proof, an exit or its bound.
//
// The looks see the leader's processor time, and the members' only while
// the leader waits for a child; a leader that sleeps or polls while a child
// works (node running a script, a Python loop around Popen) looks quiet.
// So quiet is confirmed by two reads of the whole group's time, a look
// apart.
func (a *Actor) settles(ctx actor.Context, p *ptyproc.Probe) {
	quiet := a.wait.QuietFor()
	if p.Err != nil || p.InputPending || p.Wait.State != procfs.NotWaiting || quiet < ms(a.opts.Config.IdleSilenceMs) ||
		!slices.ContainsFunc(a.waiters, func(w *waiter) bool { return w.settle && w.kind != waitTask }) {
		return
	}
	window := max(groupQuiet, ms(a.opts.Config.IdleSilenceMs)/4)
	if s := a.groupCPU; s != nil && s.pgrp == p.Pgrp && time.Since(s.at) < window {
		return // the times only grow: one read a window tells whether it ran
	}
	cpu, err := procfs.GroupCPU(p.Pgrp)
	if err != nil {
		return
	}
	if s := a.groupCPU; s == nil || s.pgrp != p.Pgrp || s.cpu != cpu {
		a.groupCPU = &cpuSample{pgrp: p.Pgrp, cpu: cpu, at: time.Now()}
		return
	}
	var settled []*waiter
	a.dropWaiters(func(w *waiter) bool {
		if w.settle && w.kind != waitTask {
			settled = append(settled, w)
			return true
		}
		return false
	})
	r := Readiness{Reason: ReadyIdle, Detail: fmt.Sprintf("no output and no processor time for %d ms from %s, which is not reading the terminal", quiet.Milliseconds(), a.foreground())}
	if leader, err := procfs.Stat(p.Pgrp); err == nil && (leader.State == 'T' || leader.State == 't') {
		r.Detail = fmt.Sprintf("%s is stopped: it does nothing until it is continued (terminal_signal CONT)", a.foreground())
	}
	for _, w := range settled {
		a.lastReady = r.Reason
		a.answer(ctx, w, r)
	}
}

func (a *Actor) probed(ctx actor.Context, p *ptyproc.Probe) {
	verdict, w := a.wait.Probe(p)
	switch verdict {
	case waitproof.Waiting:
		if a.promptIdle && a.leaderReads(p) {
			// The shell's prompt marker came, and now it is proven
			// reading: that is the prompt, however the two looks were
			// ordered.
			a.promptCheck, a.promptSeen = nil, true
			a.resolveAll(ctx, Readiness{Reason: ReadyPrompt})
			return
		}
		a.resolveAll(ctx, Readiness{Reason: ReadyStdin, Detail: waiterName(w) + " " + w.How()})
	case waitproof.Unknown:
		// A relay (script, ssh -t, docker exec -it) or a client waits on the
		// terminal and on its other side: only its silence can tell, counted
		// from the input that began this wait at the earliest (the echo of
		// a send may not be back at the first look).
		if silent := a.wait.QuietFor(); silent >= ms(a.opts.Config.IdleSilenceMs) {
			a.resolveAll(ctx, Readiness{Reason: ReadyIdle, Detail: fmt.Sprintf("no output for %d ms; %s %s", silent.Milliseconds(), waiterName(w), w.How())})
		}
	case waitproof.Inconclusive:
		a.settles(ctx, p)
	}
	if p.Err != nil && a.wait.QuietFor() >= ms(a.opts.Config.IdleSilenceMs) && len(a.waiters) > 0 {
		a.resolveAll(ctx, Readiness{Reason: ReadyIdle, Detail: fmt.Sprintf("no output for %d ms (%v)", a.wait.QuietFor().Milliseconds(), p.Err)})
	}
}

func waiterName(w procfs.Wait) string {
	if w.Comm == "" {
		return "the program"
	}
	return fmt.Sprintf("%s (pid %d)", w.Comm, w.PID)
}

// leaderReads reports whether the waiter a probe found is the terminal's
// leader (bash, for a shell terminal) with its own group in the foreground.
func (a *Actor) leaderReads(p *ptyproc.Probe) bool {
	return p.Pgrp == a.proc.PID() && p.Wait.PID == a.proc.PID()
}
