package shell

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/admission"
	"github.com/dsh-actors/dsh-actors/internal/inband"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
	"github.com/dsh-actors/dsh-actors/internal/waitproof"
	"github.com/dsh-actors/dsh-actors/messages"
)

// Run asks the shell actor to run one bash call. The answer, a
// *messages.ToolResult, goes to the message's sender.
type Run struct {
	CallID string
	Args   Args
}

// Cancel withdraws a call, as Ctrl-C would: a running call's command is
// interrupted (SIGINT to the terminal's foreground group), nothing more of
// its text is typed, and what it printed and how it ended open the next
// call's result; the shell and its state stay. Only a command that SIGINT,
// SIGTERM and SIGKILL to its job cannot stop costs the shell. A queued call
// is dropped; a call answered just before is told again in the next result.
type Cancel struct {
	CallID string
}

// Options configure a shell actor.
type Options struct {
	Config Config
	// Dir is the shell's first working directory; empty means the host's.
	Dir string
	// Env is the shell's base environment; nil means the host's.
	Env []string
	// Bash is the bash program; empty means "bash" from PATH.
	Bash string
	// Logger receives the actor's own log lines; nil means slog.Default().
	Logger *slog.Logger
	// Reaper closes the shell's processes in the background when the shell
	// is reset or stopped; whoever must know that they are gone waits for
	// it. Nil means a Reaper of the actor's own, which nobody waits for.
	Reaper *ptyproc.Reaper
	// Gate lets the host's calls start a few at a time, first come first
	// served (see package admission); nil admits every call at once.
	Gate *admission.Gate
	// Sandbox returns the sandbox the shell runs in (the agent's, shared
	// with its terminals); nil, or a nil sandbox, runs it on the host.
	Sandbox func() (*sandbox.Sandbox, error)
}

// Timings of the wait proof and of the interrupt sequence.
const (
	// escalateAfter: after a step of the interrupt sequence, a program that
	// is proven waiting again this long after it is taken not to have
	// stopped.
	escalateAfter = 50 * time.Millisecond
	// stepTimeout: a step of the interrupt sequence that neither ends the
	// command nor shows it waiting moves on to the next step after this long.
	stepTimeout = 2 * time.Second
	// startTimeout bounds the start-up lines.
	startTimeout = 10 * time.Second
	// shellCols and shellRows are the shell terminal's size.
	shellCols, shellRows = 200, 50
)

// Props returns the props of a shell actor. Each call makes a new actor
// identity: the queue of waiting calls lives outside the actor instance so it
// survives restarts, and must not be shared between two spawns.
func Props(opts Options, extra ...actor.PropsOption) *actor.Props {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Reaper == nil {
		opts.Reaper = &ptyproc.Reaper{}
	}
	k := &kept{idle: newCollector(opts.Config.MaxOutputChars)}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{opts: opts, kept: k}
	}, extra...)
}

// Actor owns one persistent bash. See the package documentation.
type Actor struct {
	opts Options
	kept *kept
	send func(any) // to self, from any goroutine

	proc   *ptyproc.Process
	proto  protocol
	stream inband.Stream // markers out of the output
	bash   bashState
	// waiting is a command left waiting for input by an earlier call.
	waiting *waitingCommand

	cur *call
	ex  exchange
	gen uint64 // numbers exchanges; a Flushed or Probe of another is stale

	// wait decides when to look at /proc and when a wait for input is
	// proven; see package waitproof.
	wait      *waitproof.Tracker
	callTimer *time.Timer
	timedCall atomic.Pointer[call] // the call callTimer was armed for
	stepTimer *time.Timer
	stepN     uint64 // numbers step timers; only the newest counts
	// lookTimer brings a later look within the exchange: a marker's probe
	// taken again (reprobe), or another look for a reader that took the
	// line (lineAnswered). See lookAgain.
	lookTimer *time.Timer
	// withdrawTimer escalates against a withdrawn call's command (see
	// withdraw.go).
	withdrawTimer *time.Timer
	// exiting is the Exited of a shell whose last output is settling.
	exiting *ptyproc.Exited
	// io is bash's read counter (see readShort).
	io *procfs.IOCounter
	// nextDue: a call was answered; the next one starts once the message
	// that answered it is handled, unless a reset came after the answer.
	nextDue bool
	// stopping: the actor is stopping for good.
	stopping bool
}

// exitSettled: bash exited exitSettle ago.
type exitSettled struct{ exited *ptyproc.Exited }

// exitSettle is how long output may trail a shell's exit.
const exitSettle = 3 * time.Millisecond

// probeTag marks the actor's own probes (not the tracker's).
type probeTag struct{ gen uint64 }

// Receive handles the actor's messages. It never blocks: writes that the
// terminal cannot take at once go to ptyproc's writer, and a shell that is
// thrown away is killed by the reaper.
func (a *Actor) Receive(ctx actor.Context) {
	if c := a.cur; c != nil && c.timingOut && !a.drainingMessage(ctx) {
		return
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		root, self := ctx.ActorSystem().Root, ctx.Self()
		a.send = func(msg any) { root.Send(self, msg) }
		a.wait = waitproof.New(a.send)
		a.pump(ctx)
	case *actor.Restarting:
		a.teardown()
		if c := a.cur; c != nil {
			// A failure that was not a reset (a bug): the call cannot be
			// finished, but its caller must not wait for nothing.
			a.cur = nil
			c.ticket.Leave()
			ctx.Send(c.sender, messages.ErrorResult(c.id, ToolName,
				"bash: internal error: the shell actor failed and was restarted; the next call starts a fresh shell"))
		}
	case *actor.Stopping:
		a.stopping = true
		a.teardown()
		a.failAll(ctx, "the shell was stopped because its agent is stopping")
	case *actor.Stopped, *actor.ReceiveTimeout:
	case *Run:
		a.kept.queue = append(a.kept.queue, &call{id: m.CallID, sender: ctx.Sender(), args: m.Args})
		a.pump(ctx)
	case *Cancel:
		a.cancel(ctx, m.CallID)
	case *ptyproc.Output:
		if m.Proc == a.proc {
			a.output(ctx, m.Data)
		}
		m.Release()
	case *ptyproc.Flushed:
		if m.Proc == a.proc && m.Tag == a.ex.gen {
			a.flushed()
		}
	case *ptyproc.OutputClosed:
		// bash still holds the terminal until it exits; Exited follows.
	case *ptyproc.Exited:
		if m.Proc == a.proc {
			// What the session's last processes wrote may still be on its
			// way through the terminal (the kernel moves it on from a work
			// queue): let it arrive before the shell is thrown away.
			send := a.send
			a.exiting = m
			time.AfterFunc(exitSettle, func() { send(&exitSettled{m}) })
		}
	case *exitSettled:
		if m.exited.Proc == a.proc && a.exiting == m.exited {
			a.exiting = nil
			// Asked again now: a line typed after bash had died (before its
			// exit was seen) is still unread.
			a.shellExited(ctx, m.exited.Status, m.exited.InputPending || a.proc.InputPending())
			a.pump(ctx)
		}
	case *drained:
		a.endTimeout(ctx, m.c)
	case *oldShellGone:
		if a.kept.oldShell == m.gone {
			a.kept.oldShell = nil
			if c := a.cur; c != nil && c.admitted && a.proc == nil && a.exiting == nil {
				a.run(ctx, c)
			}
		}
	case *ptyproc.Probe:
		if t, ok := m.Tag.(timeoutProbe); ok {
			if m.Proc == a.proc {
				a.timeoutProbed(ctx, t, m)
			}
		} else if t, ok := m.Tag.(withdrawProbe); ok {
			if m.Proc == a.proc {
				a.interruptWithdrawn(t, m)
			}
		} else if t, ok := m.Tag.(writersProbe); ok {
			if m.Proc == a.proc {
				a.writersProbed(ctx, t, m)
			}
		} else if m.Proc == a.proc {
			a.probed(ctx, m)
		}
	case *waitproof.Tick:
		a.wait.Tick(m)
	case *tick:
		a.ticked(ctx, m)
	case *withdrawnTick:
		a.withdrawnStep(ctx, m)
	case *withdrawRecheck:
		a.rechecked(m)
	case *Peek:
		a.peek(ctx, m)
	case *admitted:
		if c := m.c; c.ticket == m.t && !c.admitted {
			c.admitted = true
			if a.cur == c && a.exiting == nil {
				a.run(ctx, c)
			} // else pump starts it once the dead shell's output has settled
		}
	default:
		a.opts.Logger.Warn("shell: unexpected message", "type", fmt.Sprintf("%T", m))
	}
	// Not deferred: a reset panics past this, and the next call starts in
	// the fresh instance instead of being typed into the shell being reset.
	for a.nextDue { // a call that ends at once (its shell cannot start) lets the next one go
		a.nextDue = false
		a.pump(ctx)
	}
}

// oldShellGone: the session of the shell thrown away last is gone.
type oldShellGone struct{ gone chan struct{} }

// drainingMessage reports whether the message is one to handle while the
// call's last output is drained after its time ran out: its output, the
// drain's own looks, the shell's exit, calls and cancels to queue or note,
// the actor's lifecycle. Anything else about the call (markers' proofs, its
// timers) would decide it a second time, and is dropped.
func (a *Actor) drainingMessage(ctx actor.Context) bool {
	switch m := ctx.Message().(type) {
	case *ptyproc.Output:
		return true
	case *ptyproc.Probe:
		_, ok := m.Tag.(timeoutProbe)
		return ok
	case *drained, *ptyproc.Exited, *exitSettled, *ptyproc.OutputClosed, *Run, *Cancel, *Peek, *oldShellGone,
		*actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return true
	}
	return false
}

// pump starts the next queued call when none is running.
func (a *Actor) pump(ctx actor.Context) {
	if a.cur != nil || len(a.kept.queue) == 0 || a.exiting != nil {
		return // (a dead shell's last output settling: the call waits for a fresh one)
	}
	c := a.kept.queue[0]
	a.kept.queue = a.kept.queue[1:]
	a.cur = c
	if c.deadline.IsZero() {
		c.timeout = c.args.timeout(a.opts.Config)
		c.deadline = time.Now().Add(c.timeout)
		c.before = newCollector(a.opts.Config.MaxOutputChars)
		c.out = a.newOut()
	}
	a.armCallTimer(c)
	if c.ticket == nil && !c.admitted {
		// One ticket a call, kept when the call is put back after a reset.
		send := a.send
		c.ticket, c.admitted = a.opts.Gate.Enter(func(t *admission.Ticket) { send(&admitted{c: c, t: t}) })
	}
	if !c.admitted {
		return // the gate is full: admitted comes when the call's turn does
	}
	a.run(ctx, c)
}

// newOut is the collector of a call's output: its head and its end, or its
// head only (bash.keepHeadOnly).
func (a *Actor) newOut() collector {
	if a.opts.Config.KeepHeadOnly {
		return newCollector(a.opts.Config.MaxOutputChars)
	}
	return newEndsCollector(a.opts.Config.MaxOutputChars)
}

// passNotesOn keeps what call c was to be told about its shell (it died
// meanwhile, say) for the next call, since c ends without running.
func (a *Actor) passNotesOn(c *call) {
	if len(c.notes) > 0 {
		a.kept.note = strings.Join(append(c.notes, a.kept.note), "\n")
		a.kept.note = strings.TrimSuffix(a.kept.note, "\n")
		c.notes = nil
	}
}

// admitted: the gate let call c in with ticket t.
type admitted struct {
	c *call
	t *admission.Ticket
}

// run starts call c, admitted: in a shell started for it, or in the
// running one.
func (a *Actor) run(ctx actor.Context, c *call) {
	a.takeWithdrawn(c)
	if a.kept.note != "" {
		c.notes = append(c.notes, a.kept.note)
		a.kept.note = ""
	}
	if a.proc == nil {
		if g := a.kept.oldShell; g != nil {
			select {
			case <-g:
				a.kept.oldShell = nil
			default:
				return // oldShellGone starts it
			}
		}
		if err := a.startShell(); err != nil {
			a.finish(ctx, c, Result{Text: fmt.Sprintf("bash: could not start the shell: %v", err), IsError: true})
			return
		}
		c.fresh = true
		// The command's time starts now: making the agent's sandbox and
		// starting bash are the runtime's, not the command's.
		c.deadline = time.Now().Add(c.timeout)
		a.armCallTimer(c)
		a.startLine(0)
		return
	}
	a.next(ctx)
}

// next starts the call's next exchange: the status query when the prompt
// state changed, then stopping a command left waiting, then the text's next
// line.
func (a *Actor) next(ctx actor.Context) {
	switch {
	case a.bash.needQuery:
		a.bash.needQuery = false
		a.query(false)
	case a.waiting != nil:
		a.beginInterrupt(ctx)
	default:
		a.typeNext(ctx)
	}
}

// begin opens a new exchange.
func (a *Actor) begin(s step) *exchange {
	a.gen++
	a.ex = exchange{step: s, gen: a.gen}
	a.wait.Stop()
	a.stopTimer(&a.stepTimer)
	a.stopTimer(&a.lookTimer)
	return &a.ex
}

// write starts an exchange that types data: the reader delivers what came
// before, then Flushed, then writes.
func (a *Actor) write(s step, data []byte) *exchange {
	ex := a.begin(s)
	a.proc.FlushThenWrite(ex.gen, data, true)
	return ex
}

// flushed: everything before the exchange's write has been delivered.
func (a *Actor) flushed() {
	a.ex.flushed = true
	if c := a.cur; c != nil && a.ex.step == stepText && !c.begun {
		// What came before the text is the output since the previous call,
		// in whole lines: a line cut by the flush goes on in the call's own
		// output, so the bytes stay in order.
		c.begun = true
		before, partial := a.kept.idle.splitLastLine()
		if a.kept.idleEnded {
			before, partial = a.kept.idle, nil
		}
		c.before.add(before) // after what an earlier start of this call kept
		a.kept.idle, a.kept.idleEnded = newCollector(a.opts.Config.MaxOutputChars), false
		c.out.write(partial)
	}
	a.wait.Start(a.proc)
}

// output routes program output around the markers in it.
func (a *Actor) output(ctx actor.Context, data []byte) {
	a.wait.Output()
	a.stream.Feed(data, a.sink, func(body, raw []byte) bool {
		a.marker(ctx, a.proto.parseMarker(body), raw)
		return a.proc != nil // a marker that ended this shell ends the chunk
	})
}

// sink files output under whatever is going on.
func (a *Actor) sink(b []byte) {
	c := a.cur
	switch {
	case len(b) == 0:
	case !a.bash.started:
		// Start-up noise: bash's own first prompt.
	case c != nil && c.begun:
		c.out.write(b)
		c.latest.note(b)
		c.redraws.note(b)
	default:
		// Before the call's text: background output, the last words of a
		// command being interrupted.
		a.kept.idle.write(b)
	}
}

// flushCarry hands the bytes the marker stream holds back (what may be the
// start of a marker) to the output: the call ends without one coming.
func (a *Actor) flushCarry() {
	if b := a.stream.Carry(); len(b) > 0 {
		a.sink(b)
	}
}

// finish answers c; the next call starts when the current message is handled.
func (a *Actor) finish(ctx actor.Context, c *call, r Result) {
	if c.withdrawn {
		// What this call carried of calls withdrawn before it goes on to
		// the next one, ahead of its own.
		a.passWithdrawn(c)
		a.keepWithdrawn(withdrawnHeading(c, r), r.Text)
	} else {
		ctx.Send(c.sender, &messages.ToolResult{
			CallId:  c.id,
			Tool:    ToolName,
			Text:    r.Text,
			IsError: r.IsError,
			Data:    r.Data(),
		})
		a.kept.last = &answer{id: c.id, text: r.Text}
	}
	c.ticket.Leave()
	a.cur = nil
	a.begin(stepText) // the exchange is over; its late messages are stale
	// The call timer stays armed: re-armed later for the next call, it wakes
	// nobody, while a timer added anew wakes the runtime's poller thread.
	// It names no call meanwhile, so it keeps no finished call's output.
	a.timedCall.Store(nil)
	a.nextDue = true
}

// reset throws the shell away and fails the actor so that its supervisor
// restarts it. requeue, if set, is a call to run first after the restart.
func (a *Actor) reset(reason ResetReason, detail string, requeue *call) {
	if requeue != nil && requeue.withdrawn {
		// Nobody waits for it: it is not run again in the fresh shell.
		a.cur = nil
		requeue.ticket.Leave()
		a.passWithdrawn(requeue)
		a.keepWithdrawn("[the previous call was cancelled by its caller before its command was typed, so it did not run:]", strings.Join(requeue.notes, "\n"))
		requeue = nil
	}
	if requeue != nil {
		a.cur = nil
		a.kept.queue = append([]*call{requeue}, a.kept.queue...)
	}
	a.teardown()
	panic(&ResetError{Reason: reason, Detail: detail})
}

// teardown stops every timer and hands the shell to the reaper, which kills
// its whole session in the background.
func (a *Actor) teardown() {
	a.exiting = nil
	a.nextDue = false // this instance starts nothing more
	if a.wait != nil {
		a.wait.Stop()
	}
	a.stopTimer(&a.callTimer)
	a.stopTimer(&a.stepTimer)
	a.stopTimer(&a.lookTimer)
	a.stopTimer(&a.withdrawTimer)
	if a.proc != nil {
		// The next shell starts once this one's session is gone: a server
		// the old one ran must not answer the new one's commands.
		gone, send, stopping := make(chan struct{}), a.send, a.stopping
		a.kept.oldShell = gone
		a.opts.Reaper.CloseThen(a.proc, func() {
			close(gone)
			if !stopping { // (a stopped actor would make it a dead letter)
				send(&oldShellGone{gone})
			}
		})
		if a.io != nil {
			a.io.Close()
			a.io = nil
		}
		a.proc = nil
		a.kept.idleEnded = !a.kept.idle.empty()
	}
	a.stream.Reset()
	a.waiting = nil
}

// failAll answers every call with an error; used when the actor stops.
func (a *Actor) failAll(ctx actor.Context, why string) {
	calls := a.kept.queue
	if a.cur != nil {
		calls = append([]*call{a.cur}, calls...)
	}
	a.cur, a.kept.queue = nil, nil
	for _, c := range calls {
		c.ticket.Leave()
		ctx.Send(c.sender, messages.ErrorResult(c.id, ToolName, "bash: "+why))
	}
}

func (a *Actor) cancel(ctx actor.Context, id string) {
	if c := a.cur; c != nil && c.id == id {
		if !c.admitted {
			a.cur = nil
			c.ticket.Leave()
			a.passNotesOn(c)
			a.pump(ctx) // nothing was typed
			return
		}
		a.withdraw(c)
		return
	}
	for i, c := range a.kept.queue {
		if c.id == id {
			a.kept.queue = append(a.kept.queue[:i], a.kept.queue[i+1:]...)
			return
		}
	}
	if l := a.kept.last; l != nil && l.id == id {
		// Answered just as its caller gave up: the answer reached nobody.
		a.kept.last = nil
		a.keepWithdrawn("[the previous call's answer did not reach its caller (it gave up as the answer came); here it is again:]", l.text)
	}
}
