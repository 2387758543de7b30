package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// helloTimeout bounds how long init may take to say it is ready.
const helloTimeout = 10 * time.Second

// Sandbox is one agent's sandbox: an init process and what it started.
type Sandbox struct {
	c       *conn
	initPID int      // host pid of init
	initFD  *os.File // pidfd of init
	report  Report
	cg      *cgroup // nil without limits
	// diagName is the sock_diag socket registered with procfs for the
	// sandbox's network namespace ("" without one).
	diagName string

	mu      sync.Mutex
	nextID  uint64
	calls   map[uint64]chan answer
	kids    map[uint64]*Child // by exec id, until they end
	ended   bool
	endErr  error
	done    chan struct{} // closed when the reader stops: init is gone
	readerW sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

type answer struct {
	r     reply
	files []*os.File
	// lost: descriptors init sent with it were dropped (errLostFDs).
	lost bool
}

// Start makes a sandbox as w asks, or as close to it as the machine allows
// when w.Require is false; the report says what was obtained and why not
// more. When nothing is obtained (level off, or every mechanism
// unavailable), the sandbox is nil and programs run on the host.
func Start(w Want) (*Sandbox, Report, error) {
	plan := plan(w)
	if len(plan.missing) > 0 && w.Require {
		return nil, plan.report(), &WeakerError{Want: w, Report: plan.report()}
	}
	for plan.try != 0 {
		s, err := start(plan)
		if err == nil {
			return s, s.report, nil
		}
		if !plan.fallback(err) {
			return nil, plan.report(), err
		}
		if w.Require {
			return nil, plan.report(), &WeakerError{Want: w, Report: plan.report()}
		}
	}
	return nil, plan.report(), nil
}

func start(pl *planned) (*Sandbox, error) {
	hostEnd, initEnd, err := socketPair()
	if err != nil {
		return nil, err
	}
	var cg *cgroup
	if pl.has(Limits) {
		if cg, err = newCgroup(pl.want.Name, pl.want.Limits); err != nil {
			hostEnd.Close()
			initEnd.Close()
			return nil, &mechanismError{mech: Limits, err: err}
		}
	}
	fail := func(err error) (*Sandbox, error) {
		if cg != nil {
			cg.remove()
		}
		return nil, err
	}
	prm := pl.params()
	prm.Gate = prm.Flags != 0 && cg != nil
	pb, err := json.Marshal(prm)
	if err != nil {
		hostEnd.Close()
		initEnd.Close()
		return fail(err)
	}
	role := roleInit
	if prm.Flags != 0 {
		role = roleStage
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"dsh-actors-sandbox-" + role}
	// A race-detector build sleeps a second at exit unless told not to.
	cmd.Env = []string{roleVariable + "=" + role, paramsVariable + "=" + string(pb), "GORACE=atexit_sleep_ms=0"}
	cmd.ExtraFiles = []*os.File{initEnd}
	// A stage of a sandbox with limits waits to be moved into the cgroup
	// (its gate, fd 4), so that init is born inside, the move overlapping
	// the stage's own start.
	var gate *os.File
	if role == roleStage && cg != nil {
		r, w, err := os.Pipe()
		if err != nil {
			hostEnd.Close()
			initEnd.Close()
			return fail(err)
		}
		defer r.Close()
		gate = w
		defer func() { gate.Close() }()
		cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	}
	cmd.Stderr = os.Stderr
	// Its own group: a ^C at the host's terminal is the host's to handle.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if role == roleInit {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	err = cmd.Start()
	initEnd.Close()
	if err != nil {
		hostEnd.Close()
		return fail(fmt.Errorf("sandbox: starting init: %w", err))
	}
	c, err := newConn(hostEnd)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(err)
	}
	attached := false
	if gate != nil {
		if err := cg.attach(cmd.Process.Pid); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			c.uc.Close()
			cg.remove()
			return nil, &mechanismError{mech: Limits, err: err}
		}
		if _, err := gate.Write([]byte{1}); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			c.uc.Close()
			return fail(fmt.Errorf("sandbox: opening the stage's gate: %w", err))
		}
		attached = true
	}
	// The stage exits once init is cloned (init is then nobody's child but
	// the system's, held by its socket and pidfd); init started directly
	// stays this process's child. Either is reaped when it ends, without
	// waiting here: init's hello says what the stage did.
	go func() { _ = cmd.Wait() }()
	hello, files, err := readHello(c)
	if err != nil {
		c.uc.Close()
		var me *mechanismError
		if errors.As(err, &me) || hello.Errno != 0 {
			return fail(&mechanismError{mech: Process, err: err, errno: syscall.Errno(hello.Errno)})
		}
		return fail(err)
	}
	if len(files) < 1 || len(files) > 2 {
		closeAll(files)
		c.uc.Close()
		return fail(errors.New("sandbox: init sent no pidfd"))
	}
	pidfd := files[0]
	var diag *os.File // a sock_diag socket in the sandbox's network namespace
	if len(files) == 2 {
		diag = files[1]
	}
	pid, _, err := fdinfoPID(pidfd)
	if err != nil {
		pidfd.Close()
		c.uc.Close()
		return fail(err)
	}
	s := &Sandbox{
		c:       c,
		initPID: pid,
		initFD:  pidfd,
		cg:      cg,
		calls:   map[uint64]chan answer{},
		kids:    map[uint64]*Child{},
		done:    make(chan struct{}),
	}
	s.report = pl.report()
	s.report.Notes = append(s.report.Notes, hello.Notes...)
	if cg != nil && !attached {
		// Before init starts anything: what it starts is born inside.
		if err := cg.attach(pid); err != nil {
			s.kill()
			c.uc.Close()
			pidfd.Close()
			cg.remove()
			return nil, &mechanismError{mech: Limits, err: err}
		}
	}
	if diag != nil {
		fd, err := unix.Dup(int(diag.Fd()))
		diag.Close()
		if err == nil {
			unix.CloseOnExec(fd)
			s.diagName = "sandbox-" + strconv.Itoa(pid)
			procfs.RegisterNetDiag(s.diagName, fd)
		}
	}
	s.readerW.Add(1)
	go s.read()
	return s, nil
}

func readHello(c *conn) (reply, []*os.File, error) {
	_ = c.uc.SetReadDeadline(time.Now().Add(helloTimeout))
	defer c.uc.SetReadDeadline(time.Time{})
	var r reply
	files, err := c.recv(make([]byte, 64<<10), &r)
	if err != nil {
		if errors.Is(err, errEOF) {
			return r, nil, errors.New("sandbox: init ended before it was ready (see the host's standard error)")
		}
		return r, nil, fmt.Errorf("sandbox: waiting for init: %w", err)
	}
	if r.Op != opHello {
		closeAll(files)
		return r, nil, fmt.Errorf("sandbox: init said %q first", r.Op)
	}
	if r.Err != "" {
		closeAll(files)
		return r, nil, errors.New(r.Err)
	}
	return r, files, nil
}

// fdinfoPID reads the pid a pidfd refers to, in this process's pid
// namespace and in the innermost one.
func fdinfoPID(pidfd *os.File) (host, inner int, err error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(int(pidfd.Fd())))
	if err != nil {
		return 0, 0, fmt.Errorf("sandbox: reading a pidfd's pid: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			host, _ = strconv.Atoi(f[0])
			inner, _ = strconv.Atoi(f[len(f)-1])
			if host <= 0 {
				return 0, 0, errors.New("sandbox: the program has already ended")
			}
			return host, inner, nil
		}
	}
	return 0, 0, errors.New("sandbox: a pidfd's fdinfo has no pid")
}

// read delivers init's messages until the sandbox ends.
func (s *Sandbox) read() {
	defer s.readerW.Done()
	buf := make([]byte, 64<<10)
	var err error
	for {
		var r reply
		var files []*os.File
		files, err = s.c.recv(buf, &r)
		lost := errors.Is(err, errLostFDs)
		if err != nil && !lost {
			break
		}
		err = nil
		s.mu.Lock()
		switch r.Op {
		case opExited:
			if k := s.kids[r.ID]; k != nil {
				delete(s.kids, r.ID)
				k.status = syscall.WaitStatus(r.Status)
				close(k.exited)
			}
			closeAll(files)
		default:
			if ch := s.calls[r.ID]; ch != nil {
				delete(s.calls, r.ID)
				ch <- answer{r: r, files: files, lost: lost}
			} else {
				closeAll(files)
			}
		}
		s.mu.Unlock()
	}
	if errors.Is(err, errEOF) || errors.Is(err, os.ErrClosed) {
		err = nil
	} else {
		s.kill() // init broke the protocol: the sandbox cannot be trusted
	}
	// The socket closes as init begins to exit; the rest of its pid
	// namespace is killed after that, and its pidfd turns readable once
	// they are gone too.
	waitPidfd(s.initFD, killWait)
	s.mu.Lock()
	s.ended = true
	s.endErr = err
	for id, ch := range s.calls {
		delete(s.calls, id)
		close(ch)
	}
	// Init is gone, and with it (as pid 1) every program it started; the
	// host never learns their statuses.
	for id, k := range s.kids {
		delete(s.kids, id)
		k.status = syscall.WaitStatus(0)
		k.lost = true
		close(k.exited)
	}
	s.mu.Unlock()
	close(s.done)
}

// Ended reports whether the sandbox has ended (its init is gone), as soon
// as a request has been refused for it with ErrEnded, before Done closes.
func (s *Sandbox) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// sendFailed is the error for a request that could not be sent: ErrEnded
// when init no longer holds its end of the socket (its end is on the way,
// and the reader notices it first).
func (s *Sandbox) sendFailed(err error) error {
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		select {
		case <-s.done:
			return fmt.Errorf("%w (%v)", ErrEnded, err)
		case <-time.After(killWait):
		}
	}
	return fmt.Errorf("sandbox: %w", err)
}

// ErrEnded is returned for requests to a sandbox that has ended.
var ErrEnded = errors.New("sandbox: the agent's sandbox has ended")

func (s *Sandbox) call(req request) (answer, error) {
	ch := make(chan answer, 1)
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return answer{}, ErrEnded
	}
	s.nextID++
	req.ID = s.nextID
	s.calls[req.ID] = ch
	s.mu.Unlock()
	if err := s.c.send(req); err != nil {
		s.mu.Lock()
		delete(s.calls, req.ID)
		s.mu.Unlock()
		return answer{}, s.sendFailed(err)
	}
	a, ok := <-ch
	if !ok {
		return answer{}, ErrEnded
	}
	if a.r.Err != "" {
		closeAll(a.files)
		err := errors.New(a.r.Err)
		if a.r.Errno != 0 {
			err = fmt.Errorf("%s: %w", a.r.Err, syscall.Errno(a.r.Errno))
		}
		return a, err
	}
	return a, nil
}

// PTY is a terminal opened in the sandbox, not yet given to a program.
type PTY struct {
	id uint64
	// Master and Slave are the host's descriptors of the pair.
	Master, Slave *os.File
	// Name is the slave's path inside the sandbox.
	Name string
}

// OpenPTY opens a terminal in the sandbox's devpts.
func (s *Sandbox) OpenPTY() (*PTY, error) {
	a, err := s.call(request{Op: opPTY})
	if err != nil {
		return nil, err
	}
	if len(a.files) != 2 {
		closeAll(a.files)
		if a.lost {
			s.Discard(&PTY{id: a.r.ID})
			return nil, fmt.Errorf("sandbox: receiving the terminal: %w", errLostFDs)
		}
		return nil, errors.New("sandbox: init sent no terminal")
	}
	return &PTY{id: a.r.ID, Master: a.files[0], Slave: a.files[1], Name: a.r.TTY}, nil
}

// Discard tells init to drop its copy of a terminal no program got.
func (s *Sandbox) Discard(p *PTY) {
	_ = s.c.send(request{Op: opClosePTY, PTY: p.id})
}

// Child is a program started in a sandbox.
type Child struct {
	// PID is its pid on the host, for /proc; InnerPID is the pid the
	// agent's programs know it by.
	PID, InnerPID int
	// PidFD refers to it for as long as the Child is held.
	PidFD  *os.File
	exited chan struct{}
	status syscall.WaitStatus
	lost   bool
}

// Exited is closed once the program has ended and init has reaped it.
func (k *Child) Exited() <-chan struct{} { return k.exited }

// Status is how the program ended, once Exited is closed; lost is true when
// the sandbox ended first and the status is not known (it was killed with
// the sandbox).
func (k *Child) Status() (ws syscall.WaitStatus, lost bool) { return k.status, k.lost }

// Exec starts a program in a new session with terminal p as its
// controlling terminal and standard streams. path must be absolute.
func (s *Sandbox) Exec(p *PTY, path string, args, env []string, dir string) (*Child, error) {
	k := &Child{exited: make(chan struct{})}
	// Registered before the request goes: its end may come right after
	// the answer.
	ch := make(chan answer, 1)
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return nil, ErrEnded
	}
	s.nextID++
	id := s.nextID
	s.calls[id] = ch
	s.kids[id] = k
	s.mu.Unlock()
	drop := func() {
		s.mu.Lock()
		delete(s.calls, id)
		delete(s.kids, id)
		s.mu.Unlock()
	}
	if err := s.c.send(request{Op: opExec, ID: id, PTY: p.id, Path: path, Args: args, Env: env, Dir: dir}); err != nil {
		drop()
		return nil, s.sendFailed(err)
	}
	a, ok := <-ch
	if !ok {
		return nil, ErrEnded
	}
	if a.r.Err != "" {
		closeAll(a.files)
		drop()
		if a.r.Errno != 0 {
			return nil, &os.PathError{Op: "fork/exec", Path: path, Err: syscall.Errno(a.r.Errno)}
		}
		return nil, fmt.Errorf("sandbox: starting %s: %s", path, a.r.Err)
	}
	if len(a.files) != 1 {
		closeAll(a.files)
		drop()
		if a.lost {
			return nil, fmt.Errorf("sandbox: receiving the program's pidfd: %w", errLostFDs)
		}
		return nil, errors.New("sandbox: init sent no pidfd")
	}
	k.PidFD = a.files[0]
	k.InnerPID = a.r.PID
	// Init reaps nothing until the ack: the pid is there to read even if
	// the program has ended.
	host, _, err := fdinfoPID(k.PidFD)
	_ = s.c.send(request{Op: opAck, ID: id})
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		// The host's open-file limit, not the program: say so.
		_ = k.Signal(syscall.SIGKILL)
		k.PidFD.Close()
		drop()
		return nil, err
	}
	if err != nil {
		host = 0 // the ack came too late (init waits ackWait)
	}
	k.PID = host
	return k, nil
}

// Signal sends sig to the child through its pidfd: never to a process that
// reused its pid.
func (k *Child) Signal(sig syscall.Signal) error {
	return unix.PidfdSendSignal(int(k.PidFD.Fd()), sig, nil, 0)
}

// Report says what the sandbox obtained.
func (s *Sandbox) Report() Report { return s.report }

// InitPID is init's pid on the host.
func (s *Sandbox) InitPID() int { return s.initPID }

// Done is closed when the sandbox has ended: init is gone, and every
// process of a sandbox with its own pid namespace with it.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// InnerPID returns the pid a host pid has inside the sandbox, or 0 when the
// process is gone or not in it.
func (s *Sandbox) InnerPID(hostPID int) int {
	if !s.report.Has(Process) {
		return hostPID
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(hostPID) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) < 2 {
				return 0
			}
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}

func (s *Sandbox) kill() {
	_ = unix.PidfdSendSignal(int(s.initFD.Fd()), unix.SIGKILL, nil, 0)
}

// Close ends the sandbox: init is killed, and with it (by its pid
// namespace, and by the cgroup) every process in it, whatever they did to
// their environment or their sessions. It returns once they are gone.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Sandbox) close() error {
	s.kill()
	var errs []error
	if !waitPidfd(s.initFD, killWait) {
		errs = append(errs, fmt.Errorf("sandbox: init (pid %d) still there %v after SIGKILL", s.initPID, killWait))
	}
	if s.cg != nil {
		// Without a pid namespace, and for anything init's end missed.
		errs = append(errs, s.cg.killAll(killWait), s.cg.remove())
	}
	s.c.uc.Close()
	s.readerW.Wait()
	s.initFD.Close()
	if s.diagName != "" {
		procfs.UnregisterNetDiag(s.diagName)
	}
	return errors.Join(errs...)
}

// killWait bounds how long Close waits for the killed processes to go.
const killWait = 5 * time.Second

// waitPidfd waits until the pidfd's process has ended (and, for a pid
// namespace's init, every process of the namespace with it).
func waitPidfd(f *os.File, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left < 0 {
			return false
		}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
