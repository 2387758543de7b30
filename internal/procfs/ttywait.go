package procfs

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/sigstate"
)

// WaitState says what a process group is doing with its terminal.
type WaitState int

const (
	// NotWaiting: no member is blocked reading the terminal (it runs, sleeps,
	// waits for a child or reads something else).
	NotWaiting WaitState = iota
	// WaitingInput: a member is proven blocked reading the terminal.
	WaitingInput
	// WaitUnknown: a member waits on the terminal and on something another
	// program can make ready (a relay's other side, a socket; see Also), or
	// in a way /proc cannot read; only silence can tell.
	WaitUnknown
	// IdleLoop: a member waits on the terminal and on nothing from outside,
	// but wakes itself soon (a short timeout, see Every) or has another
	// thread running: it waits for input if it does no work across a
	// wake-up, which its processor time (Work) tells.
	IdleLoop
)

func (s WaitState) String() string {
	switch s {
	case NotWaiting:
		return "not_waiting"
	case WaitingInput:
		return "waiting_input"
	case WaitUnknown:
		return "wait_unknown"
	case IdleLoop:
		return "idle_loop"
	}
	return "WaitState(" + strconv.Itoa(int(s)) + ")"
}

// Wait is the answer of [TTYWait].
type Wait struct {
	State WaitState
	// PID and Comm name the member that decided the state (zero when NotWaiting).
	PID  int
	Comm string
	// Syscall is the name of the system call it is blocked in.
	Syscall string
	// Timeout is, for a wait in select, poll or epoll, the wait's own
	// timeout when it has one (bash's read -t, a timer of an event loop):
	// it wakes by itself within that long of the look. Zero means none,
	// or not known.
	Timeout time.Duration
	// CPU is the processor time, in clock ticks, used by the members looked
	// at: the leader, and every member when the leader waits for a child.
	// A total that stays the same from one look to the next means none of
	// them ran meanwhile.
	CPU uint64
	// Also describes, for WaitUnknown, what else the member waits on that
	// another program can make ready.
	Also string
	// Every is, for IdleLoop, how soon the member's wait times out (zero
	// when it is another thread that runs).
	Every time.Duration
	// Work is, for IdleLoop and WaitUnknown, the time the waiting member's
	// threads (and what it started) have spent on a CPU, in nanoseconds.
	Work uint64
	// Busy: another thread of the waiting member was running, or ready to
	// run, at the look. Such a look proves nothing however little Work
	// grew: on a loaded machine a thread at work may get no CPU for a while.
	Busy bool
}

// Same reports whether w and o are the same wait of the same member,
// whatever ran between the looks that saw them.
func (w Wait) Same(o Wait) bool {
	return w.State == o.State && w.PID == o.PID && w.Comm == o.Comm && w.Syscall == o.Syscall && w.Also == o.Also
}

// TTYWait reports whether process group pgrp, the foreground group of the
// terminal t, is blocked
// reading that terminal.
//
// It looks at the group leader first; only when the leader is gone or waits
// for a child does it scan /proc for the other members, since that costs a
// read per process on the machine.
func TTYWait(pgrp int, t Terminal) (Wait, error) {
	tty := t.terminal()
	leader, err := Stat(pgrp)
	leaderAlive := err == nil && leader.PGRP == pgrp && !leader.Zombie()
	var cpu uint64
	if leaderAlive {
		w, waitsForChild := taskWait(leader, tty)
		if w.State != NotWaiting || !waitsForChild {
			w.CPU = leader.CPU
			if w.State == IdleLoop {
				// Its children may work while it loops (a wait for
				// Popen with a key check): their time counts.
				w.Work += membersWork(pgrp, leader.PID)
			}
			return w, nil
		}
		cpu = leader.CPU
	}
	members, err := Group(pgrp)
	if err != nil {
		return Wait{}, err
	}
	best := Wait{State: NotWaiting}
	for _, m := range members {
		if m.PID == pgrp {
			continue
		}
		cpu += m.CPU
		w, _ := taskWait(m, tty)
		if w.State != NotWaiting && asyncJob(m.PID) {
			continue
		}
		if w.State == WaitingInput {
			w.CPU = cpu
			return w, nil
		}
		if rank(w.State) > rank(best.State) {
			best = w
		}
	}
	best.CPU = cpu
	return best, nil
}

// asyncJob reports whether pid ignores both SIGINT and SIGQUIT, as bash
// sets up the commands it runs with & while job control is off: such a job
// stays in the shell's process group, so in the foreground, but what it
// reads is not the foreground command waiting.
func asyncJob(pid int) bool {
	intr, err1 := sigstate.Ignores(pid, unix.SIGINT)
	quit, err2 := sigstate.Ignores(pid, unix.SIGQUIT)
	return err1 == nil && err2 == nil && intr && quit
}

// OtherReaders lists the processes of tree t other than its leader (the
// session's) that are proven blocked reading the terminal term. When the
// leader is a shell at its prompt, they compete with it for every line
// typed: a background job of a shell without job control (set +m) runs in
// the shell's own process group, so the terminal lets it read, and a
// process that left the session and opened the terminal by its path reads
// it freely. It reads every process's stat: for rare checks only.
func OtherReaders(t Tree, term Terminal) ([]Wait, error) {
	tty := term.terminal()
	sc, err := t.scan()
	if err != nil {
		return nil, err
	}
	var readers []Wait
	for _, m := range sc.members {
		if m.PID == t.Session {
			continue
		}
		if w, _ := taskWait(m, tty); w.State == WaitingInput {
			readers = append(readers, w)
		}
	}
	return readers, nil
}

// Terminal names a terminal's slave as its processes see it: the path they
// opened it by and its device number. Inside a sandbox with a devpts of its
// own, "/dev/pts/0" on the host is another terminal, so the device number
// comes from the slave itself.
type Terminal struct {
	Path string
	// Dev is the slave's device number (st_rdev); 0 when unknown.
	Dev uint64
}

// TerminalAt names the terminal at path, as this process sees it.
func TerminalAt(path string) Terminal {
	t := Terminal{Path: path}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err == nil {
		t.Dev = st.Rdev
	}
	return t
}

func (t Terminal) terminal() terminal {
	tty := terminal{path: t.Path, nr: -1}
	if t.Dev != 0 {
		tty.nr = encodeDev(t.Dev)
	}
	return tty
}

// taskWait checks every thread of p. waitsForChild is true when a thread is
// blocked in wait4/waitid, so the work happens in another member.
//
// A single-threaded p blocked reading the terminal, or waiting for it in an
// event loop (select, poll, epoll) with nothing else to wake it, proves a
// wait for input. With more threads it is an IdleLoop: its processor time
// across a watch decides, since another thread may be at work and hand
// work back. An event loop is unknown when it may also be woken from
// outside: a source another program can make ready, a child process alive,
// or another thread waiting for something other than work to do (a sleep,
// a connection, a child).
func taskWait(p Proc, tty terminal) (w Wait, waitsForChild bool) {
	if p.State == 'T' || p.State == 't' {
		// Stopped (SIGSTOP, or traced): it may sit in read, but it reads
		// nothing until it is continued.
		return Wait{State: NotWaiting}, false
	}
	base := "/proc/" + strconv.Itoa(p.PID)
	tids, err := readDirNames(base + "/task")
	if err != nil {
		return Wait{State: NotWaiting}, false
	}
	type look struct {
		call  Syscall
		kind  syscallKind
		known bool
	}
	looks := make([]look, 0, len(tids))
	best, bestAt := Wait{State: NotWaiting}, -1
	running := false
	for _, tid := range tids {
		raw, err := os.ReadFile(base + "/task/" + tid + "/syscall")
		if err != nil {
			continue
		}
		call, err := ParseSyscall(raw)
		if err != nil {
			continue
		}
		kind, known := syscallKinds[call.Nr]
		looks = append(looks, look{call, kind, known})
		if call.Running {
			running = true
			continue
		}
		if !call.Blocked() || !known {
			continue
		}
		found := Wait{State: NotWaiting, PID: p.PID, Syscall: syscallNames[kind]}
		switch kind {
		case kindRead:
			if tty.is(p, base, int(call.Args[0])) {
				found.State = WaitingInput
			}
		case kindSelect, kindPoll, kindEpoll:
			found = eventWait(p, base, kind, call, tty, found)
		case kindWaitChild:
			waitsForChild = true
		}
		if rank(found.State) > rank(best.State) || found.State == WaitingInput && kind == kindRead {
			best, bestAt = found, len(looks)-1
		}
	}
	if best.State == NotWaiting {
		return best, waitsForChild
	}
	best.Comm = currentComm(p)
	byRead := best.Syscall == syscallNames[kindRead]
	if !byRead {
		if best.State == WaitingInput || best.State == IdleLoop {
			best = otherWakers(p, base, tids, tty, best, func(yield func(int, Syscall, syscallKind, bool) bool) {
				for i, l := range looks {
					if i != bestAt && !yield(i, l.call, l.kind, l.known) {
						return
					}
				}
			})
		}
	}
	if best.State == WaitingInput || best.State == IdleLoop {
		// Another thread's timed wait wakes the program by itself (a
		// thread.join(3) while a thread asks input()): a timeout of its own.
		for i, l := range looks {
			if i == bestAt || !l.known || l.kind != kindFutex || !l.call.Blocked() {
				continue
			}
			if d, ok := futexTimeout(p, l.call); ok && (best.Timeout == 0 || d < best.Timeout) {
				best.Timeout = max(d, time.Millisecond)
			}
		}
	}
	if best.State == WaitingInput && (running || len(tids) > 1) {
		// A thread waits for the terminal while another may work (node's
		// worker, input() in a thread while the main thread computes; at
		// a look it may be waiting for a lock): its work decides.
		best.State, best.Every = IdleLoop, 0
	}
	if best.State != WaitingInput {
		best.Work = ProcessWork(p.PID) + descendantsWork(base, tids)
		best.Busy = running
	}
	return best, false
}

// otherWakers makes an idle loop unknown when something other than the
// terminal and its own work may wake it: another thread that waits for
// something else (a sleep, a connection, a child), or a child process
// alive.
func otherWakers(p Proc, base string, tids []string, tty terminal, w Wait, others func(func(int, Syscall, syscallKind, bool) bool)) Wait {
	what := ""
	others(func(_ int, call Syscall, kind syscallKind, known bool) bool {
		if call.Running {
			return true
		}
		what = threadWaitsOnOther(p, base, known, kind, call, tty)
		return what == ""
	})
	if what == "" {
		if c, ok := liveChild(base, tids); ok {
			what = fmt.Sprintf("its child process `%s` (pid %d), whose exit or output wakes it", c.Comm, c.PID)
		}
	}
	if what != "" {
		w.State, w.Every, w.Also = WaitUnknown, 0, what
	}
	return w
}

// threadWaitsOnOther describes what a thread of p (not the one waiting on
// the terminal) waits for, when that is something other than work to do:
// "" for a thread that is idle (a futex, the terminal, an event loop on
// p's own sources) or not blocked.
func threadWaitsOnOther(p Proc, base string, known bool, kind syscallKind, call Syscall, tty terminal) string {
	if !call.Blocked() {
		return ""
	}
	if !known {
		return fmt.Sprintf("another of its threads, blocked in system call %d", call.Nr)
	}
	switch kind {
	case kindFutex:
		return ""
	case kindSleep:
		return "another of its threads, which sleeps (a timer of its own)"
	case kindWaitChild:
		// A wait for a child is looked for apart (liveChild); a wait for a
		// signal is a helper's (glibc's thread for POSIX timers, as vim's).
		return ""
	case kindRead:
		fd := int(call.Args[0])
		if tty.is(p, base, fd) {
			return ""
		}
		target, err := os.Readlink(base + "/fd/" + strconv.Itoa(fd))
		if err != nil {
			return ""
		}
		if d := foreignSource(target, readOwnFDs(base)); d != "" {
			return "another of its threads, which reads " + d
		}
		return ""
	case kindSelect, kindPoll, kindEpoll:
		fds, ok := watchedSources(p, base, kind, call)
		if !ok {
			return ""
		}
		if _, foreign := sourceKinds(p, base, fds, tty); len(foreign) > 0 {
			return "another of its threads, which waits on " + strings.Join(foreign, ", ")
		}
	}
	return ""
}

// futexTimeout reads how long a thread blocked in futex(2) has until its
// timeout, when it has one: relative for FUTEX_WAIT, an absolute time on
// CLOCK_MONOTONIC (or CLOCK_REALTIME with FUTEX_CLOCK_REALTIME) for
// FUTEX_WAIT_BITSET, as glibc's timed waits (sem_clockwait, a Python
// lock's acquire with a timeout) give it.
func futexTimeout(p Proc, call Syscall) (time.Duration, bool) {
	const (
		futexWait        = 0
		futexWaitBitset  = 9
		futexCmdMask     = 0x7f
		futexClockRealtm = 256
	)
	if call.Nr != futexSyscall || call.Args[3] == 0 {
		return 0, false
	}
	op := call.Args[1]
	raw, err := readMem(p.PID, call.Args[3], 16)
	if err != nil {
		return 0, false
	}
	at := time.Duration(int64(binary.LittleEndian.Uint64(raw[0:8])))*time.Second + time.Duration(int64(binary.LittleEndian.Uint64(raw[8:16])))
	switch op & futexCmdMask {
	case futexWait:
		return at, at > 0
	case futexWaitBitset:
		clock := int32(unix.CLOCK_MONOTONIC)
		if op&futexClockRealtm != 0 {
			clock = unix.CLOCK_REALTIME
		}
		var now unix.Timespec
		if unix.ClockGettime(clock, &now) != nil {
			return 0, false
		}
		left := at - time.Duration(now.Nano())
		return left, left > 0
	}
	return 0, false
}

// childPIDs lists the children of the process at base, made by any of its
// threads tids (/proc/PID/task/TID/children).
func childPIDs(base string, tids []string) []int {
	var pids []int
	for _, tid := range tids {
		b, err := os.ReadFile(base + "/task/" + tid + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// liveChild returns a child of the process at base that has not exited.
func liveChild(base string, tids []string) (Proc, bool) {
	for _, pid := range childPIDs(base, tids) {
		if c, err := Stat(pid); err == nil && !c.Zombie() {
			return c, true
		}
	}
	return Proc{}, false
}

// maxDescendants bounds descendantsWork.
const maxDescendants = 256

// descendantsWork sums the time on a CPU of every thread of the
// descendants of the process at base: the program a relay such as script
// runs in a session of its own, a worker it started.
func descendantsWork(base string, tids []string) uint64 {
	var ns uint64
	queue := childPIDs(base, tids)
	for seen := 0; len(queue) > 0 && seen < maxDescendants; seen++ {
		pid := queue[0]
		queue = queue[1:]
		cb := "/proc/" + strconv.Itoa(pid)
		ctids, err := readDirNames(cb + "/task")
		if err != nil {
			continue
		}
		ns += ProcessWork(pid)
		queue = append(queue, childPIDs(cb, ctids)...)
	}
	return ns
}

// eventWait judges a select, poll or epoll wait (see sources.go): the
// terminal among its sources and nothing from outside with a long or no
// timeout is a wait for input; with a short one, an idle loop that the
// owner confirms by its processor time; with a source from outside (a
// relay, a network client), unknown.
func eventWait(p Proc, base string, kind syscallKind, call Syscall, tty terminal, w Wait) Wait {
	fds, ok := watchedSources(p, base, kind, call)
	if !ok {
		w.State = WaitUnknown // its memory could not be read
		return w
	}
	hasTTY, foreign := sourceKinds(p, base, fds, tty)
	switch {
	case !hasTTY:
		w.State = NotWaiting
	case len(foreign) > 0:
		w.State, w.Also = WaitUnknown, strings.Join(foreign, ", ")
	default:
		w.State = WaitingInput
		d, ok := callTimeout(p, call)
		switch {
		case ok && d < keyCheckTimeout:
			// A loop that checks for a key between bits of work (or in
			// a wait for something else): as likely working as waiting.
			w.State, w.Also = WaitUnknown, fmt.Sprintf("a timeout of %d ms, as a loop checking for a key between bits of work has", d.Milliseconds())
		case ok && d < pollingTimeout:
			// An event loop with a timer due soon, or a slower key check:
			// its work decides, across two of its wake-ups (which its
			// owner has then seen: no timeout left to wait out).
			w.State, w.Every = IdleLoop, d
		case ok:
			w.Timeout = d
		}
	}
	return w
}

// membersWork sums the time on a CPU of every thread of the members of
// process group pgrp other than except. It reads every process's stat.
func membersWork(pgrp, except int) uint64 {
	members, err := Group(pgrp)
	if err != nil {
		return 0
	}
	var ns uint64
	for _, m := range members {
		if m.PID == except {
			continue
		}
		ns += ProcessWork(m.PID)
	}
	return ns
}

// rank orders the states a thread can show: a proof beats an idle loop,
// which beats an unknown wait.
func rank(s WaitState) int {
	switch s {
	case WaitingInput:
		return 3
	case IdleLoop:
		return 2
	case WaitUnknown:
		return 1
	}
	return 0
}

// ProcessWork is the time on a CPU, in nanoseconds, of every thread of
// process pid, read from its CPU clock (clock_gettime with the process's
// CPUCLOCK_SCHED clock id). Unlike /proc's schedstat and stat, which the
// kernel brings up to date at a context switch or a tick (and a tickless
// CPU running one task has none), the clock adds the time the running
// threads have used so far. 0 when the process is gone.
func ProcessWork(pid int) uint64 {
	const cpuclockSched = 2 // CPUCLOCK_SCHED; MAKE_PROCESS_CPUCLOCK(pid, clock) = ^pid<<3 | clock
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid<<3|cpuclockSched), &ts); err != nil {
		return 0
	}
	return uint64(ts.Nano())
}

// currentComm is p's name now. p was read before its system call, and a
// child that was still a copy of its shell then ("bash") may have executed
// its program ("cat") since.
func currentComm(p Proc) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/comm")
	if err != nil {
		return p.Comm
	}
	return strings.TrimSuffix(string(b), "\n")
}

type syscallKind int

const (
	kindRead syscallKind = iota
	kindSelect
	kindPoll
	kindEpoll
	kindWaitChild
	kindFutex
	kindSleep
)

var syscallNames = map[syscallKind]string{
	kindRead:      "read",
	kindSelect:    "select",
	kindPoll:      "poll",
	kindEpoll:     "epoll_wait",
	kindWaitChild: "wait4", // or a wait for a signal
	kindFutex:     "futex",
	kindSleep:     "nanosleep",
}

// terminal is the terminal asked about: its slave's path and device number.
type terminal struct {
	path string
	nr   int // as in /proc/PID/stat's tty_nr; -1 when unknown
}

// is reports whether fd of process p is the terminal: opened by its path,
// or as /dev/tty while it is p's controlling terminal (how sudo, ssh and
// less ask for passwords and keys).
func (t terminal) is(p Proc, base string, fd int) bool {
	if fd < 0 {
		return false
	}
	target, err := os.Readlink(base + "/fd/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	return target == t.path || target == "/dev/tty" && t.nr > 0 && p.TTYNr == t.nr
}

// encodeDev encodes a device number the way /proc/PID/stat shows tty_nr.
func encodeDev(rdev uint64) int {
	major, minor := unix.Major(rdev), unix.Minor(rdev)
	return int(minor&0xff | major<<8 | (minor&^0xff)<<12)
}

// pollingTimeout: a wait on the terminal that times out sooner than this is
// a program looking for a key between bits of work, or an event loop with a
// timer due soon (IdleLoop); one with a longer timeout (read -t 1, ipython's
// 500 ms timer, vim's 4 s) is a wait for input with a timeout of its own
// (Wait.Timeout), or none.
const pollingTimeout = 500 * time.Millisecond

// keyCheckTimeout: a wait on the terminal that times out sooner than this is
// a loop checking for a key (a game, a progress display, a wait for a child
// that a key can cut short), no proof at all; node's REPL enters such a
// wait for a moment after each step, and its next wait is a long one.
const keyCheckTimeout = 100 * time.Millisecond

// callTimeout reads the timeout of a blocked select, poll or epoll call;
// ok is false when it has none (it waits until a source is ready).
func callTimeout(p Proc, call Syscall) (d time.Duration, ok bool) {
	t, known := timeoutArgs[call.Nr]
	if !known {
		return 0, false
	}
	arg := call.Args[t.arg]
	switch t.style {
	case millis:
		ms := int32(arg)
		if ms < 0 {
			return 0, false
		}
		return time.Duration(ms) * time.Millisecond, true
	case timeval, timespec:
		if arg == 0 {
			return 0, false // NULL: no timeout
		}
		raw, err := readMem(p.PID, arg, 16)
		if err != nil {
			return 0, true // unreadable: assume the worst, a short one
		}
		sec := int64(binary.LittleEndian.Uint64(raw[0:8]))
		frac := int64(binary.LittleEndian.Uint64(raw[8:16]))
		if t.style == timeval {
			frac *= 1000
		}
		return time.Duration(sec)*time.Second + time.Duration(frac), true
	}
	return 0, false
}

type timeoutStyle int

const (
	millis   timeoutStyle = iota // an int argument, -1 for none
	timeval                      // struct timeval *, NULL for none
	timespec                     // struct timespec *, NULL for none
)

type timeoutArg struct {
	arg   int
	style timeoutStyle
}

// maxWatchedFDs bounds how much of a select or poll set is read.
const maxWatchedFDs = 4096

func readMem(pid int, addr uint64, n int) ([]byte, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, int64(addr)); err != nil {
		return nil, fmt.Errorf("procfs: reading %d bytes of pid %d at %#x: %w", n, pid, addr, err)
	}
	return buf, nil
}

func readDirNames(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}

// How says, after the waiting member's name, how it was seen to wait for
// input: a read, or an event loop with nothing else to wake it.
func (w Wait) How() string {
	switch {
	case w.Syscall == "read":
		return "is blocked reading the terminal"
	case w.State == IdleLoop:
		return "waits for the terminal in " + w.Syscall + " and does no work when it wakes"
	case w.State == WaitingInput:
		return "waits for the terminal in " + w.Syscall + ", with nothing else that could wake it"
	case w.State == WaitUnknown && w.Also != "":
		return "waits in " + w.Syscall + " on the terminal and on " + w.Also + ", so its wait proves nothing"
	}
	return "waits in a way /proc cannot show"
}
