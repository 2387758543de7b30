package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The running executable plays the sandbox's parts when roleVariable names
// one: the package's init function runs the part and exits, before main
// (or a test binary's TestMain) starts. Any binary that imports this
// package, the command and every test binary, can therefore make sandboxes.
const (
	roleVariable   = "DSH_ACTORS_SANDBOX_ROLE"
	paramsVariable = "DSH_ACTORS_SANDBOX_PARAMS"
	roleStage      = "stage"
	roleInit       = "init"
	// controlFD is the socket to the host, in the stage and in init.
	controlFD = 3
	// gateFD is the stage's gate, when it has one (Gate).
	gateFD = 4
)

func init() {
	switch os.Getenv(roleVariable) {
	case roleStage:
		setName("dsh-sandbox-stg")
		os.Exit(runStage())
	case roleInit:
		setName(InitName)
		os.Exit(runInit())
	}
}

// InitName is what ps shows of init (its comm).
const InitName = "dsh-sandbox"

// setName sets the comm of the main thread (package init functions run on
// it), which is what ps shows.
func setName(name string) {
	b := append([]byte(name), 0)
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0)
}

// params tell the stage and init what to build.
type params struct {
	// Flags are the namespaces to clone init into (CLONE_NEW*); zero means
	// none, and the host starts init itself.
	Flags uintptr `json:"flags,omitempty"`
	// UIDMap and GIDMap map ids in the new user namespace.
	UIDMap []syscall.SysProcIDMap `json:"uidMap,omitempty"`
	GIDMap []syscall.SysProcIDMap `json:"gidMap,omitempty"`
	// Setgroups allows setgroups(2) inside (only with a gid map written by
	// a privileged host).
	Setgroups bool `json:"setgroups,omitempty"`
	// Files, when set, makes the system read-only but for these paths.
	Files *fileParams `json:"files,omitempty"`
	// Gate: the stage waits on gateFD before it clones init.
	Gate bool `json:"gate,omitempty"`
}

type fileParams struct {
	// Writable are directories that stay writable.
	Writable []string `json:"writable"`
	// Hide are directories shown empty.
	Hide []string `json:"hide,omitempty"`
}

func readParams() (params, error) {
	var p params
	err := json.Unmarshal([]byte(os.Getenv(paramsVariable)), &p)
	return p, err
}

// runStage clones init into the namespaces and exits: it is small, so the
// clone (which cannot use vfork with CLONE_NEWUSER) copies little. Init is
// then an orphan, and the host holds it by its socket and its pidfd.
func runStage() int {
	ctl := os.NewFile(controlFD, "control")
	fail := func(err error) int {
		b, _ := json.Marshal(reply{Op: opHello, Err: err.Error(), Errno: errnoOf(err)})
		_, _ = unix.Write(controlFD, b)
		return 1
	}
	p, err := readParams()
	if err != nil {
		return fail(fmt.Errorf("reading the sandbox's parameters: %w", err))
	}
	if p.Gate {
		// The host moves the stage into the agent's cgroup, then opens
		// the gate: init is born inside.
		var b [1]byte
		if n, err := unix.Read(gateFD, b[:]); n != 1 {
			return fail(fmt.Errorf("waiting for the host to open the gate: %v", err))
		}
		unix.Close(gateFD)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	env := []string{roleVariable + "=" + roleInit, paramsVariable + "=" + os.Getenv(paramsVariable), "GORACE=atexit_sleep_ms=0"}
	_, err = syscall.ForkExec("/proc/self/exe", []string{"dsh-actors-sandbox-init"}, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{devnull.Fd(), devnull.Fd(), os.Stderr.Fd(), ctl.Fd()},
		Sys: &syscall.SysProcAttr{
			Setsid:                     true,
			Cloneflags:                 p.Flags,
			UidMappings:                p.UIDMap,
			GidMappings:                p.GIDMap,
			GidMappingsEnableSetgroups: p.Setgroups,
		},
	})
	if err != nil {
		return fail(fmt.Errorf("creating the namespaces (clone): %w", err))
	}
	return 0
}

func errnoOf(err error) int {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return int(errno)
	}
	return 0
}

// runInit is the sandbox's init.
func runInit() int {
	ctl := os.NewFile(controlFD, "control")
	p, err := readParams()
	c, cerr := newConn(ctl)
	if cerr != nil {
		return 1
	}
	if err != nil {
		_ = c.send(reply{Op: opHello, Err: "reading the sandbox's parameters: " + err.Error()})
		return 1
	}
	os.Unsetenv(roleVariable)
	os.Unsetenv(paramsVariable)
	notes, err := setUp(p)
	if err != nil {
		_ = c.send(reply{Op: opHello, Err: err.Error(), Errno: errnoOf(err), Notes: notes})
		return 1
	}
	// The agent's programs may signal init (they run as its user): it
	// catches every signal it can and drops it. (Not SIG_IGN: an ignored
	// signal stays ignored across exec, in every program init starts.)
	// SIGKILL and SIGSTOP from inside its own pid namespace never reach a
	// namespace's init.
	dropped := make(chan os.Signal, 64)
	var catch []os.Signal
	for sig := syscall.Signal(1); sig < 65; sig++ {
		switch sig {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD:
		default:
			catch = append(catch, sig)
		}
	}
	signal.Notify(dropped, catch...)
	go func() {
		for range dropped {
		}
	}()
	// Nothing of init's may be traced or read through /proc by the agent:
	// it holds the socket to the host.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	// Init's death ends the sandbox, so the agent's hog is killed first.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("500"), 0)

	if p.Flags&unix.CLONE_NEWPID == 0 {
		// Orphans come to init, not to the system, so that init reaps
		// them and they stay countable.
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	self, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		_ = c.send(reply{Op: opHello, Err: "pidfd_open: " + err.Error(), Errno: errnoOf(err)})
		return 1
	}
	s := &initState{c: c, ptys: map[uint64]*os.File{}, kids: map[int]uint64{}, work: make(chan request), acks: make(chan uint64, 16)}
	ready := make(chan spawnerReady, 1)
	go s.spawner(p, ready)
	if r := <-ready; r.err != nil {
		_ = c.send(reply{Op: opHello, Err: r.err.Error(), Errno: errnoOf(r.err)})
		return 1
	} else if r.note != "" {
		notes = append(notes, r.note)
	}
	go s.reaper()
	// Closed through its File: a File left to the garbage collector closes
	// its number again later, when it may be another descriptor's.
	selfFile := os.NewFile(uintptr(self), "pidfd")
	files := []*os.File{selfFile}
	if p.Flags&unix.CLONE_NEWNET != 0 {
		// The host's proofs ask sock_diag about the agent's sockets: only
		// a socket opened in this network namespace finds them.
		if fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG); err == nil {
			files = append(files, os.NewFile(uintptr(fd), "sock_diag"))
		}
	}
	err = c.send(reply{Op: opHello, PID: os.Getpid(), Notes: notes}, files...)
	closeAll(files)
	if err != nil {
		return 1
	}
	buf := make([]byte, maxMessage)
	for {
		var req request
		files, err := c.recv(buf, &req)
		closeAll(files)
		if errors.Is(err, errLostFDs) {
			err = nil // the host sends none
		}
		if err != nil {
			// The host is gone (or broke the protocol): end the sandbox.
			// As pid 1, init's exit kills every process in it; without a
			// pid namespace, init kills its cgroup's processes first.
			if p.Flags&unix.CLONE_NEWPID == 0 {
				killOwnCgroup()
			}
			return 0
		}
		switch req.Op {
		case opPTY:
			s.openPTY(req)
		case opClosePTY:
			s.ptyMu.Lock()
			if f := s.ptys[req.PTY]; f != nil {
				f.Close()
				delete(s.ptys, req.PTY)
			}
			s.ptyMu.Unlock()
		case opExec:
			s.work <- req
		case opAck:
			select {
			case s.acks <- req.ID:
			default: // nobody waits for it (it came late)
			}
		default:
			_ = c.send(reply{Op: req.Op, ID: req.ID, Err: fmt.Sprintf("unknown request %q", req.Op)})
		}
	}
}

type initState struct {
	c *conn
	// mu is held across each start (until the host has read the
	// program's pid) and each round of reaping, so that a program is
	// known before its end is looked for, and is not reaped before the
	// host knows it.
	mu   sync.Mutex
	kids map[int]uint64 // pid → the exec request that started it
	work chan request
	acks chan uint64
	// ptyMu guards ptys, the slaves not yet given to a program.
	ptyMu sync.Mutex
	ptys  map[uint64]*os.File
}

// ackWait bounds how long init holds its reaping for the host's ack.
const ackWait = 2 * time.Second

// capsNotGiven are the capabilities no program of the agent gets: with
// CAP_SYS_PTRACE it could trace init; with CAP_SYS_ADMIN it could unmount
// the sandbox's devpts and reach the host's terminals beneath.
var capsNotGiven = []uintptr{unix.CAP_SYS_PTRACE, unix.CAP_SYS_ADMIN}

// spawner starts every program, on one OS thread whose bounding set lacks
// capsNotGiven: credentials are per thread, and a program forked from this
// thread inherits them.
// spawnerReady says the spawner's thread is set up (err: it could not
// be, and no program may start; note: a lesser layer is missing).
type spawnerReady struct {
	err  error
	note string
}

func (s *initState) spawner(p params, ready chan<- spawnerReady) {
	runtime.LockOSThread() // for ever: the thread's credentials are changed
	// Programs start with no signal blocked, whatever the host had.
	var none unix.Sigset_t
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil)
	if p.Flags&unix.CLONE_NEWUSER != 0 {
		for _, c := range capsNotGiven {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil {
				ready <- spawnerReady{err: fmt.Errorf("dropping capability %d: %w", c, err)}
				return // never start a program with them
			}
		}
	}
	var note string
	if p.Files != nil {
		var err error
		if note, err = landlockWrites(landlockWritable(*p.Files)); err != nil {
			ready <- spawnerReady{err: err}
			return
		}
	}
	ready <- spawnerReady{note: note}
	for req := range s.work {
		s.exec(req)
	}
}

func (s *initState) exec(req request) {
	s.ptyMu.Lock()
	tty := s.ptys[req.PTY]
	delete(s.ptys, req.PTY)
	s.ptyMu.Unlock()
	if tty == nil {
		_ = s.c.send(reply{Op: opExec, ID: req.ID, Err: fmt.Sprintf("no terminal %d", req.PTY)})
		return
	}
	defer tty.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	pidfd := -1
	argv := append([]string{req.Path}, req.Args...)
	pid, err := syscall.ForkExec(req.Path, argv, &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: []uintptr{tty.Fd(), tty.Fd(), tty.Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, PidFD: &pidfd},
	})
	if err != nil {
		_ = s.c.send(reply{Op: opExec, ID: req.ID, Err: err.Error(), Errno: errnoOf(err)})
		return
	}
	s.kids[pid] = req.ID
	if pidfd < 0 {
		_ = s.c.send(reply{Op: opExec, ID: req.ID, PID: pid, Err: "no pidfd for the started program"})
		return
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	err = s.c.send(reply{Op: opExec, ID: req.ID, PID: pid}, f)
	f.Close()
	if err != nil {
		return
	}
	// Nothing is reaped until the host has read the pid (a program that
	// ends at once stays a zombie until then).
	timeout := time.NewTimer(ackWait)
	defer timeout.Stop()
	for {
		select {
		case id := <-s.acks:
			if id == req.ID {
				return
			}
		case <-timeout.C:
			return
		}
	}
}

// reaper reaps every child of init: the programs it started (their ends
// go to the host) and the orphans the sandbox's processes leave.
func (s *initState) reaper() {
	sig := make(chan os.Signal, 16)
	signal.Notify(sig, syscall.SIGCHLD)
	for range sig {
		s.mu.Lock()
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			if id, ok := s.kids[pid]; ok {
				delete(s.kids, pid)
				_ = s.c.send(reply{Op: opExited, ID: id, PID: pid, Status: uint32(ws)})
			}
		}
		s.mu.Unlock()
	}
}

func (s *initState) openPTY(req request) {
	master, slave, name, err := openPTY()
	if err != nil {
		_ = s.c.send(reply{Op: opPTY, ID: req.ID, Err: err.Error(), Errno: errnoOf(err)})
		return
	}
	s.ptyMu.Lock()
	dup, derr := unix.FcntlInt(slave.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if derr == nil {
		s.ptys[req.ID] = os.NewFile(uintptr(dup), name)
	}
	s.ptyMu.Unlock()
	if derr != nil {
		master.Close()
		slave.Close()
		_ = s.c.send(reply{Op: opPTY, ID: req.ID, Err: derr.Error(), Errno: errnoOf(derr)})
		return
	}
	_ = s.c.send(reply{Op: opPTY, ID: req.ID, TTY: name}, master, slave)
	master.Close()
	slave.Close()
}

// openPTY opens a new terminal pair in this mount namespace's devpts.
func openPTY() (master, slave *os.File, name string, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, "", fmt.Errorf("opening /dev/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, "", fmt.Errorf("unlocking the terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, "", fmt.Errorf("naming the terminal: %w", err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		master.Close()
		return nil, nil, "", fmt.Errorf("opening the terminal's slave: %w", errno)
	}
	name = "/dev/pts/" + strconv.Itoa(n)
	return master, os.NewFile(sfd, name), name, nil
}

// killOwnCgroup kills every other process of init's cgroup (a sandbox
// without a pid namespace, whose host is gone).
func killOwnCgroup() {
	own, err := ownCgroups()
	if err != nil {
		return
	}
	var dir string
	if isCgroup2(cgroupRoot) {
		dir = filepath.Join(cgroupRoot, own[""])
	} else if rel, ok := own["pids"]; ok {
		dir = filepath.Join(cgroupRoot, "pids", rel)
	} else {
		return
	}
	if !strings.Contains(filepath.Base(dir), "-") || !strings.Contains(dir, "dsh-actors-") {
		return // not a sandbox's cgroup: never kill outside one
	}
	cg := &cgroup{dirs: []string{dir}}
	for range 1000 {
		pids, err := cg.procs()
		if err != nil {
			return
		}
		others := 0
		for _, pid := range pids {
			if pid != os.Getpid() {
				others++
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if others == 0 {
			return
		}
		// Reap what was ours, so the listing empties.
		for {
			pid, _ := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
}
