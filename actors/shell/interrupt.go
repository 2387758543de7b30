package shell

import (
	"fmt"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

// beginInterrupt starts stopping the command left waiting for input. A probe
// comes first: the command may have ended by itself since (a read with a
// timeout), and then nothing is sent to bash. (A marker seen between calls
// is no proof: anyone can print one.) Otherwise SIGINT follows.
func (a *Actor) beginInterrupt(ctx actor.Context) {
	w := a.waiting
	ex := a.begin(stepInterrupt)
	ex.flushed = true
	ex.intr = &interrupt{who: w.who, step: -1, mark: -1}
	a.proc.Probe(probeTag{ex.gen}, false)
}

// escalate moves the interrupt sequence on: SIGINT, then end-of-file (a
// byte that readline-based programs take as such), then SIGTERM and SIGKILL
// to the foreground job; only a job that survives all that, or bash itself
// waiting, costs the shell.
//
// proven says why: the program was proven waiting again (every step fits),
// or a step's time passed with it neither ending nor waiting, so running:
// cleaning up after SIGINT, perhaps. End-of-file is typed only to a
// program proven reading the terminal (one that never reads it would leave
// it to the next reader); a running one gets bash.cancelGraceMs after
// SIGINT in all, then its job SIGTERM and SIGKILL.
func (a *Actor) escalate(ctx actor.Context, proven bool) {
	c, in := a.cur, a.ex.intr
	if in.step == 0 && !a.endOfFileFits(proven) {
		in.step++
	}
	if in.step == 1 && in.eofAgain && proven {
		// Proven waiting again with nothing unread: the end-of-file met
		// bash's read begun before canonical input was on (SIGWINCH had
		// not restarted it yet), which took it for nothing. Once more.
		in.eofAgain = false
		in.stepAt = time.Now()
		a.proc.Write([]byte{4})
		a.stepTaken()
		return
	}
	in.step++
	in.stepAt = time.Now()
	pgrp, _ := a.proc.ForegroundGroup()
	job := pgrp > 1 && pgrp != a.proc.PID()
	switch {
	case in.step == 0:
		if err := a.interruptWaiting(pgrp); err != nil {
			c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, was still waiting for input and could not be interrupted (%v), so the shell was reset; this call runs in a fresh shell]", in.who, err))
			a.reset(ResetBroken, err.Error(), c)
			return
		}
		in.mark = a.kept.idle.len()
		c.notes = append(c.notes, fmt.Sprintf("[the previous command, %s, was still waiting for input: sent it SIGINT]", in.who))
	case in.step == 1:
		c.notes = append(c.notes, "[it kept waiting after SIGINT: sent end-of-file (Ctrl-D)]")
		// In the terminal's own modes, with canonical input on for it:
		// a real end-of-file. What it leaves unread is dropped before
		// the next line (interruptDone), and the next line typed puts the
		// modes back.
		pid := a.proc.PID()
		canonical, _ := a.proc.TypeEndOfFile(func() {
			// bash's read was begun in the terminal's own modes: its
			// SIGWINCH handler makes it read again, now canonically.
			_ = syscall.Kill(pid, syscall.SIGWINCH)
		})
		in.eofAgain = canonical
	case in.step == 2 && job:
		c.notes = append(c.notes, "[it "+stillDoing(proven)+": sent SIGTERM to the foreground job]")
		_ = a.proc.Signal(syscall.SIGTERM)
	case in.step == 3 && job:
		c.notes = append(c.notes, "[it "+stillDoing(proven)+": sent SIGKILL to the foreground job]")
		_ = a.proc.Signal(syscall.SIGKILL)
	default:
		c.notes = append(c.notes, "[it could not be stopped, so the shell was reset; this call runs in a fresh shell]")
		a.reset(ResetStuck, in.who, c)
		return
	}
	a.stepTaken()
}

// interruptWaiting sends SIGINT to the command left waiting: to the
// terminal's foreground group as the key would, except when the command is
// bash itself (its read builtin) in its own group. That group also holds
// the readers of bash's process substitutions (exec > >(tee -a log)) and,
// under set +m, its background jobs: a SIGINT for all would kill tee, and
// bash would die of SIGPIPE at its next write. bash alone gets it then
// (what was typed and not read is dropped first, as for the key).
func (a *Actor) interruptWaiting(pgrp int) error {
	bash := a.proc.PID()
	if w := a.waiting; w == nil || w.wait.PID != bash || pgrp != bash {
		return a.proc.Signal(syscall.SIGINT)
	}
	if err := a.proc.DiscardInput(); err != nil {
		return err
	}
	return syscall.Kill(bash, syscall.SIGINT)
}

// stepTaken: a step of the interrupt sequence was taken; wait for what
// it does.
func (a *Actor) stepTaken() {
	// A marker from here on is bash's answer to this step.
	a.ex.ps1, a.ex.ps2, a.ex.query = nil, 0, nil
	a.wait.Start(a.proc)
	if a.ex.intr.step <= 1 {
		a.armStep(a.opts.Config.CancelGrace()) // its cleanup's time
	} else {
		a.armStep(stepTimeout)
	}
}

// endOfFileFits reports whether end-of-file is the next step for the
// program left waiting. A program with modes of its own (a line editor's:
// readline takes ^D for it) gets the byte. In the terminal's own modes the
// kernel makes an end-of-file of it only with canonical input on, which
// TypeEndOfFile turns on for it; that is only for bash itself blocked in
// read(2) on the terminal (its read builtin, under `trap "" INT`): its
// SIGWINCH handler makes it begin the read again in canonical mode, and
// the read returns 0. A program waiting in select or poll may exit without
// reading it, and bash, back at its prompt, would read it and end; a job
// gets SIGTERM instead. Nor is it for a program that is not reading at
// all.
func (a *Actor) endOfFileFits(proven bool) bool {
	if !proven {
		return false
	}
	own, err := a.proc.ModesChanged()
	if err != nil {
		return false
	}
	w := a.ex.intr.wait
	return own || w.Syscall == "read" && w.PID == a.proc.PID()
}

// tidyStopped: the command left waiting is gone (stopped, or ended by
// itself). Its last line, even if cut, is over: it stays with the output
// since the previous call, not glued to the call's own. The newline bash
// prints for a command that SIGINT ended (mark: the output's length when
// it was sent) is the runtime's doing.
func (a *Actor) tidyStopped(mark int) {
	idle := &a.kept.idle
	if mark >= 0 && idle.len() == mark+1 {
		idle.trimSuffix("\n")
	}
	a.kept.idleEnded = true
}

// stillDoing says what a program that did not stop was seen doing.
func stillDoing(waiting bool) string {
	if waiting {
		return "kept waiting for input"
	}
	return "was still running"
}

func (a *Actor) interruptDone(ctx actor.Context) {
	ex, c := &a.ex, a.cur
	w := a.waiting
	a.waiting = nil
	if a.proc.InputPending() {
		// What the stopped program did not read (an end-of-file it never
		// took) must not be glued to the next line typed.
		_ = a.proc.DiscardInput()
	}
	mark := ex.intr.mark
	switch {
	case ex.markers() > 1:
		// Someone printed markers while it was being stopped: the command
		// number is not known; the call goes on.
		a.bash.seqKnown = false
	case ex.intr.step < 0:
		// Proven back at its prompt before anything was sent: the command
		// ended by itself, with the status of the marker bash printed then.
		note := fmt.Sprintf("[the previous command, %s, which was waiting for input, ended by itself with status %%d]", w.who)
		if m := w.ended; m != nil && m.ps1Ours && !a.bash.ps1Stuck {
			a.bash.seq, a.bash.seqKnown = m.seq, true
			c.notes = append(c.notes, fmt.Sprintf(note, m.status))
			break
		}
		// No marker of ours (a prompt of its own, PS1="(venv) $PS1"):
		// ask, for its status and the prompt text to leave out.
		a.askStopped(note, mark)
		return
	case len(ex.ps1) == 1 && ex.ps1[0].ps1Ours && !a.bash.ps1Stuck:
		m := ex.ps1[0]
		a.bash.seq, a.bash.seqKnown = m.seq, true
		c.notes = append(c.notes, fmt.Sprintf("[it stopped with status %d]", m.status))
	default:
		// Back at the prompt, but the prompt is not ours: ask.
		a.askStopped("[it stopped with status %d]", mark)
		return
	}
	a.tidyStopped(mark)
	a.next(ctx)
}

// askStopped asks bash for the status of the command left waiting, which
// is gone, and the prompt state: note says it (see stoppedQuery).
func (a *Actor) askStopped(note string, mark int) {
	a.bash.needQuery = false
	a.query(false)
	a.ex.stopped = &stoppedQuery{note: note, mark: mark}
}

func (a *Actor) shellExited(ctx actor.Context, st ptyproc.ExitStatus, unread bool) {
	how := "[shell exited]"
	switch {
	case st.Signal != 0:
		how = fmt.Sprintf("[shell killed by signal: %s]", ptyproc.SignalName(st.Signal))
	case st.Code >= 0:
		how = fmt.Sprintf("[shell exited: code %d]", st.Code)
	}
	if changed, err := a.proc.RestoreModes(); changed && err == nil {
		how = how[:len(how)-1] + "; a command had changed the terminal's modes (stty), which can make bash read end-of-file]"
	}
	c := a.cur
	a.flushCarry()
	inQuery := c != nil && a.ex.step == stepQuery
	if inQuery {
		// It ended in the runtime's status query, not in a command.
		how = how[:len(how)-1] + " while the runtime's status query ran (the query is a function: under set -T a RETURN trap runs as it returns, and under set -e one that fails ends the shell)]"
	}
	switch {
	case c != nil && c.begun && a.ex.step == stepText && unread && !c.ran && c.next == 1:
		// The shell ended before it read this command (it was exiting
		// already): run the command in a fresh shell instead of claiming it
		// ran.
		c.notes = append(c.notes, how[:len(how)-1]+" before it read this command; it runs in a fresh shell]")
		c.begun, c.lines, c.next = false, nil, 0
		// What came after the text was typed is the dead shell's last
		// output, not this command's: it goes with the output before it.
		c.before.add(c.out)
		c.out = a.newOut()
		a.reset(ResetExited, st.String(), c)
	case c != nil && c.begun:
		// The shell's own end is the call's status (exit 3, set -e then
		// false), as a script's would be: a harness grading on exit_code
		// must not count it as passed.
		code := st.Code
		if st.Signal != 0 {
			code = 128 + int(st.Signal)
		}
		r := Result{ShellExited: st.String(), ShellReset: true, FreshShell: c.fresh}
		switch {
		case inQuery:
			// The command's own status was never told.
			r.StatusUnknown = true
		case code >= 0:
			r.ExitCode = &code
		}
		a.finish(ctx, c, a.render(c, &r, append(a.unrun(c), how, resetNotice)))
		a.reset(ResetExited, st.String(), nil)
	case c != nil:
		// The shell ended before this call's text was typed: the call goes
		// on in a fresh shell.
		c.notes = append(c.notes, how[:len(how)-1]+"; this call runs in a fresh shell]")
		// A line may have gone to the dead shell before any of the call's
		// output came: none of the text ran, and all of it is typed again.
		c.lines, c.next, c.eval = nil, 0, false
		a.reset(ResetExited, st.String(), c)
	default:
		a.kept.note = how[:len(how)-1] + " after the previous call; this call runs in a fresh shell]"
		a.reset(ResetExited, st.String(), nil)
	}
}
