package terminal

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/inband"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/safetext"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
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
	// Sandbox returns the sandbox the terminal runs in (the agent's);
	// nil, or a nil sandbox, runs it on the host.
	Sandbox func() (*sandbox.Sandbox, error)
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
	// promptIdle: our shell's prompt marker came and no input since;
	// promptSeen: and bash was then seen reading (see promptCheck).
	promptIdle, promptSeen bool
	exit                   *ptyproc.ExitStatus
	lastReady              ReadyReason
	wait                   *waitproof.Tracker
	waiters                []*waiter
	holder                 *holder
	closing                *closing
	// held is a cancelled send's SIGINT waiting for the program to take
	// the text the send typed.
	held *heldSignal
	// kill is task_kill's interrupt of the task that holds the terminal.
	kill *taskKill
	// promptCheck: the default shell's prompt marker came and a probe looks
	// whether bash has entered its line editor yet.
	promptCheck *promptCheck
	// groupCPU is the foreground group's processor time, read when a wait
	// might settle.
	groupCPU *cpuSample
	// answered are the last calls answered with unread output, and lost
	// says what went to calls whose callers had gone (see
	// withdrawAnswered).
	answered []answered
	lost     LostOutput
	carried  LostOutput // what of lost the result being made names
	// interrupted are notices of sends cancelled while they waited, whose
	// program got SIGINT, for the next result.
	interrupted []string
}

// answered is a call the terminal answered with the unread output from to.
type answered struct {
	callID   string
	kind     waiterKind
	from, to int64
	notes    LostOutput // what of lost it named
}

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
	case *actor.Stopped:
		a.release()
	case *actor.Restarting:
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
	case *killRetry:
		if m.k == a.kill && a.proc != nil {
			a.probeKill(m.k)
		}
	case *feedRetry:
		if h := a.holder; h != nil && h.feed == m.f && a.proc != nil {
			a.proc.Probe(m.f, false)
		}
	case *heldRetry:
		if m.h == a.held && a.proc != nil {
			a.proc.ProbeSignal(m.h, syscall.SIGINT)
		}
	case *Release:
		if a.holder != nil && a.holder.id == m.TaskID {
			a.dropWaiters(func(w *waiter) bool { return w.kind == waitTask })
			a.stopKill()
			a.stopFeed()
			a.readPos = max(a.readPos, a.holder.sent) // what it was given was the task's
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
		case *taskKill:
			a.killProbed(ctx, m, tag)
		case *taskFeed:
			a.feedProbed(m, tag)
		case *promptCheck:
			a.promptProbed(ctx, m, tag)
		default:
			a.probed(ctx, m)
		}
	case *waitproof.Tick:
		a.wait.Tick(m)
	case *outputTick:
		a.outputCame(ctx, m.w)
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
	// Later settings override earlier ones; built in one pass (a map), since
	// a model may pass thousands of variables.
	set := map[string]string{"TERM": "dumb"}
	drop := map[string]bool{}
	if !a.opts.Config.HostHistory {
		set["HISTFILE"] = "" // no bash here loads or writes the host user's history
	}
	if !a.opts.Config.HostStartupFiles {
		set["INPUTRC"] = "/dev/null"
		// A bash started for a command reads $BASH_ENV (sh, $ENV): the
		// host user's start-up files stay out, as ~/.bashrc does.
		drop["BASH_ENV"], drop["ENV"] = true, true
	}
	var path string
	var argv []string
	if strings.TrimSpace(args.Command) == "" {
		// An interactive bash whose prompt we can see: an invisible marker
		// before each prompt, exported so that a nested bash shows it too.
		nonce := inband.NewNonce()
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
	env := ptyproc.BuildEnv(a.opts.Env, drop, set)
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
	a.proc, a.startErr = ptyproc.StartIn(a.opts.Sandbox, ptyproc.Options{
		Path: path, Args: argv, Env: env, Dir: dir,
		Cols: uint16(cols), Rows: uint16(rows), Echo: true, CRLF: true,
	}, a.send)
}

func validStatus(b []byte) bool {
	_, err := strconv.Atoi(string(b))
	return err == nil
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
	a.stopKill()
	a.stopFeed()
	for _, w := range a.waiters {
		w.stopTimers()
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

// release lets go of what the terminal kept (its history above all) once
// it has stopped. Its actor stays reachable through any stale *actor.PID
// (protoactor caches the process in the PID and keeps removed PIDs in the
// spare capacity of its child and watcher sets; tasks and the agent's
// memory of answers hold PIDs too), so a closed terminal holds no output.
func (a *Actor) release() {
	if a.hist != nil {
		a.hist = newHistory(a.hist.limit)
	}
	a.answered, a.lost, a.carried = nil, LostOutput{}, LostOutput{}
	a.waiters, a.holder, a.closing, a.held, a.kill, a.promptCheck, a.groupCPU = nil, nil, nil, nil, nil, nil, nil
	a.stream = nil
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
		ctx.Respond(messages.ErrorResult(m.CallID, ToolOpen,
			safetext.Clip(fmt.Sprintf("terminal_open: could not start %q: %v", safetext.Clip(what, echoMax), a.startErr), 4*echoMax)))
		ctx.Stop(ctx.Self())
		return
	}
	a.addWaiter(ctx, &waiter{kind: waitOpen, callID: m.CallID, sender: ctx.Sender(), settle: true}, ms(a.opts.Config.DefaultWaitMs))
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
