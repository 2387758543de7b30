package shell

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/inband"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/waitproof"
	"github.com/dsh-actors/dsh-actors/messages"
)

// Run asks the shell actor to run one bash call. The answer, a
// *messages.ToolResult, goes to the message's sender.
type Run struct {
	CallID string
	Args   Args
}

// Cancel withdraws a call. A running call resets the shell and is not
// answered; a queued one is dropped.
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
}

// Timings of the wait proof and of the interrupt sequence.
const (
	// escalateAfter: after SIGINT (or EOF), a program that is proven waiting
	// again this long after the signal is taken not to have stopped.
	escalateAfter = 50 * time.Millisecond
	// stepTimeout: a step of the interrupt sequence that neither ends the
	// command nor shows it waiting moves on to the next step after this long.
	stepTimeout = 2 * time.Second
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
	k := &kept{}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Actor{opts: opts, kept: k}
	}, extra...)
}

// kept is the state that outlives one actor instance: calls waiting their
// turn and what the next call must be told.
type kept struct {
	queue []*call
	note  string
}

// Actor owns one persistent bash. See the package documentation.
type Actor struct {
	opts Options
	kept *kept
	send func(any) // to self, from any goroutine

	proc    *ptyproc.Process
	proto   protocol
	ready   bool          // the init line's marker has been seen
	seq     uint64        // last sequence number written
	stream  inband.Stream // markers out of the output
	idle    collector
	waiting *waitingCommand // a command left waiting for input

	cur *call
	// wait decides when to look at /proc and when a wait for input is
	// proven; see package waitproof.
	wait      *waitproof.Tracker
	callTimer *time.Timer
	timedCall atomic.Pointer[call] // the call callTimer was armed for
	stepTimer *time.Timer
}

// call is one Run from receipt to answer.
type call struct {
	id       string
	sender   *actor.PID
	args     Args
	deadline time.Time // set when it first starts running
	timeout  time.Duration
	seq      uint64 // its command line's sequence number, once written
	running  bool   // its command line was written
	fresh    bool
	// beginTries counts the begins put off while a chunk was handed over;
	// begun is set once the call went past that point, so that a retry
	// still on its way can never write the command a second time.
	beginTries int
	begun      bool
	notes      []string
	before     collector // output since the previous call
	out        collector
	proto      protocol
	intr       *interrupt
}

// interrupt is the state of stopping a command that waits for input before
// the call's own command can run.
type interrupt struct {
	seq    uint64
	who    string
	step   int // 0: SIGINT sent, 1: EOF sent
	stepAt time.Time
	n      uint64
}

type waitingCommand struct {
	seq uint64
	who string
}

type tickKind int

const (
	tickTimeout tickKind = iota
	tickStep
)

type tick struct {
	kind tickKind
	c    *call
	n    uint64
}

// Receive handles the actor's messages. It never blocks: writes that the
// terminal cannot take at once go to ptyproc's writer, and a shell that is
// thrown away is killed by the reaper.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		root, self := ctx.ActorSystem().Root, ctx.Self()
		a.send = func(msg any) { root.Send(self, msg) }
		a.wait = waitproof.New(a.send)
		a.idle = newCollector(a.opts.Config.MaxOutputChars)
		a.pump(ctx)
	case *actor.Restarting:
		a.teardown()
		if c := a.cur; c != nil {
			// A failure that was not a reset (a bug): the call cannot be
			// finished, but its caller must not wait for nothing.
			a.cur = nil
			ctx.Send(c.sender, &messages.ToolResult{CallId: c.id, Tool: ToolName, IsError: true,
				Text: "bash: internal error: the shell actor failed and was restarted; the next call starts a fresh shell"})
		}
	case *actor.Stopping:
		a.teardown()
		a.failAll(ctx, "the shell was stopped because its agent is stopping")
	case *actor.Stopped, *actor.ReceiveTimeout:
	case *Run:
		a.kept.queue = append(a.kept.queue, &call{id: m.CallID, sender: ctx.Sender(), args: m.Args})
		a.pump(ctx)
	case *beginCall:
		if m.c == a.cur {
			a.begin(ctx, m.c, m.retry)
		}
	case *Cancel:
		a.cancel(ctx, m.CallID)
	case *ptyproc.Output:
		if m.Proc == a.proc {
			a.output(ctx, m.Data)
		}
		m.Release()
	case *ptyproc.OutputClosed:
		// bash still holds the terminal until it exits; Exited follows.
	case *ptyproc.Exited:
		if m.Proc == a.proc {
			a.shellExited(ctx, m.Status, m.InputPending)
		}
	case *ptyproc.Probe:
		if m.Proc == a.proc {
			a.probed(ctx, m)
		}
	case *waitproof.Tick:
		a.wait.Tick(m)
	case *tick:
		a.ticked(ctx, m)
	default:
		a.opts.Logger.Warn("shell: unexpected message", "type", fmt.Sprintf("%T", m))
	}
}

// pump starts the next queued call when none is running.
func (a *Actor) pump(ctx actor.Context) {
	if a.cur != nil || len(a.kept.queue) == 0 {
		return
	}
	c := a.kept.queue[0]
	a.kept.queue = a.kept.queue[1:]
	a.cur = c
	if c.deadline.IsZero() {
		c.timeout = c.args.timeout(a.opts.Config)
		c.deadline = time.Now().Add(c.timeout)
		c.before = newCollector(a.opts.Config.MaxOutputChars)
		c.out = newCollector(a.opts.Config.MaxOutputChars)
	}
	a.armCallTimer(c)
	if a.kept.note != "" {
		c.notes = append(c.notes, a.kept.note)
		a.kept.note = ""
	}
	// Chunks the reader has already queued in this mailbox are older than
	// anything still in the kernel: begin behind them, so that what
	// background jobs printed before this call is filed before it, in order.
	a.send(&beginCall{c: c})
}

// maxBeginTries bounds how often a call waits for a chunk being handed over.
const maxBeginTries = 100

// beginCall starts a call once the output queued before it has landed.
// A retry is one that ReadPendingOr asked for; it is void once the call
// went on without it.
type beginCall struct {
	c     *call
	retry bool
}

// begin starts c: what background jobs printed before it goes before it,
// then a command left waiting for input is interrupted, or c's command runs.
func (a *Actor) begin(ctx actor.Context, c *call, retry bool) {
	switch {
	case !retry:
		c.begun, c.beginTries = false, 0
	case c.begun:
		return // left behind by an attempt that went on without it
	}
	if a.proc != nil {
		c.proto = a.proto // to recognise our own lines in what comes before
		// While a chunk is being handed over, begin again once it has been:
		// it then lands ahead of this call, in the output before it.
		// (A flood that keeps the reader busy cannot hold the call back for
		// long: after maxBeginTries it starts anyway.)
		b, ok := a.proc.ReadPendingOr(func() { a.send(&beginCall{c: c, retry: true}) })
		if !ok && c.beginTries < maxBeginTries {
			c.beginTries++
			return
		}
		if len(b) > 0 {
			a.output(ctx, b)
		}
	}
	c.begun = true
	if !a.idle.empty() {
		c.before = a.idle
		a.idle = newCollector(a.opts.Config.MaxOutputChars)
	}
	if a.waiting != nil {
		a.beginInterrupt(ctx, c)
		return
	}
	a.runCommand(ctx, c)
}

// runCommand writes c's command line, starting a shell first if there is none.
func (a *Actor) runCommand(ctx actor.Context, c *call) {
	if a.proc == nil {
		if err := a.startShell(); err != nil {
			a.finish(ctx, c, Result{
				Text:    fmt.Sprintf("bash: could not start the shell: %v", err),
				IsError: true,
			})
			return
		}
		c.fresh = true
	}
	if changed, err := a.proc.RestoreModes(); changed || err != nil {
		a.opts.Logger.Debug("shell: terminal modes restored", "err", err)
	}
	a.seq++
	c.seq = a.seq
	c.running = true
	c.proto = a.proto
	a.proc.Write(a.proto.commandLine(c.seq, normalizeNewlines(c.args.Command)))
	a.wait.Start(a.proc)
}

// normalizeNewlines turns CRLF into LF, as a terminal's ICRNL would for typed
// text; a lone CR is left alone.
func normalizeNewlines(s string) string {
	if strings.Contains(s, "\r\n") {
		return strings.ReplaceAll(s, "\r\n", "\n")
	}
	return s
}

func (a *Actor) startShell() error {
	bash := a.opts.Bash
	if bash == "" {
		bash = "bash"
	}
	a.proto = newProtocol()
	a.stream = inband.Stream{Scanner: a.proto.scan}
	a.ready = false
	proc, err := ptyproc.Start(ptyproc.Options{
		Path: bash,
		Args: []string{"--norc", "--noprofile", "--noediting", "-i"},
		Env:  shellEnv(a.opts.Env),
		Dir:  a.opts.Dir,
		Cols: shellCols,
		Rows: shellRows,
	}, a.send)
	if err != nil {
		return err
	}
	a.proc = proc
	proc.Write(a.proto.initLine())
	return nil
}

// shellEnv is the base environment without what would change bash's prompt
// or start-up, plus what makes programs behave for a reader that is not a
// human at a screen.
func shellEnv(base []string) []string {
	if base == nil {
		base = os.Environ()
	}
	drop := map[string]bool{
		"PROMPT_COMMAND": true, "PS0": true, "PS1": true, "PS2": true, "PS4": true,
		"BASH_ENV": true, "ENV": true, "HISTFILE": true, "TERM": true,
		"PAGER": true, "GIT_PAGER": true, "SHELLOPTS": true, "BASHOPTS": true,
		"TMOUT": true, // an inherited idle timeout would log the shell out between calls
	}
	env := make([]string, 0, len(base)+8)
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[name] {
			env = append(env, kv)
		}
	}
	// PS1, PS2 and PROMPT_COMMAND are set by the init line as shell
	// variables, not exported, so programs and nested shells do not inherit
	// them.
	return append(env, "TERM=dumb", "PAGER=cat", "GIT_PAGER=cat")
}

// output routes program output around the markers in it.
func (a *Actor) output(ctx actor.Context, data []byte) {
	a.wait.Output()
	a.stream.Feed(data, a.sink, func(body []byte) bool {
		m, _ := parseMarkerBody(body)
		a.marker(ctx, m)
		return a.proc != nil // a marker that ended this shell ends the chunk
	})
}

// sink files output under whatever is going on.
func (a *Actor) sink(b []byte) {
	switch c := a.cur; {
	case len(b) == 0:
	case !a.ready:
		// Start-up noise before the init line's marker.
	case c != nil && c.running:
		c.out.write(b)
	case c != nil:
		c.before.write(b) // the interrupted command's last words
	default:
		a.idle.write(b)
	}
}

func (a *Actor) marker(ctx actor.Context, m marker) {
	if !a.ready {
		a.ready = true
		return
	}
	c := a.cur
	switch {
	case c != nil && c.running && m.hasSeq && m.seq == c.seq:
		r := Result{ExitCode: &m.status, FreshShell: c.fresh}
		var trailer []string
		if m.status != 0 {
			trailer = append(trailer, fmt.Sprintf("[exit code: %d]", m.status))
		}
		a.finish(ctx, c, a.render(c, &r, trailer))
	case c != nil && c.intr != nil && m.hasSeq && m.seq == c.intr.seq:
		c.notes = append(c.notes, fmt.Sprintf("[it stopped with status %d]", m.status))
		a.waiting = nil
		c.intr = nil
		a.stopTimer(&a.stepTimer)
		a.runCommand(ctx, c)
	case c == nil && a.waiting != nil && m.hasSeq && m.seq == a.waiting.seq:
		a.idle.write([]byte(fmt.Sprintf("[the command that was waiting for input ended by itself with status %d]\n", m.status)))
		a.waiting = nil
	}
}

// render builds the result text: notes, output since the previous call, the
// call's output, then the trailer lines.
func (a *Actor) render(c *call, r *Result, trailer []string) Result {
	var b strings.Builder
	for _, n := range c.notes {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	if before := c.proto.stripOwnLines(c.before.text()); strings.TrimSpace(before) != "" || c.before.dropped > 0 {
		b.WriteString("[output since the previous call]\n")
		writeBlock(&b, before)
		if c.before.dropped > 0 {
			fmt.Fprintf(&b, "[%d more bytes of it were not kept]\n", c.before.dropped)
		}
		b.WriteString("[end of output since the previous call]\n")
	}
	out := c.out.text()
	if c.proto.nonce != "" {
		out = c.proto.stripOwnLines(out)
	}
	b.WriteString(out)
	if c.out.dropped > 0 {
		r.ClippedBytes = c.out.dropped
		trailer = append([]string{fmt.Sprintf(
			"[output clipped: only the first %d characters are shown; %d more bytes were not kept]",
			a.opts.Config.MaxOutputChars, c.out.dropped)}, trailer...)
	}
	if len(trailer) > 0 {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(strings.Join(trailer, "\n"))
	}
	r.Text = b.String()
	return *r
}

func writeBlock(b *strings.Builder, s string) {
	b.WriteString(s)
	if s != "" && !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

// finish answers c and lets the next call run.
func (a *Actor) finish(ctx actor.Context, c *call, r Result) {
	ctx.Send(c.sender, &messages.ToolResult{
		CallId:  c.id,
		Tool:    ToolName,
		Text:    r.Text,
		IsError: r.IsError,
		Data:    r.Data(),
	})
	a.cur = nil
	a.wait.Stop()
	// The call timer stays armed: re-armed later for the next call, it wakes
	// nobody, while a timer added anew wakes the runtime's poller thread.
	// It names no call meanwhile, so it keeps no finished call's output.
	a.timedCall.Store(nil)
	a.stopTimer(&a.stepTimer)
	a.pump(ctx)
}

const resetNotice = "[the shell was reset: the next call starts a fresh shell, so the working directory, variables, functions and background jobs are gone]"

func (a *Actor) shellExited(ctx actor.Context, st ptyproc.ExitStatus, unread bool) {
	how := "[shell exited]"
	switch {
	case st.Signal != 0:
		how = fmt.Sprintf("[shell killed by signal: %s]", ptyproc.SignalName(st.Signal))
	case st.Code >= 0:
		how = fmt.Sprintf("[shell exited: code %d]", st.Code)
	}
	c := a.cur
	switch {
	case c != nil && c.running && unread:
		// The shell ended before it read this command (it was exiting
		// already): run the command in a fresh shell instead of claiming it
		// ran.
		c.notes = append(c.notes, how[:len(how)-1]+" before it read this command; it runs in a fresh shell]")
		c.running = false
		a.reset(ResetExited, st.String(), c)
	case c != nil && c.running:
		r := Result{ShellExited: st.String(), ShellReset: true, FreshShell: c.fresh}
		a.finish(ctx, c, a.render(c, &r, []string{how, resetNotice}))
		a.reset(ResetExited, st.String(), nil)
	case c != nil:
		// The shell ended while a waiting command was being stopped: this
		// call goes on in a fresh shell.
		c.notes = append(c.notes, how[:len(how)-1]+"; this call runs in a fresh shell]")
		c.intr = nil
		a.reset(ResetExited, st.String(), c)
	default:
		a.kept.note = how[:len(how)-1] + " after the previous call; this call runs in a fresh shell]"
		a.reset(ResetExited, st.String(), nil)
	}
}

// reset throws the shell away and fails the actor so that its supervisor
// restarts it. requeue, if set, is a call to run first after the restart.
func (a *Actor) reset(reason ResetReason, detail string, requeue *call) {
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
	if a.wait != nil {
		a.wait.Stop()
	}
	a.stopTimer(&a.callTimer)
	a.stopTimer(&a.stepTimer)
	if a.proc != nil {
		a.opts.Reaper.Close(a.proc)
		a.proc = nil
	}
	a.ready = false
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
		ctx.Send(c.sender, &messages.ToolResult{CallId: c.id, Tool: ToolName, Text: "bash: " + why, IsError: true})
	}
}

func (a *Actor) cancel(ctx actor.Context, id string) {
	if c := a.cur; c != nil && c.id == id {
		a.cur = nil
		a.kept.note = "[the previous call was cancelled, which reset the shell; this call runs in a fresh shell]"
		a.reset(ResetCancelled, "call "+id, nil)
	}
	for i, c := range a.kept.queue {
		if c.id == id {
			a.kept.queue = append(a.kept.queue[:i], a.kept.queue[i+1:]...)
			return
		}
	}
}

func (a *Actor) ticked(ctx actor.Context, t *tick) {
	c := a.cur
	if c == nil || t.c != c {
		return
	}
	switch t.kind {
	case tickTimeout:
		if time.Now().Before(c.deadline) {
			return // fired for an earlier deadline as it was re-armed
		}
		r := Result{TimedOut: true, ShellReset: true, IsError: true, FreshShell: c.fresh}
		limit := ""
		if c.args.TimeoutMs > c.timeout.Milliseconds() {
			limit = fmt.Sprintf(" (the configured limit; %d ms was asked for)", c.args.TimeoutMs)
		}
		note := fmt.Sprintf("[timed out after %d ms%s: the command and its shell were killed; the next call starts a fresh shell]", c.timeout.Milliseconds(), limit)
		a.finish(ctx, c, a.render(c, &r, []string{note}))
		a.reset(ResetTimeout, fmt.Sprintf("after %v", c.timeout), nil)
	case tickStep:
		if c.intr != nil && t.n == c.intr.n {
			a.escalate(ctx, c)
		}
	}
}

func (a *Actor) probed(ctx actor.Context, p *ptyproc.Probe) {
	a.opts.Logger.Debug("shell: probe", "state", p.Wait.State, "pid", p.Wait.PID, "comm", p.Wait.Comm,
		"syscall", p.Wait.Syscall, "drained", p.Drained, "pending", p.InputPending, "err", p.Err)
	verdict, w := a.wait.Probe(p)
	c := a.cur
	if verdict != waitproof.Waiting || c == nil {
		return
	}
	who := describeWaiter(w)
	switch {
	case c.running:
		a.waiting = &waitingCommand{seq: c.seq, who: who}
		r := Result{WaitingForInput: true, FreshShell: c.fresh}
		note := fmt.Sprintf("[waiting for input: %s is blocked reading the terminal, so this call returned early with the output so far. "+
			"Interactive programs belong in a terminal (terminal_open). The next bash call will first interrupt it with SIGINT.]", who)
		a.finish(ctx, c, a.render(c, &r, []string{note}))
	case c.intr != nil && time.Since(c.intr.stepAt) >= escalateAfter:
		a.escalate(ctx, c)
	default:
		a.wait.Again()
	}
}

func describeWaiter(w procfs.Wait) string {
	if w.Comm == "" {
		return "the command"
	}
	return fmt.Sprintf("`%s` (pid %d)", w.Comm, w.PID)
}

// beginInterrupt starts stopping the command left waiting for input.
func (a *Actor) beginInterrupt(ctx actor.Context, c *call) {
	w := a.waiting
	c.intr = &interrupt{seq: w.seq, who: w.who, stepAt: time.Now()}
	if err := a.proc.Signal(syscall.SIGINT); err != nil {
		c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, was still waiting for input and could not be interrupted (%v), so the shell was reset; this call runs in a fresh shell]", w.who, err))
		c.intr = nil
		a.reset(ResetBroken, err.Error(), c)
		return
	}
	c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, was still waiting for input: sent it SIGINT]", w.who))
	a.armStep(c)
	a.wait.Start(a.proc)
}

// escalate moves the interrupt sequence on: SIGINT, then end-of-file, then a
// fresh shell.
func (a *Actor) escalate(ctx actor.Context, c *call) {
	in := c.intr
	switch in.step {
	case 0:
		in.step = 1
		in.stepAt = time.Now()
		c.notes = append(c.notes, "[it kept waiting after SIGINT: sent end-of-file (Ctrl-D)]")
		a.proc.Write([]byte{4})
		a.armStep(c)
		a.wait.Start(a.proc)
	default:
		c.notes = append(c.notes, "[it kept waiting after end-of-file too, so the shell was reset; this call runs in a fresh shell]")
		c.intr = nil
		a.reset(ResetStuck, in.who, c)
	}
}

// armCallTimer sets the one call timer of this actor to c's deadline. The
// timer names the call armed last when it fires; ticked ignores a firing
// before that call's deadline (one that raced with the re-arming).
func (a *Actor) armCallTimer(c *call) {
	a.timedCall.Store(c)
	if a.callTimer != nil {
		a.callTimer.Reset(time.Until(c.deadline))
		return
	}
	armed, send := &a.timedCall, a.send
	a.callTimer = time.AfterFunc(time.Until(c.deadline), func() {
		send(&tick{kind: tickTimeout, c: armed.Load()})
	})
}

func (a *Actor) armStep(c *call) {
	a.stopTimer(&a.stepTimer)
	c.intr.n++
	t, send := &tick{kind: tickStep, c: c, n: c.intr.n}, a.send
	a.stepTimer = time.AfterFunc(stepTimeout, func() { send(t) })
}

func (a *Actor) stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}
