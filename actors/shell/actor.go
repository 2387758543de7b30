package shell

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
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

	proc   *ptyproc.Process
	proto  protocol
	stream inband.Stream // markers out of the output
	bash   bashState
	idle   collector
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
}

// bashState is what the actor knows of its bash.
type bashState struct {
	// started: the start-up lines are done.
	started bool
	// sigs are bash's own reads of its input, learned at start-up.
	sigs promptSigs
	// learn: the readline layout of this binary is learned at start-up;
	// binary names it in the layouts cache.
	learn  bool
	binary string
	// seq is bash's command number at the last proven prompt; seqKnown is
	// false while a fallback runs the calls.
	seq      uint64
	seqKnown bool
	// readline: bash was last seen reading with readline (set -o vi/emacs).
	readline bool
	// ps1Stuck: bash's prompt cannot carry the marker (PS1 read-only, or
	// stderr is not the terminal): every call ends with a status query.
	ps1Stuck bool
	// ps2Foreign: PS2 cannot be made ours: text goes as one eval line.
	ps2Foreign bool
	// needQuery: a command changed the prompt state; query before the
	// next text.
	needQuery bool
}

// step is what an exchange with bash is for.
type step int

const (
	stepStart     step = iota // one of the start-up lines
	stepQuery                 // the status query line
	stepInterrupt             // stopping a command left waiting for input
	stepText                  // the call's command text
	stepCancel                // cancelling incomplete text with SIGINT
)

// exchange is one thing written (or signalled) to bash and the wait for
// bash to come back to its prompt.
type exchange struct {
	step step
	gen  uint64
	// flushed: everything delivered from now on came after the write.
	flushed bool
	// ps1 and query are the markers seen since, and not voided: a probe
	// that finds bash busy after them proves that they came from a command.
	ps1   []marker
	query []marker
	// last is the kind of the last prompt marker seen (PS1 or PS2).
	last markerKind
	ps2  int // continuation prompts
	// lines is how many newlines the text typed holds.
	lines int
	// multi: the text went as several lines.
	multi bool
	// forCall: a query whose status is the call's.
	forCall bool
	// startLine: which start-up line.
	startLine int
	// cancelMark is the length of the call's output when SIGINT was sent.
	cancelMark int
	// intr is the state of an interrupt sequence.
	intr *interrupt
	// reprobes counts the probes of ours taken again.
	reprobes int
}

// call is one Run from receipt to answer.
type call struct {
	id       string
	sender   *actor.PID
	args     Args
	deadline time.Time // set when it first starts running
	timeout  time.Duration
	fresh    bool
	notes    []string
	before   collector // output since the previous call
	out      collector
	// incomplete: the text was cancelled as incomplete.
	incomplete bool
}

// interrupt is the state of stopping a command that waits for input before
// the call's own command can run.
type interrupt struct {
	who    string
	step   int // 0: SIGINT, 1: end-of-file, 2: SIGTERM, 3: SIGKILL
	stepAt time.Time
	n      uint64
}

type waitingCommand struct {
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

// probeTag marks the actor's own probes (not the tracker's).
type probeTag struct{ gen uint64 }

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
	case *Cancel:
		a.cancel(ctx, m.CallID)
	case *ptyproc.Output:
		if m.Proc == a.proc {
			a.output(ctx, m.Data)
		}
		m.Release()
	case *ptyproc.Flushed:
		if m.Proc == a.proc && m.Tag == a.ex.gen {
			a.flushed(ctx)
		}
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
	if a.proc == nil {
		if err := a.startShell(); err != nil {
			a.finish(ctx, c, Result{Text: fmt.Sprintf("bash: could not start the shell: %v", err), IsError: true})
			return
		}
		c.fresh = true
		a.startLine(0)
		return
	}
	a.next(ctx)
}

// next starts the call's next exchange: the status query when the prompt
// state changed, then stopping a command left waiting, then the text.
func (a *Actor) next(ctx actor.Context) {
	switch {
	case a.bash.needQuery:
		a.bash.needQuery = false
		a.query(false)
	case a.waiting != nil:
		a.beginInterrupt(ctx)
	default:
		a.text()
	}
}

// begin opens a new exchange.
func (a *Actor) begin(s step) *exchange {
	a.gen++
	a.ex = exchange{step: s, gen: a.gen}
	a.wait.Stop()
	a.stopTimer(&a.stepTimer)
	return &a.ex
}

// write starts an exchange that types data: the reader delivers what came
// before, then Flushed, then writes.
func (a *Actor) write(s step, data []byte) *exchange {
	ex := a.begin(s)
	a.proc.FlushThenWrite(ex.gen, data, true)
	return ex
}

func (a *Actor) startLine(i int) {
	ex := a.write(stepStart, a.proto.initLines(a.bash.learn, a.opts.Config.HostHistory)[i])
	ex.startLine = i
	a.armStep(startTimeout)
}

func (a *Actor) text() {
	c := a.cur
	var typed []byte
	lines := 1
	if a.bash.ps2Foreign {
		typed = evalLine(normalizeNewlines(c.args.Command))
	} else {
		typed, lines = frame(c.args.Command, a.bash.readline)
	}
	ex := a.write(stepText, typed)
	ex.lines = lines
	ex.multi = lines > 1
}

func (a *Actor) query(forCall bool) {
	ex := a.write(stepQuery, a.proto.queryLine(a.bash.ps2Foreign))
	ex.forCall = forCall
}

// flushed: everything before the exchange's write has been delivered.
func (a *Actor) flushed(ctx actor.Context) {
	a.ex.flushed = true
	if a.ex.step == stepText {
		c := a.cur
		// What came before the text is the output since the previous call,
		// in whole lines: a line cut by the flush goes on in the call's own
		// output, so the bytes stay in order.
		before, partial := a.idle.splitLastLine()
		c.before = before
		a.idle = newCollector(a.opts.Config.MaxOutputChars)
		c.out.write(partial)
	}
	a.wait.Start(a.proc)
}

func (a *Actor) startShell() error {
	bash := a.opts.Bash
	if bash == "" {
		bash = "bash"
	}
	a.bash = bashState{learn: true}
	a.waiting = nil
	path, err := exec.LookPath(bash)
	if err != nil {
		return fmt.Errorf("program %q: %w", bash, err)
	}
	if key, ok := binaryKey(path); ok {
		a.bash.binary = key
		_, known := layouts.Load(key)
		a.bash.learn = !known
	}
	env, err := shellEnv(a.opts.Env, a.opts.Config)
	if err != nil {
		return err
	}
	proc, err := ptyproc.Start(ptyproc.Options{
		Path:    path,
		Args:    []string{"--norc", "--noprofile", "--noediting", "-i"},
		Env:     env,
		Dir:     a.opts.Dir,
		Cols:    shellCols,
		Rows:    shellRows,
		Literal: true,
	}, a.send)
	if err != nil {
		return err
	}
	a.proc = proc
	a.proto = newProtocol(proc.TTYName())
	a.stream = inband.Stream{Scanner: a.proto.scan}
	return nil
}

// shellEnv is the base environment without what would change bash's prompt,
// start-up or history, plus what makes programs behave for a reader that is
// not a human at a screen.
func shellEnv(base []string, cfg Config) ([]string, error) {
	if base == nil {
		base = os.Environ()
	}
	drop := map[string]bool{
		"PROMPT_COMMAND": true, "PS0": true, "PS1": true, "PS2": true, "PS4": true,
		"BASH_ENV": true, "ENV": true, "HISTFILE": true, "TERM": true, "INPUTRC": true,
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
	// PS1 and PS2 are set by the start-up line as shell variables, not
	// exported, so programs and nested shells do not inherit them.
	// Activation scripts that would rewrite PS1 are asked not to.
	env = append(env, "TERM=dumb", "PAGER=cat", "GIT_PAGER=cat",
		"VIRTUAL_ENV_DISABLE_PROMPT=1", "CONDA_CHANGEPS1=false")
	if !cfg.HostHistory {
		// An empty HISTFILE: bash neither loads the host user's history at
		// start nor writes one at exit; the history stays in memory.
		env = append(env, "HISTFILE=")
	}
	if !cfg.HostStartupFiles {
		rc, err := inputrcPath()
		if err != nil {
			return nil, fmt.Errorf("writing the shell's readline configuration: %w", err)
		}
		env = append(env, "INPUTRC="+rc)
	}
	return env, nil
}

// output routes program output around the markers in it.
func (a *Actor) output(ctx actor.Context, data []byte) {
	a.wait.Output()
	a.stream.Feed(data, a.sink, func(body []byte) bool {
		a.marker(ctx, parseMarker(body))
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
	case c == nil:
		a.idle.write(b)
	case a.ex.flushed && (a.ex.step == stepText || a.ex.step == stepCancel || (a.ex.step == stepQuery && a.ex.forCall)):
		c.out.write(b)
	default:
		// Before the call's text: background output, the last words of a
		// command being interrupted.
		a.idle.write(b)
	}
}

// marker records a marker of the current exchange. Markers that come
// before its write, or between calls, are not bash answering anything:
// removed from the output and otherwise ignored.
func (a *Actor) marker(ctx actor.Context, m marker) {
	ex := &a.ex
	if a.cur == nil || !ex.flushed {
		return
	}
	switch m.kind {
	case markPS1:
		if b := a.bash; b.seqKnown && (m.seq < b.seq || m.seq > b.seq+uint64(max(ex.lines, 1))) {
			return // a command number bash cannot be at: not bash's
		}
		ex.ps1 = append(ex.ps1, m)
		ex.last = markPS1
	case markPS2:
		ex.ps2++
		ex.last = markPS2
		return // bash reads on; nothing to prove yet
	case markQuery:
		ex.query = append(ex.query, m)
	default:
		// A marker of ours that does not parse: PS2 or the prompt changed
		// under it. The query sorts it out.
		a.bash.needQuery = true
	}
	// Prove it: is bash back at its prompt?
	a.proc.Probe(probeTag{ex.gen}, false)
}

// promptState is what a probe says about bash.
type promptState int

const (
	stateUnknown  promptState = iota // nothing proven: look again
	stateAtPrompt                    // bash is blocked in its own prompt read, input read, output delivered
	stateBusy                        // a job has the terminal, or bash is blocked in something else
)

func (a *Actor) classify(p *ptyproc.Probe) promptState {
	switch {
	case p.Err != nil:
		return stateUnknown
	case p.Pgrp != a.proc.PID():
		return stateBusy
	case !p.Leader.Blocked():
		return stateUnknown
	}
	ok, readline := a.bash.sigs.match(p.Leader, a.ex.last == markPS2)
	if !ok {
		return stateBusy
	}
	if !p.Drained || p.InputPending {
		return stateUnknown
	}
	a.bash.readline = readline
	return stateAtPrompt
}

func (a *Actor) probed(ctx actor.Context, p *ptyproc.Probe) {
	a.opts.Logger.Debug("shell: probe", "pgrp", p.Pgrp, "leader", p.Leader.String(), "wait", p.Wait.State,
		"drained", p.Drained, "pending", p.InputPending, "err", p.Err)
	ex := &a.ex
	if tag, ok := p.Tag.(probeTag); ok && tag.gen != ex.gen {
		return // a look of an earlier exchange
	}
	if a.cur == nil || !ex.flushed {
		return
	}
	if !a.bash.started {
		a.startProbe(ctx, p)
		return
	}
	switch a.classify(p) {
	case stateAtPrompt:
		a.atPrompt(ctx)
		return
	case stateBusy:
		// Whatever markers came so far were printed while a command ran.
		ex.ps1, ex.query = nil, nil
	case stateUnknown:
		a.reprobe(p)
	}
	if !a.wait.Owns(p) {
		return
	}
	verdict, w := a.wait.Probe(p)
	if verdict != waitproof.Waiting {
		return
	}
	switch ex.step {
	case stepText:
		c := a.cur
		who := describeWaiter(w)
		a.waiting = &waitingCommand{who: who}
		r := Result{WaitingForInput: true, FreshShell: c.fresh}
		note := fmt.Sprintf("[waiting for input: %s is blocked reading the terminal, so this call returned early with the output so far. "+
			"Interactive programs belong in a terminal (terminal_open). The next bash call will first interrupt it with SIGINT.]", who)
		a.finish(ctx, c, a.render(c, &r, []string{note}))
	case stepInterrupt:
		if time.Since(ex.intr.stepAt) >= escalateAfter {
			a.escalate(ctx)
		} else {
			a.wait.Again()
		}
	default:
		a.wait.Again()
	}
}

// maxReprobes bounds how often a marker's probe is taken again at once
// when it found bash still on its way to the prompt; after that the
// tracker's looks go on, with their backoff.
const maxReprobes = 3

// reprobe takes an inconclusive probe of ours again, a few times.
func (a *Actor) reprobe(p *ptyproc.Probe) {
	if _, ours := p.Tag.(probeTag); ours && a.ex.reprobes < maxReprobes {
		a.ex.reprobes++
		a.proc.Probe(probeTag{a.ex.gen}, false)
	}
}

// startProbe learns bash's prompt reads from the start-up lines, when no
// command of anyone's has run yet.
func (a *Actor) startProbe(ctx actor.Context, p *ptyproc.Probe) {
	ex := &a.ex
	if len(ex.ps1) == 0 || p.Err != nil || !p.Drained || p.InputPending || p.Pgrp != a.proc.PID() || !plausiblePrompt(p.Leader) {
		if a.wait.Owns(p) {
			a.wait.Probe(p) // for its next look
		} else if len(ex.ps1) > 0 {
			a.reprobe(p)
		}
		return
	}
	lines := a.proto.initLines(a.bash.learn, a.opts.Config.HostHistory)
	switch l := p.Leader; {
	case ex.startLine == 0 && a.bash.learn:
		if l.Nr != sysPselect6 {
			a.startFailed(ctx, fmt.Sprintf("bash did not wait for input through readline after `set -o emacs` (%s)", l))
			return
		}
		a.bash.sigs.readline = l
	default: // the last line: bash's plain read
		if l.Nr != sysRead {
			a.startFailed(ctx, fmt.Sprintf("bash did not read its input with read(2) at the prompt (%s)", l))
			return
		}
		a.bash.sigs.plain = l
		if a.bash.learn {
			if a.bash.binary != "" {
				layouts.Store(a.bash.binary, layoutOf(a.bash.sigs))
			}
		} else {
			lay, _ := layouts.Load(a.bash.binary)
			a.bash.sigs.readline = lay.(readlineLayout).apply(l)
		}
	}
	m := ex.ps1[len(ex.ps1)-1]
	a.bash.seq, a.bash.seqKnown = m.seq, true
	if ex.startLine < len(lines)-1 {
		a.startLine(ex.startLine + 1)
		return
	}
	a.bash.started = true
	a.begin(stepText) // nothing of start-up is pending
	a.next(ctx)
}

func (a *Actor) startFailed(ctx actor.Context, why string) {
	c := a.cur
	a.finish(ctx, c, Result{Text: "bash: could not start the shell: " + why, IsError: true})
	a.reset(ResetBroken, why, nil)
}

// atPrompt: bash is proven back at its prompt; the exchange is over.
func (a *Actor) atPrompt(ctx actor.Context) {
	ex := &a.ex
	a.wait.Stop()
	switch ex.step {
	case stepText:
		a.textDone(ctx)
	case stepQuery:
		a.queryDone(ctx)
	case stepInterrupt:
		a.interruptDone(ctx)
	case stepCancel:
		a.cancelDone(ctx)
	}
}

// plausible reports whether markers are what bash prints for one command
// line: exactly one for a line; for several lines one or more whose command
// numbers never fall and grow by at most one each (after a syntax error
// bash runs the remaining lines as commands of their own), starting at the
// number before the text or the one after it.
func (a *Actor) plausible(ms []marker, multi bool) bool {
	if len(ms) == 0 || (!multi && len(ms) > 1) {
		return false
	}
	prev := a.bash.seq
	for i, m := range ms {
		if (i > 0 || a.bash.seqKnown) && (m.seq < prev || m.seq > prev+1) {
			return false
		}
		prev = m.seq
	}
	return true
}

func (a *Actor) textDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	if len(ex.ps1) == 0 || ex.last == markPS2 {
		if ex.last == markPS2 && (len(ex.ps1) > 0 || ex.ps2 >= ex.lines) {
			a.cancelIncomplete(ctx)
			return
		}
		// bash is back without a marker of ours: the command changed PS1,
		// promptvars or stderr. Ask.
		a.query(true)
		return
	}
	if !a.plausible(ex.ps1, ex.multi) {
		a.conflict(ctx)
		return
	}
	last := ex.ps1[len(ex.ps1)-1]
	if last.ps1Len != len(a.proto.ps1) {
		// PS1 has text of someone else's around the marker (an activation
		// script): bash printed it after the command. Ask, to know it.
		a.query(true)
		return
	}
	ran := last.seq != a.bash.seq || !a.bash.seqKnown
	a.bash.seq, a.bash.seqKnown = last.seq, true
	if !last.ps2Ours {
		a.bash.needQuery = true
	}
	r := Result{FreshShell: c.fresh}
	var trailer []string
	switch {
	case !ran && blank(c.args.Command):
		zero := 0
		r.ExitCode = &zero
	case ran || last.status != 0:
		st := last.status
		r.ExitCode = &st
		if st != 0 {
			trailer = append(trailer, fmt.Sprintf("[exit code: %d]", st))
		}
		if !ran {
			r.NotRun = true
			if ex.multi && strings.Contains(c.out.text(), "syntax error near unexpected token `}'") {
				trailer = append([]string{"[the text is incomplete: bash met the `}` that closes the group multi-line text is typed in, " +
					"so nothing of it ran]"}, trailer...)
			}
		}
	default:
		r.NotRun = true
		trailer = append(trailer, "[bash did not run this command (see its message above)]")
	}
	a.finish(ctx, c, a.render(c, &r, trailer))
}

// conflict: more markers came than bash prints for the call. Some came from
// the command or a background job; which one is bash's cannot be proven.
func (a *Actor) conflict(ctx actor.Context) {
	c := a.cur
	a.bash.seqKnown = false
	r := Result{FreshShell: c.fresh, StatusUnknown: true}
	a.finish(ctx, c, a.render(c, &r, []string{"[the exit status is unknown: more completion markers came than bash prints for one command, " +
		"so the command or a background job printed one of the shell's markers]"}))
}

func (a *Actor) queryDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	if len(ex.query) != 1 {
		if len(ex.query) > 1 && ex.forCall {
			a.conflict(ctx)
			return
		}
		why := "bash no longer reports the end of a command: a command changed its prompt (PS1), promptvars or standard error, " +
			"and the runtime's status query (which needs the builtins `builtin`, `printf` and `shopt`) failed too"
		c.notes = append(c.notes, "["+why+"; the shell was reset and this call's status is unknown]")
		if ex.forCall {
			r := Result{FreshShell: c.fresh, ShellReset: true, StatusUnknown: true}
			a.finish(ctx, c, a.render(c, &r, []string{resetNotice}))
			a.reset(ResetBroken, why, nil)
			return
		}
		a.reset(ResetBroken, why, c)
		return
	}
	q := ex.query[0]
	b := &a.bash
	b.ps1Stuck = q.ps1ReadOnly || q.stderrElsewhere
	b.ps2Foreign = q.ps2ReadOnly
	if len(ex.ps1) > 0 {
		// The query line's own prompt: PS1 is ours again.
		b.seq, b.seqKnown = ex.ps1[len(ex.ps1)-1].seq, true
	} else {
		b.seqKnown = false
	}
	if !ex.forCall {
		a.next(ctx)
		return
	}
	// The prompt that bash printed after the command (and after the query
	// line, while the prompt stays foreign) is not the command's output.
	if junk := a.proto.promptJunk(q.prompt); junk != "" && !q.stderrElsewhere {
		c.out.trimSuffix(junk)
		if b.ps1Stuck {
			c.out.trimSuffix(junk)
		}
	}
	a.finish(ctx, c, a.statusResult(c, q.status))
}

// cancelIncomplete: bash waits for the rest of the text (an unterminated
// quote, heredoc or compound command). SIGINT makes it drop what it read,
// as Ctrl-C does at a prompt.
func (a *Actor) cancelIncomplete(ctx actor.Context) {
	c := a.cur
	ex := a.begin(stepCancel)
	ex.flushed = true
	ex.cancelMark = c.out.len()
	c.incomplete = true
	if err := a.proc.Signal(syscall.SIGINT); err != nil {
		a.broken(ctx, fmt.Sprintf("could not interrupt bash (%v)", err))
		return
	}
	a.wait.Start(a.proc)
	a.armStep(stepTimeout)
}

func (a *Actor) cancelDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	// bash ends the cancelled line with a newline ("^C" and a newline with
	// readline): the runtime's doing, not output.
	for _, echo := range []string{"\n", "^C\n"} {
		if c.out.len() == ex.cancelMark+len(echo) && c.out.trimSuffix(echo) {
			break
		}
	}
	if len(ex.ps1) == 0 {
		if a.bash.ps1Stuck {
			a.query(true) // no marker is expected: ask
			return
		}
		a.broken(ctx, "the command was incomplete and bash did not come back to its prompt after SIGINT (it may ignore SIGINT)")
		return
	}
	last := ex.ps1[len(ex.ps1)-1]
	a.bash.seq, a.bash.seqKnown = last.seq, true
	a.finish(ctx, c, a.statusResult(c, last.status))
}

// statusResult is the result of a call whose command ended with status st.
func (a *Actor) statusResult(c *call, st int) Result {
	r := Result{FreshShell: c.fresh, ExitCode: &st, NotRun: c.incomplete}
	var trailer []string
	if c.incomplete {
		trailer = append(trailer, incompleteNotice)
	}
	if st != 0 {
		trailer = append(trailer, fmt.Sprintf("[exit code: %d]", st))
	}
	return a.render(c, &r, trailer)
}

const incompleteNotice = "[the command is incomplete (an unterminated quote, heredoc or compound command): bash waited for the rest, " +
	"so it was cancelled with SIGINT and nothing of it ran]"

// broken resets a shell that cannot be talked to, answering the call.
func (a *Actor) broken(ctx actor.Context, why string) {
	c := a.cur
	r := Result{FreshShell: c.fresh, ShellReset: true, IsError: true}
	a.finish(ctx, c, a.render(c, &r, []string{"[" + why + "; the shell was reset]", resetNotice}))
	a.reset(ResetBroken, why, nil)
}

// render builds the result text: notes, output since the previous call, the
// call's output, then the trailer lines.
func (a *Actor) render(c *call, r *Result, trailer []string) Result {
	var b strings.Builder
	for _, n := range c.notes {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	if !c.before.empty() {
		b.WriteString("[output since the previous call]\n")
		before := tidyJobNotices(c.before.text())
		writeBlock(&b, before)
		if c.before.dropped > 0 {
			fmt.Fprintf(&b, "[%d more %s not kept%s]\n", c.before.dropped, bytesWere(c.before.dropped, true), cutNote(before))
		}
		b.WriteString("[end of output since the previous call]\n")
	}
	out := tidyJobNotices(c.out.text())
	b.WriteString(out)
	if c.out.dropped > 0 {
		r.ClippedBytes = c.out.dropped
		trailer = append([]string{fmt.Sprintf(
			"[output clipped: only the first %d characters are shown%s; %d more %s not kept]",
			a.opts.Config.MaxOutputChars, cutNote(out), c.out.dropped, bytesWere(c.out.dropped, false))}, trailer...)
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

// jobNotice is a line of bash's own about a job ("[1]+  Done  sleep 1")
// that ends in the "\r" bash adds when it reports at once (set -b).
var jobNotice = regexp.MustCompile(`(?m)^(\[\d+\][-+ ] +[A-Z][^\r\n]*)\r$`)

// tidyJobNotices drops that "\r": the terminal's doing, not the job's.
func tidyJobNotices(s string) string {
	if !strings.Contains(s, "\r\n") {
		return s
	}
	return jobNotice.ReplaceAllString(s, "$1")
}

// cutNote says, in a notice that follows kept text, that the text stops in
// the middle of a line (the newline before the notice is not the output's).
func cutNote(kept string) string {
	if kept != "" && !strings.HasSuffix(kept, "\n") {
		return ", the last line cut"
	}
	return ""
}

// bytesWere is "bytes were", or "byte was" for one; with ofIt, "bytes of
// it were".
func bytesWere(n int64, ofIt bool) string {
	noun, verb := "bytes", "were"
	if n == 1 {
		noun, verb = "byte", "was"
	}
	if ofIt {
		return noun + " of it " + verb
	}
	return noun + " " + verb
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
	a.begin(stepText) // the exchange is over; its late messages are stale
	// The call timer stays armed: re-armed later for the next call, it wakes
	// nobody, while a timer added anew wakes the runtime's poller thread.
	// It names no call meanwhile, so it keeps no finished call's output.
	a.timedCall.Store(nil)
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
	ranText := c != nil && a.ex.flushed && (a.ex.step == stepText || a.ex.step == stepCancel || (a.ex.step == stepQuery && a.ex.forCall))
	switch {
	case ranText && a.ex.step == stepText && unread:
		// The shell ended before it read this command (it was exiting
		// already): run the command in a fresh shell instead of claiming it
		// ran.
		c.notes = append(c.notes, how[:len(how)-1]+" before it read this command; it runs in a fresh shell]")
		a.reset(ResetExited, st.String(), c)
	case ranText:
		r := Result{ShellExited: st.String(), ShellReset: true, FreshShell: c.fresh}
		a.finish(ctx, c, a.render(c, &r, []string{how, resetNotice}))
		a.reset(ResetExited, st.String(), nil)
	case c != nil:
		// The shell ended before this call's text was typed: the call goes
		// on in a fresh shell.
		c.notes = append(c.notes, how[:len(how)-1]+"; this call runs in a fresh shell]")
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
		if t.n != a.stepN {
			return
		}
		switch a.ex.step {
		case stepInterrupt:
			a.escalate(ctx)
		case stepStart:
			a.startFailed(ctx, fmt.Sprintf("bash did not answer its start-up line %d within %v", a.ex.startLine+1, startTimeout))
		case stepCancel:
			a.broken(ctx, "the command was incomplete and bash did not come back to its prompt after SIGINT")
		}
	}
}

func describeWaiter(w procfs.Wait) string {
	if w.Comm == "" {
		return "the command"
	}
	return fmt.Sprintf("`%s` (pid %d)", w.Comm, w.PID)
}

// beginInterrupt starts stopping the command left waiting for input.
func (a *Actor) beginInterrupt(ctx actor.Context) {
	c, w := a.cur, a.waiting
	ex := a.begin(stepInterrupt)
	ex.flushed = true
	ex.intr = &interrupt{who: w.who, stepAt: time.Now()}
	if err := a.proc.Signal(syscall.SIGINT); err != nil {
		c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, was still waiting for input and could not be interrupted (%v), so the shell was reset; this call runs in a fresh shell]", w.who, err))
		a.reset(ResetBroken, err.Error(), c)
		return
	}
	c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, was still waiting for input: sent it SIGINT]", w.who))
	a.wait.Start(a.proc)
	a.armStep(stepTimeout)
}

// escalate moves the interrupt sequence on: SIGINT, then end-of-file (a
// byte that readline-based programs take as such), then SIGTERM and SIGKILL
// to the foreground job; only a job that survives all that, or bash itself
// waiting, costs the shell.
func (a *Actor) escalate(ctx actor.Context) {
	c, in := a.cur, a.ex.intr
	in.step++
	in.stepAt = time.Now()
	pgrp, _ := a.proc.ForegroundGroup()
	job := pgrp > 1 && pgrp != a.proc.PID()
	switch {
	case in.step == 1:
		c.notes = append(c.notes, "[it kept waiting after SIGINT: sent end-of-file (Ctrl-D)]")
		a.proc.Write([]byte{4})
	case in.step == 2 && job:
		c.notes = append(c.notes, "[it kept waiting: sent SIGTERM to the foreground job]")
		_ = a.proc.Signal(syscall.SIGTERM)
	case in.step == 3 && job:
		c.notes = append(c.notes, "[it kept waiting: sent SIGKILL to the foreground job]")
		_ = a.proc.Signal(syscall.SIGKILL)
	default:
		c.notes = append(c.notes, "[it could not be stopped, so the shell was reset; this call runs in a fresh shell]")
		a.reset(ResetStuck, in.who, c)
		return
	}
	a.ex.ps1, a.ex.query = nil, nil
	a.wait.Start(a.proc)
	a.armStep(stepTimeout)
}

func (a *Actor) interruptDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	a.waiting = nil
	if len(ex.ps1) == 0 {
		// Back at the prompt, but the prompt is not ours: ask.
		a.bash.needQuery = true
		a.next(ctx)
		return
	}
	last := ex.ps1[len(ex.ps1)-1]
	a.bash.seq, a.bash.seqKnown = last.seq, true
	c.notes = append(c.notes, fmt.Sprintf("[it stopped with status %d]", last.status))
	a.next(ctx)
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

// armStep times the current exchange's step.
func (a *Actor) armStep(d time.Duration) {
	a.stopTimer(&a.stepTimer)
	a.stepN++
	t, send := &tick{kind: tickStep, c: a.cur, n: a.stepN}, a.send
	a.stepTimer = time.AfterFunc(d, func() { send(t) })
}

func (a *Actor) stopTimer(t **time.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}
