package procfs

import (
	"bufio"
	"bytes"
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
	// WaitUnknown: a member waits in a way /proc cannot see into (epoll with
	// the terminal registered); only silence can tell.
	WaitUnknown
)

func (s WaitState) String() string {
	switch s {
	case NotWaiting:
		return "not_waiting"
	case WaitingInput:
		return "waiting_input"
	case WaitUnknown:
		return "wait_unknown"
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
	// Timeout is the wait's own timeout, when it has one (select or poll
	// with a timeout, bash's read -t): it ends by itself within that long
	// of the look. Zero means none, or not known.
	Timeout time.Duration
	// CPU is the processor time, in clock ticks, used by the members looked
	// at: the leader, and every member when the leader waits for a child.
	// A total that stays the same from one look to the next means none of
	// them ran meanwhile.
	CPU uint64
}

// TTYWait reports whether process group pgrp, the foreground group of the
// terminal whose slave is ttyPath (for example "/dev/pts/3"), is blocked
// reading that terminal.
//
// It looks at the group leader first; only when the leader is gone or waits
// for a child does it scan /proc for the other members, since that costs a
// read per process on the machine.
func TTYWait(pgrp int, ttyPath string) (Wait, error) {
	tty := newTerminal(ttyPath)
	leader, err := Stat(pgrp)
	leaderAlive := err == nil && leader.PGRP == pgrp && !leader.Zombie()
	var cpu uint64
	if leaderAlive {
		w, waitsForChild := taskWait(leader, tty)
		if w.State != NotWaiting || !waitsForChild {
			w.CPU = leader.CPU
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
		switch w.State {
		case WaitingInput:
			w.CPU = cpu
			return w, nil
		case WaitUnknown:
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
// session's) that are proven blocked reading the terminal ttyPath. When the
// leader is a shell at its prompt, they compete with it for every line
// typed: a background job of a shell without job control (set +m) runs in
// the shell's own process group, so the terminal lets it read, and a
// process that left the session and opened the terminal by its path reads
// it freely. It reads every process's stat: for rare checks only.
func OtherReaders(t Tree, ttyPath string) ([]Wait, error) {
	tty := newTerminal(ttyPath)
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

func newTerminal(ttyPath string) terminal {
	tty := terminal{path: ttyPath, nr: -1}
	var st unix.Stat_t
	if err := unix.Stat(ttyPath, &st); err == nil {
		tty.nr = encodeDev(st.Rdev)
	}
	return tty
}

// taskWait checks every thread of p. waitsForChild is true when a thread is
// blocked in wait4/waitid, so the work happens in another member.
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
	best := Wait{State: NotWaiting}
	for _, tid := range tids {
		raw, err := os.ReadFile(base + "/task/" + tid + "/syscall")
		if err != nil {
			continue
		}
		call, err := ParseSyscall(raw)
		if err != nil || !call.Blocked() {
			continue // running, or not in a system call
		}
		kind, known := syscallKinds[call.Nr]
		if !known {
			continue
		}
		var state WaitState
		var timeout time.Duration
		switch kind {
		case kindRead:
			if tty.is(p, base, int(call.Args[0])) {
				state = WaitingInput
			}
		case kindSelect:
			state, timeout = shortTimeout(p, call, selectWatchesTTY(p, base, call, tty))
		case kindPoll:
			state, timeout = shortTimeout(p, call, pollWatchesTTY(p, base, call, tty))
		case kindEpoll:
			if epollWatchesTTY(p, base, int(call.Args[0]), tty) {
				state = WaitUnknown
			}
		case kindWaitChild:
			waitsForChild = true
		}
		switch state {
		case WaitingInput:
			return Wait{State: WaitingInput, PID: p.PID, Comm: currentComm(p), Syscall: syscallNames[kind], Timeout: timeout}, false
		case WaitUnknown:
			best = Wait{State: WaitUnknown, PID: p.PID, Comm: currentComm(p), Syscall: syscallNames[kind]}
		}
	}
	return best, waitsForChild
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
)

var syscallNames = map[syscallKind]string{
	kindRead:      "read",
	kindSelect:    "select",
	kindPoll:      "poll",
	kindEpoll:     "epoll_wait",
	kindWaitChild: "wait4", // or a wait for a signal
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

// pollingTimeout: a select or poll on the terminal that will time out
// sooner than this is a program looping (checking for a key between bits of
// work), not one waiting for input; it is reported as WaitUnknown. Longer
// timeouts (vim wakes every few seconds) still count as waiting.
const pollingTimeout = time.Second

// shortTimeout turns WaitingInput into WaitUnknown when the call's timeout
// is shorter than pollingTimeout, and returns the timeout of a longer one
// (zero: none, or not known).
func shortTimeout(p Proc, call Syscall, state WaitState) (WaitState, time.Duration) {
	if state != WaitingInput {
		return state, 0
	}
	t, ok := timeoutArgs[call.Nr]
	if !ok {
		return state, 0
	}
	arg := call.Args[t.arg]
	var d time.Duration
	switch t.style {
	case millis:
		ms := int32(arg)
		if ms < 0 {
			return state, 0 // infinite
		}
		d = time.Duration(ms) * time.Millisecond
	case timeval, timespec:
		if arg == 0 {
			return state, 0 // NULL: infinite
		}
		raw, err := readMem(p.PID, arg, 16)
		if err != nil {
			return WaitUnknown, 0
		}
		sec := int64(binary.LittleEndian.Uint64(raw[0:8]))
		frac := int64(binary.LittleEndian.Uint64(raw[8:16]))
		if t.style == timeval {
			frac *= 1000
		}
		d = time.Duration(sec)*time.Second + time.Duration(frac)
	}
	if d < pollingTimeout {
		return WaitUnknown, 0
	}
	return state, d
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

// selectWatchesTTY reads the read set of select/pselect6(nfds, readfds, ...).
func selectWatchesTTY(p Proc, base string, call Syscall, tty terminal) WaitState {
	nfds := int(call.Args[0])
	addr := call.Args[1]
	if nfds <= 0 || addr == 0 {
		return NotWaiting
	}
	if nfds > maxWatchedFDs {
		nfds = maxWatchedFDs
	}
	set, err := readMem(p.PID, addr, (nfds+7)/8)
	if err != nil {
		return WaitUnknown
	}
	// fd_set is an array of longs; on little-endian machines bit n of the set
	// is bit n%8 of byte n/8.
	for fd := 0; fd < nfds; fd++ {
		if set[fd/8]&(1<<(fd%8)) != 0 && tty.is(p, base, fd) {
			return WaitingInput
		}
	}
	return NotWaiting
}

// pollWatchesTTY reads the pollfd array of poll/ppoll(fds, nfds, ...).
func pollWatchesTTY(p Proc, base string, call Syscall, tty terminal) WaitState {
	addr := call.Args[0]
	nfds := int(call.Args[1])
	if nfds <= 0 || addr == 0 {
		return NotWaiting
	}
	if nfds > maxWatchedFDs {
		nfds = maxWatchedFDs
	}
	const pollfdSize = 8 // int fd; short events; short revents
	raw, err := readMem(p.PID, addr, nfds*pollfdSize)
	if err != nil {
		return WaitUnknown
	}
	const wantsInput = 0x001 | 0x002 | 0x040 // POLLIN | POLLPRI | POLLRDNORM
	for i := 0; i < nfds; i++ {
		rec := raw[i*pollfdSize:]
		fd := int32(binary.LittleEndian.Uint32(rec[0:4]))
		events := binary.LittleEndian.Uint16(rec[4:6])
		if fd >= 0 && events&wantsInput != 0 && tty.is(p, base, int(fd)) {
			return WaitingInput
		}
	}
	return NotWaiting
}

// epollWatchesTTY looks for the terminal among the targets of an epoll fd,
// listed as "tfd: N ..." lines in /proc/PID/fdinfo/EPFD.
func epollWatchesTTY(p Proc, base string, epfd int, tty terminal) bool {
	f, err := os.Open(base + "/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("tfd:")) {
			continue
		}
		fields := bytes.Fields(line)
		if len(fields) < 2 {
			continue
		}
		fd, err := strconv.Atoi(string(fields[1]))
		if err == nil && tty.is(p, base, fd) {
			return true
		}
	}
	return false
}

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
