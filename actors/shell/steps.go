package shell

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/waitproof"
)

// The rules by which an exchange ends.
//
// A marker is anybody's: bash prints it as its prompt, but a command or a
// background job can print the same bytes. So an exchange ends only on a
// probe that proves bash blocked in one of its own input reads (see
// promptSigs), with the input read and every byte before the look
// delivered. Then the markers since the exchange began are counted: one line
// typed gives exactly one, a PS1 marker (it ran, or bash found nothing to
// run) or a PS2 marker (bash wants the rest); the query gives one q marker
// with its token. Any other count means that someone printed a marker: the
// status is unknown and nothing more of the text is typed. A marker with a
// command number bash cannot be at is not counted: it cannot be bash's.
//
// raw is the marker's bytes. One that cannot be bash's answer (printed by a
// command or a job, a log of bash's prompts shown again) and one that does
// not parse (PS1 printed as it is: by bash with promptvars off, or by
// `echo "$PS1"`) are left out and counted in a notice: a marker, nonce
// included, is never shown.
func (a *Actor) marker(ctx actor.Context, m marker, raw []byte) {
	ex := &a.ex
	if m.kind == markPS1 && m.ps1Ours && a.bash.promptPiped {
		// bash prints its prompt into the pipe its stderr goes to (exec
		// 2> >(tee log)), whose reader copies it to the terminal at its own
		// pace: it answers nothing (the status query does), and it is no
		// output of anyone's.
		return
	}
	if (m.kind == markPS1 || m.kind == markPS2) && a.bash.promptsEmpty {
		// bash prints no prompt: a prompt marker is in output (cat of a
		// log that got one) and answers nothing.
		a.markerOut(raw)
		return
	}
	if a.cur == nil || !ex.flushed {
		switch {
		case m.kind == markPS1 && a.waiting != nil:
			a.waiting.ended = &m // the waiting command ended by itself, perhaps
		case m.kind == markBroken:
			a.kept.idle.markerBytes += int64(len(raw))
		case m.kind == markPS1 && m.ps1Ours && a.cur != nil && ex.step == stepQuery:
			// The prompt of the line the query asks about, late: bash
			// printed it into a pipe (exec 2> >(tee log)), whose reader
			// copied it after bash was seen back at its prompt. It is
			// nobody's output.
		default:
			a.markerOut(raw) // bash is at its prompt already: not its answer
		}
		return
	}
	switch m.kind {
	case markPS1:
		if b := a.bash; ex.step != stepQuery && b.seqKnown && (m.seq < b.seq || m.seq > b.seq+1) {
			a.markerOut(raw) // a command number bash cannot be at: not bash's
			return
		}
		ex.ps1 = append(ex.ps1, m)
	case markPS2:
		ex.ps2++
	case markQuery:
		if m.token != ex.token {
			a.markerOut(raw) // another query's, or made up
			return
		}
		ex.query = append(ex.query, m)
		ex.reportAt = a.outputSoFar().len()
	default:
		// bash is likely back: prove it.
		a.markerOut(raw)
	}
	// Prove it: is bash back at its prompt?
	a.proc.Probe(probeTag{ex.gen}, false)
}

// markerOut leaves out a marker of the runtime's that is no answer of
// bash's (printed by a command or a job, a log of prompts shown again): it
// is never shown, only counted in a notice.
func (a *Actor) markerOut(raw []byte) {
	a.outputSoFar().markerBytes += int64(len(raw))
}

// promptState is what a probe says about bash.
type promptState int

const (
	stateUnknown  promptState = iota // nothing proven: look again
	stateAtPrompt                    // bash is blocked in its own input read, input read, output delivered
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
	ok, readline := a.bash.sigs.match(p.Leader, a.ex.ps2 > 0)
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
	state := a.classify(p)
	switch state {
	case stateAtPrompt:
		a.wait.Stop()
		a.atPrompt(ctx)
		return
	case stateUnknown:
		if a.reprobe(p) {
			return
		}
	}
	if ex.step == stepInterrupt && ex.intr.step < 0 {
		if _, ours := p.Tag.(probeTag); ours {
			// The first step: SIGINT, whatever it is doing.
			a.escalate(ctx, true)
			return
		}
	}
	if !a.wait.Owns(p) {
		return
	}
	// One of the tracker's looks, which also tell what bash is doing.
	if a.stoppedShell(p) || a.stdinGone(ctx, p) {
		return
	}
	verdict, w := a.wait.Probe(p)
	if verdict == waitproof.Unknown && ex.step == stepText {
		// A relay or a client of something else waits on the terminal:
		// only its quiet can tell.
		if silence := a.opts.Config.InputSilence(); silence > 0 && a.wait.QuietFor() >= silence {
			a.waitingForInput(ctx, w, true)
		}
		return
	}
	if verdict != waitproof.Waiting {
		return
	}
	switch ex.step {
	case stepText:
		if a.waitOut(w) {
			return
		}
		a.waitingForInput(ctx, w, false)
	case stepInterrupt:
		ex.intr.wait = w
		if time.Since(ex.intr.stepAt) >= escalateAfter {
			a.escalate(ctx, true)
		} else {
			a.wait.Again()
		}
	default:
		a.wait.Again()
	}
}

// timedWaitSlack is the time a call must have left after a wait's own
// timeout for the wait to be waited out: what runs after it.
const timedWaitSlack = 250 * time.Millisecond

// waitOut waits out a wait for input that has a timeout of its own (read
// -t 2, a select with a timeout, an event loop's timer) and ends, by that
// timeout, within the call's time, as a script would; it is not answered as
// waiting for input. The looks start again once the timeout has passed
// (another wait may follow: a countdown, a program that works and checks for
// a key between bits of work); bash's prompt ends the exchange as ever, and
// the call's time bounds the whole. It reports whether the wait is waited
// out. What decides is the wait (its timeout), never the system call.
//
// Not every wait with a timeout is a timed prompt: a display that redraws
// each time its wait times out (top, watch, a clock) would hold the call
// until its time ran out. Such a program redraws a screen (cursor
// positioning, erasing, the alternate screen: see redraws), which a
// prompt, a countdown or a progress line does not: a wait after output
// that redrew the screen since the last wait was waited out is waiting for
// input. The first wait too when the program drew a screen and set
// terminal modes of its own (top, vim: a full-screen program reading keys);
// a script that clears the screen and then asks with read -t is waited out
// once.
func (a *Actor) waitOut(w procfs.Wait) bool {
	if w.Timeout <= 0 || time.Until(a.cur.deadline)-w.Timeout < timedWaitSlack {
		return false
	}
	ex, c := &a.ex, a.cur
	out := a.outputSoFar().len()
	next := &waitedOut{redraws: c.redraws.n, pid: w.PID, syscall: w.Syscall, timeout: w.Timeout, out: out, rounds: 1}
	if o := ex.waitedOut; o != nil {
		if c.redraws.n != o.redraws {
			return false
		}
		same := o.pid == w.PID && o.syscall == w.Syscall
		if same && o.out == out && nearly(o.timeout, w.Timeout) && w.PID != a.proc.PID() {
			// Back in the same wait with the same timeout, having printed
			// nothing: a timer that an idle program re-arms (ipython's
			// every 500 ms), not a prompt that will go on by itself. (bash's
			// own read -t has no timer of its own: read -t 1; read -t 1 is
			// two prompts.)
			return false
		}
		if same {
			next.rounds = o.rounds + 1
		}
		if next.rounds > maxWaitOuts {
			if own, err := a.proc.ModesChanged(); err != nil || own {
				// A program with terminal modes of its own that prints at
				// each timeout, round after round (top where TERM has no
				// cursor moves): a display, not a countdown.
				return false
			}
		}
	} else if c.redraws.n > 0 {
		if own, err := a.proc.ModesChanged(); err != nil || own {
			return false
		}
	}
	ex.waitedOut = next
	a.wait.Stop()
	a.armStep(w.Timeout + waitproof.First)
	return true
}

// waitedOut is the wait last waited out in an exchange: how many redraws
// the call's output held when it began.
type waitedOut struct {
	redraws int
	// The wait waited out: whose, its timeout, the call's output length
	// then, and how many times in a row the same program's wait was.
	pid     int
	syscall string
	timeout time.Duration
	out     int
	rounds  int
}

// maxWaitOuts is how many waits in a row of a program with terminal modes
// of its own that prints at each are waited out (a countdown's few rounds)
// before it is taken for a display.
const maxWaitOuts = 5

// nearly reports whether two timeouts are the same within a tenth (a
// re-armed timer is read a little after it was set).
func nearly(a, b time.Duration) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= max(a, b)/10
}

// A marker's probe that found bash still on its way to the prompt is taken
// again: maxReprobes times at once, then after pauses that double up to
// reprobeMaxPause, until timedReprobes of those; after that the tracker's
// looks go on, with their backoff. (On a loaded machine bash may need many
// milliseconds to get the CPU; a long backoff there would make one agent
// wait a tenth of a second while others are served.)
const (
	maxReprobes     = 3
	timedReprobes   = 64
	reprobeMaxPause = 4 * time.Millisecond
)

// reprobe takes an inconclusive probe of ours again and reports whether it
// did (or will, after a pause).
func (a *Actor) reprobe(p *ptyproc.Probe) bool {
	if _, ours := p.Tag.(probeTag); !ours {
		return false
	}
	ex := &a.ex
	switch {
	case ex.reprobes < maxReprobes:
		ex.reprobes++
		a.proc.Probe(probeTag{ex.gen}, false)
		return true
	case ex.reprobes < maxReprobes+timedReprobes:
		n := ex.reprobes - maxReprobes
		ex.reprobes++
		pause := min(100*time.Microsecond<<min(n, 10), reprobeMaxPause)
		a.lookAgain(pause, &tick{kind: tickReprobe, c: a.cur, n: ex.gen})
		return true
	}
	return false
}

// stoppedShell continues a bash that stopped itself (kill -STOP $$,
// suspend -f): nobody at a terminal would ever type to it again.
func (a *Actor) stoppedShell(p *ptyproc.Probe) bool {
	if !p.LeaderStopped || a.ex.continued {
		return false
	}
	a.ex.continued = true
	if err := syscall.Kill(a.proc.PID(), syscall.SIGCONT); err == nil {
		a.cur.notes = append(a.cur.notes, "[bash was stopped (SIGSTOP or suspend): sent it SIGCONT]")
	}
	a.wait.Again()
	return true
}

// stdinGone resets a bash that waits in its input read while the input
// typed to the terminal stays unread: its standard input is no longer the
// terminal (exec 0<file), so nothing typed will ever reach it.
func (a *Actor) stdinGone(ctx actor.Context, p *ptyproc.Probe) bool {
	if !p.InputPending || p.Pgrp != a.proc.PID() || !p.Leader.Blocked() || p.Leader.Nr != sysRead || p.Leader.Args[0] != 0 {
		return false
	}
	in, err := os.Readlink("/proc/" + strconv.Itoa(a.proc.PID()) + "/fd/0")
	if err == nil && (in == a.proc.TTYName() || in == "/dev/tty") {
		return false
	}
	a.broken(ctx, fmt.Sprintf("bash no longer reads its terminal: its standard input is %q (a command redirected it, as exec 0< does), so nothing typed can reach it", in))
	return true
}

// bashStderr says where bash's stderr, where it prints its prompt, goes:
// elsewhere than the terminal, and to a pipe (exec 2> >(tee log)).
// /dev/tty (exec 2>/dev/tty, as a script puts stderr back) is the
// terminal too: it is bash's controlling terminal, which is its session's.
func (a *Actor) bashStderr() (elsewhere, piped bool) {
	out, err := os.Readlink("/proc/" + strconv.Itoa(a.proc.PID()) + "/fd/2")
	return err != nil || out != a.proc.TTYName() && out != "/dev/tty", err == nil && strings.HasPrefix(out, "pipe:[")
}

// textStolen names a program other than bash, started from it, that reads
// its terminal (a background job of a shell without job control, or a
// program that opened the terminal by its path): typed text reaches
// whichever of them reads first. Empty when there is none.
func (a *Actor) textStolen() string {
	readers, err := procfs.OtherReaders(a.proc.Tree(), a.proc.Terminal())
	if err != nil || len(readers) == 0 {
		return ""
	}
	return describeWaiter(readers[0]) + ", which reads the same terminal as bash " +
		"(a background job of a shell without job control, set +m, or a program that opened the terminal itself),"
}

// atPrompt: bash is proven back at its prompt; the exchange is over.
func (a *Actor) atPrompt(ctx actor.Context) {
	if a.ex.answered {
		// Its answer is decided; a later proof of the same prompt (a probe
		// taken again, the tracker's look) while it waits for another
		// look of its own must not decide it again.
		return
	}
	a.ex.answered = true
	switch a.ex.step {
	case stepText:
		a.lineDone(ctx)
	case stepQuery:
		a.queryDone(ctx)
	case stepInterrupt:
		a.interruptDone(ctx)
	case stepCancel:
		a.cancelDone(ctx)
	}
}
