package waitproof

import (
	"sync/atomic"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

// Timings.
const (
	// First is how soon after Start the first look is taken.
	First = 500 * time.Microsecond
	// Quiet is the output silence a look waits for, and the gap between the
	// two probes of a proof.
	Quiet = time.Millisecond
	// MaxInterval caps the backoff between looks.
	MaxInterval = 200 * time.Millisecond
	// LoopQuiet is how long an idle loop (procfs.IdleLoop) whose wake-up
	// is not known (another of its threads ran) is watched; one that times
	// out is watched past its wake-up.
	LoopQuiet = 25 * time.Millisecond
	// loopMargin is added to a loop's wake-up interval, so that the watch
	// sees it wake and go back.
	loopMargin = 3 * time.Millisecond
	// workSample is the least time between two samples of a waiter's
	// processor time that noteWork compares.
	workSample = 25 * time.Millisecond
	// loopWorkShare: an idle loop may use up to 1/loopWorkShare of the
	// watch on a CPU (ipython's loop wakes every 500 ms for 0.3 ms; a
	// program that looks for a key between bits of work uses far more).
	loopWorkShare = 50
)

// Tick is the tracker's timer firing, delivered through the owner's mailbox.
type Tick struct {
	t *Tracker
	n uint64
}

type tag struct {
	t *Tracker
	n uint64
}

// Verdict is what a probe meant.
type Verdict int

const (
	// Inconclusive: nothing proven yet; the tracker looks again later.
	Inconclusive Verdict = iota
	// Waiting: the program is proven to be waiting for input.
	Waiting
	// Unknown: the program waits in a way /proc cannot see into (epoll);
	// only silence can tell. The tracker keeps looking.
	Unknown
	// Stale: the probe or tick belongs to another tracker or episode.
	Stale
)

// Tracker schedules looks and judges probes for one process.
type Tracker struct {
	send  func(any)
	proc  *ptyproc.Process
	timer *time.Timer // made once, then Reset: a timer per look costs more
	// n numbers looks; only the newest one counts. The timer's function
	// reads it, hence atomic.
	n          atomic.Uint64
	at         time.Time
	delay      time.Duration
	lastOutput time.Time
	outputs    uint64
	confirm    procfs.Wait
	confirmOut uint64
	// loop is the idle loop being watched (see idleLoop): the wait, when
	// the watch began, its work and output count then.
	loop              procfs.Wait
	loopAt, loopUntil time.Time
	loopWork, loopOut uint64
	loopWakes         int
	active            bool
	// cpu is the foreground group's processor time at the last look, and
	// cpuAt when it was last seen to change (or the episode began).
	cpu   uint64
	cpuAt time.Time
	// work is the waiter's exact processor time at workAt (see noteWork).
	work   uint64
	workAt time.Time
}

// New returns a tracker that sends its ticks with send (the owner's Send to
// itself, safe from any goroutine).
func New(send func(any)) *Tracker { return &Tracker{send: send} }

// Start begins an episode on proc: looks start after First.
func (t *Tracker) Start(proc *ptyproc.Process) {
	if t.proc != proc {
		// Silence counts from the process's first episode, not from zero.
		t.lastOutput = time.Now()
	}
	t.proc = proc
	t.active = true
	t.cpuAt = time.Now() // what it did before this episode is not known
	t.delay = First
	t.confirm = procfs.Wait{}
	t.loop = procfs.Wait{}
	t.workAt = time.Time{}
	t.arm(First)
}

// Stop ends the episode.
func (t *Tracker) Stop() {
	t.active = false
	t.n.Add(1)
	if t.timer != nil {
		t.timer.Stop()
	}
}

// Active reports whether an episode is under way.
func (t *Tracker) Active() bool { return t.active }

// Output tells the tracker that the program wrote something.
func (t *Tracker) Output() {
	t.lastOutput = time.Now()
	t.outputs++
	if t.active && time.Until(t.at) > Quiet {
		t.delay = First
		t.arm(Quiet)
	}
}

// SilentFor is how long the program has written nothing.
func (t *Tracker) SilentFor() time.Duration { return time.Since(t.lastOutput) }

// QuietFor is how long, within this episode, the program has written
// nothing and the foreground group's members that the looks see have used
// no processor time: asleep, not working silently.
func (t *Tracker) QuietFor() time.Duration {
	return time.Since(later(t.lastOutput, t.cpuAt))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Tick handles the tracker's timer: it takes a look, or waits for quiet.
func (t *Tracker) Tick(m *Tick) {
	if m.t != t || m.n != t.n.Load() || !t.active {
		return
	}
	if quiet := time.Since(t.lastOutput); quiet < Quiet {
		t.arm(Quiet - quiet)
		return
	}
	t.proc.Probe(tag{t, t.n.Load()}, true)
}

// Owns reports whether p answers a look of this tracker's current episode.
func (t *Tracker) Owns(p *ptyproc.Probe) bool {
	tg, ok := p.Tag.(tag)
	return ok && tg.t == t && tg.n == t.n.Load() && t.active && p.Proc == t.proc
}

// Probe judges a probe and schedules the next look unless the verdict is
// Waiting or Stale. wait names the waiting process for Waiting and Unknown.
func (t *Tracker) Probe(p *ptyproc.Probe) (v Verdict, wait procfs.Wait) {
	tg, ok := p.Tag.(tag)
	if !ok || tg.t != t || tg.n != t.n.Load() || !t.active || p.Proc != t.proc {
		return Stale, procfs.Wait{}
	}
	if p.Err == nil && !p.InputPending {
		switch p.Wait.State {
		case procfs.WaitUnknown, procfs.IdleLoop:
			t.noteWork(p.Wait.Work)
		default:
			if p.Wait.CPU != t.cpu {
				t.cpu, t.cpuAt = p.Wait.CPU, time.Now()
			}
		}
	}
	if p.Err == nil {
		w := p.Wait
		w.CPU = 0 // a proof is the same wait seen twice, whatever ran between
		switch p.Wait.State {
		case procfs.WaitingInput:
			if !p.Drained {
				t.confirm = procfs.Wait{}
				t.arm(Quiet) // output was still on its way
				return Inconclusive, procfs.Wait{}
			}
			if t.confirm != w || t.confirmOut != t.outputs {
				t.confirm, t.confirmOut = w, t.outputs
				t.arm(Quiet)
				return Inconclusive, procfs.Wait{}
			}
			t.confirm = procfs.Wait{}
			return Waiting, p.Wait
		case procfs.IdleLoop:
			t.confirm = procfs.Wait{}
			if !p.Drained {
				t.loop = procfs.Wait{}
				t.arm(Quiet)
				return Inconclusive, procfs.Wait{}
			}
			return t.idleLoop(p.Wait)
		case procfs.WaitUnknown:
			t.loop = procfs.Wait{}
			t.backoff()
			return Unknown, p.Wait
		}
	}
	t.loop = procfs.Wait{}
	t.confirm = procfs.Wait{}
	t.backoff()
	return Inconclusive, procfs.Wait{}
}

// noteWork takes the exact processor time (ns) of a waiter and what it
// started, and counts it as work (QuietFor starts again) when it grew by
// more than 1/loopWorkShare of the time since the last sample, taken at
// least workSample apart: a loop that wakes 50 times a second to look for
// a key uses far less, a relay's program at work far more. (Clock ticks,
// charged a whole tick at a time, would count such a loop as working.)
func (t *Tracker) noteWork(w uint64) {
	now := time.Now()
	if t.workAt.IsZero() || w < t.work {
		t.work, t.workAt = w, now
		return
	}
	if el := now.Sub(t.workAt); el >= workSample {
		if w-t.work > uint64(el)/loopWorkShare {
			t.cpuAt = now
		}
		t.work, t.workAt = w, now
	}
}

// idleLoop judges a wait on the terminal that wakes itself soon or has
// other threads: it is a wait for input once a watch that spans a wake-up
// finds the same wait at its end, with no output and almost no work between,
// and no thread ready to run at that look.
func (t *Tracker) idleLoop(w procfs.Wait) (Verdict, procfs.Wait) {
	now := time.Now()
	if !t.loop.Same(w) || t.loopOut != t.outputs || w.Work < t.loopWork {
		t.loop, t.loopWork, t.loopOut = w, w.Work, t.outputs
		t.watchLoop(now, w)
		return Inconclusive, procfs.Wait{}
	}
	// The watch ends past the wake-up the first look announced; later
	// looks see what is left of that timeout, or the next one's.
	if now.Before(t.loopUntil) {
		t.arm(t.loopUntil.Sub(now))
		return Inconclusive, procfs.Wait{}
	}
	if since := now.Sub(t.loopAt); w.Busy || w.Work-t.loopWork > uint64(since)/loopWorkShare {
		// It works: watch again from here.
		t.loopWork = w.Work
		t.watchLoop(now, w)
		return Inconclusive, procfs.Wait{}
	}
	if t.loopWakes++; w.Every > 0 && t.loopWakes < 2 {
		// One quiet wake-up may have been a timer of its own, with the
		// one that prints next (node runs one 15 ms after each step, before
		// a user's setTimeout): the next one must be quiet too.
		t.loopUntil = now.Add(LoopWatch(w))
		t.arm(t.loopUntil.Sub(now))
		return Inconclusive, procfs.Wait{}
	}
	t.loop = procfs.Wait{}
	return Waiting, w
}

func (t *Tracker) watchLoop(now time.Time, w procfs.Wait) {
	t.loopAt, t.loopWakes = now, 0
	t.loopUntil = now.Add(LoopWatch(w))
	t.arm(t.loopUntil.Sub(now))
}

// loopWatch is how long an idle loop is watched at least: past its next
// wake-up when its timeout says when (node's REPL sets a 15 ms timer after
// each step), else LoopQuiet.
func LoopWatch(w procfs.Wait) time.Duration {
	if w.Every > 0 {
		return w.Every + loopMargin
	}
	return LoopQuiet
}

// Again schedules another look soon, after a Waiting verdict the owner did
// not act on.
func (t *Tracker) Again() {
	if t.active {
		t.delay = First
		t.arm(Quiet)
	}
}

func (t *Tracker) backoff() {
	t.delay = min(t.delay*2, MaxInterval)
	t.arm(t.delay)
}

func (t *Tracker) arm(d time.Duration) {
	t.n.Add(1)
	t.at = time.Now().Add(d)
	if t.timer == nil {
		send := t.send
		t.timer = time.AfterFunc(d, func() { send(&Tick{t: t, n: t.n.Load()}) })
		return
	}
	// A firing that raced with this Reset carries the new number and only
	// makes a look early, which Tick tolerates.
	t.timer.Reset(d)
}
