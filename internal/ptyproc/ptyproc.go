package ptyproc

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// Credits is how many Output chunks may be outstanding (delivered and not yet
// released) per process.
const Credits = 4

// ChunkSize is the largest Output chunk.
const ChunkSize = 32 << 10

// killTimeout bounds how long Close waits for SIGKILLed processes to exit.
const killTimeout = 5 * time.Second

// Options says what to start and how to set up its terminal.
type Options struct {
	// Path is the program; a name without a slash is looked up in PATH.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env is the complete environment; nil means the host's environment.
	Env []string
	// Dir is the working directory; empty means the host's.
	Dir string
	// Cols and Rows are the window size; zero means 80x24.
	Cols, Rows uint16
	// Echo turns terminal echo on (a human-like terminal). The shell turns it
	// off so its commands never come back as output.
	Echo bool
	// CRLF keeps the usual output translation of "\n" to "\r\n" (ONLCR).
	CRLF bool
}

// Output is a chunk of program output. Data is only valid until Release.
type Output struct {
	Proc *Process
	Data []byte
	buf  *[]byte
}

// Release gives the chunk's buffer back and lets the reader read on. Calling
// it more than once is harmless.
func (o *Output) Release() {
	if o.buf == nil {
		return
	}
	buf := o.buf
	o.buf, o.Data = nil, nil
	chunkPool.Put(buf)
	select {
	case o.Proc.credits <- struct{}{}:
	default:
	}
}

// OutputClosed says the terminal's output has ended.
type OutputClosed struct {
	Proc *Process
}

// Exited says the started program has exited.
type Exited struct {
	Proc   *Process
	Status ExitStatus
	// InputPending: input written to the terminal was never read, so the
	// program ended before it saw it.
	InputPending bool
}

// ExitStatus is how a program ended.
type ExitStatus struct {
	// Code is the exit code; -1 when killed by a signal or unknown.
	Code int
	// Signal is the signal that killed it, or 0.
	Signal syscall.Signal
}

func (s ExitStatus) String() string {
	if s.Signal != 0 {
		return "killed by signal " + SignalName(s.Signal)
	}
	return fmt.Sprintf("exit code %d", s.Code)
}

// Probe answers ProbeWait.
type Probe struct {
	Proc *Process
	// Tag is the value given to ProbeWait.
	Tag any
	// Wait says what the foreground group is doing with the terminal.
	Wait procfs.Wait
	// Drained is true when every byte the program wrote before the wait was
	// observed has been delivered before this message.
	Drained bool
	// InputPending is true when the terminal holds input that the program
	// has not read yet (or Write still has bytes to send): a program seen
	// "waiting" then has simply not been scheduled since the input arrived,
	// and Wait.State is reported as NotWaiting.
	InputPending bool
	// Err is set when the state could not be read.
	Err error
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

// Process is a program running on a pseudo-terminal, in a session of its own.
type Process struct {
	cmd     *exec.Cmd
	opts    Options
	pid     int
	ttyName string
	master  *os.File
	// slave is kept open so a probe can ask whether input is pending: poll
	// on the slave first runs the kernel's pending buffer work (n_tty_poll),
	// so its answer covers bytes written a moment ago. Holding it means the
	// master never reads EIO while Close has not run; Exited reports the end.
	slave   *os.File
	slaveFD int
	rc      syscall.RawConn
	deliver func(any)

	credits chan struct{}
	done    chan struct{} // closed when Close starts
	closing atomic.Bool
	// lifeMu orders ProbeWait's probes.Add before Close's probes.Wait.
	lifeMu sync.Mutex
	// probes counts ProbeWait goroutines; Close waits for them before it
	// closes the descriptors they use.
	probes sync.WaitGroup
	// readMu is held by the reader around each read and its delivery, and by
	// ProbeWait's drain check, so a Probe is never delivered ahead of output
	// that was read before it.
	readMu sync.Mutex
	// afterMu guards afterRead: callbacks ReadPendingOr left for the holder
	// of readMu, run by unlockRead once it has let go.
	afterMu   sync.Mutex
	afterRead []func()

	writeMu      sync.Mutex
	writeQueue   []byte
	writeWake    chan struct{}
	exited       chan struct{} // closed by the waiter after Wait returns
	exitStatus   ExitStatus
	wg           sync.WaitGroup
	closeOnce    sync.Once
	closeErr     error
	bytesWritten atomic.Int64
	// tree is what Close kills: the session, and what left it with the mark.
	tree procfs.Tree
}

// MarkVariable is set in the environment of every program started here, and
// so of everything it starts: a colon-separated list of tokens, one per
// ptyproc session it runs under (sessions nest when a host runs inside
// another host's shell). Close kills the processes that left the session
// (setsid, daemons) by their token.
const MarkVariable = "DSH_ACTORS_SESSION"

// markTree adds a fresh token to MarkVariable in env (nil: this process's
// environment) and returns the tree to kill, without its session and start
// time, and the environment to start the program with.
func markTree(env []string) (procfs.Tree, []string) {
	if env == nil {
		env = os.Environ()
	}
	token := rand.Text()
	value := token
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, MarkVariable+"="); ok {
			if v != "" {
				value = v + ":" + token
			}
			continue
		}
		out = append(out, kv)
	}
	return procfs.Tree{MarkName: MarkVariable, MarkToken: token}, append(out, MarkVariable+"="+value)
}

// Start starts the program. deliver is called from the process's goroutines
// with the messages listed in the package documentation; it must not block.
func Start(opts Options, deliver func(any)) (*Process, error) {
	path, err := exec.LookPath(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("ptyproc: program %q: %w", opts.Path, err)
	}
	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("ptyproc: opening a pseudo-terminal: %w", err)
	}
	ttyName := tty.Name()
	if err := setupTTY(tty, opts); err != nil {
		master.Close()
		tty.Close()
		return nil, err
	}
	tree, env := markTree(opts.Env)
	cmd := exec.Command(path, opts.Args...)
	cmd.Env = env
	cmd.Dir = opts.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	// A new session with the terminal as its controlling terminal (fd 0 in the
	// child). No Pdeathsig: it fires when the forking OS thread exits
	// (golang/go#27505), not when this process does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		master.Close()
		tty.Close()
		return nil, fmt.Errorf("ptyproc: starting %s: %w", path, err)
	}
	slaveFD := int(tty.Fd())
	tree.Session = cmd.Process.Pid
	if st, err := procfs.Stat(cmd.Process.Pid); err == nil {
		tree.Since = st.Start // what leaves the session starts after its leader
	}

	f, err := nonBlockingDup(master)
	master.Close()
	if err != nil {
		tty.Close()
		_ = procfs.KillTree(tree, killTimeout)
		_ = cmd.Wait()
		return nil, err
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		tty.Close()
		_ = procfs.KillTree(tree, killTimeout)
		_ = cmd.Wait()
		return nil, fmt.Errorf("ptyproc: %w", err)
	}
	p := &Process{
		cmd:       cmd,
		opts:      opts,
		pid:       cmd.Process.Pid,
		tree:      tree,
		ttyName:   ttyName,
		master:    f,
		slave:     tty,
		slaveFD:   slaveFD,
		rc:        rc,
		deliver:   deliver,
		credits:   make(chan struct{}, Credits),
		done:      make(chan struct{}),
		writeWake: make(chan struct{}, 1),
		exited:    make(chan struct{}),
	}
	for i := 0; i < Credits; i++ {
		p.credits <- struct{}{}
	}
	p.wg.Add(3)
	go p.readLoop()
	go p.waitLoop()
	go p.writeLoop()
	return p, nil
}

func setupTTY(tty *os.File, opts Options) error {
	fd := int(tty.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("ptyproc: reading terminal modes: %w", err)
	}
	applyModes(t, opts)
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return fmt.Errorf("ptyproc: setting terminal modes: %w", err)
	}
	cols, rows := opts.Cols, opts.Rows
	if cols == 0 {
		cols = 80
	}
	if rows == 0 {
		rows = 24
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows}); err != nil {
		return fmt.Errorf("ptyproc: setting window size: %w", err)
	}
	return nil
}

// applyModes sets the modes that Options choose.
func applyModes(t *unix.Termios, opts Options) {
	if opts.Echo {
		t.Lflag |= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHOCTL | unix.ECHOKE
	} else {
		t.Lflag &^= unix.ECHO | unix.ECHOE | unix.ECHOK | unix.ECHONL | unix.ECHOCTL | unix.ECHOKE
	}
	if opts.CRLF {
		t.Oflag |= unix.OPOST | unix.ONLCR
	} else {
		t.Oflag &^= unix.ONLCR
	}
	t.Iflag |= unix.IUTF8
}

// nonBlockingDup returns a non-blocking duplicate of the master that the
// runtime poller manages (see the package documentation).
func nonBlockingDup(master *os.File) (*os.File, error) {
	sc, err := master.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("ptyproc: %w", err)
	}
	var fd int
	var dupErr error
	if err := sc.Control(func(orig uintptr) {
		fd, dupErr = unix.FcntlInt(orig, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, fmt.Errorf("ptyproc: %w", err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("ptyproc: duplicating the master: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ptyproc: making the master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "ptmx"), nil
}

// PID is the started program's process id, which is also its session id.
func (p *Process) PID() int { return p.pid }

// TTYName is the slave side's path, e.g. "/dev/pts/3".
func (p *Process) TTYName() string { return p.ttyName }

func (p *Process) send(m any) {
	if !p.closing.Load() {
		p.deliver(m)
	}
}

func (p *Process) readLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.credits:
		case <-p.done:
			return
		}
		var (
			n       int
			readErr error
		)
		err := p.rc.Read(func(fd uintptr) bool {
			bufp := chunkPool.Get().(*[]byte)
			p.readMu.Lock()
			n, readErr = unix.Read(int(fd), *bufp)
			if readErr == unix.EAGAIN {
				p.unlockRead()
				chunkPool.Put(bufp)
				return false
			}
			if n > 0 {
				p.send(&Output{Proc: p, Data: (*bufp)[:n], buf: bufp})
			} else {
				chunkPool.Put(bufp)
			}
			p.unlockRead()
			return true
		})
		if err != nil || readErr != nil || n == 0 {
			// EIO once every holder of the slave has closed it; EOF or a
			// closed file when Close ran.
			p.send(&OutputClosed{Proc: p})
			return
		}
	}
}

func (p *Process) waitLoop() {
	defer p.wg.Done()
	err := p.cmd.Wait()
	st := ExitStatus{Code: -1}
	if p.cmd.ProcessState != nil {
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok {
			switch {
			case ws.Signaled():
				st.Signal = ws.Signal()
			case ws.Exited():
				st.Code = ws.ExitStatus()
			}
		}
	} else if err != nil {
		st.Code = -1
	}
	p.exitStatus = st
	close(p.exited)
	// Everything the program wrote before it exited is in the master's
	// queue now; hand it over, a credit per chunk like the reader, before
	// saying it exited.
	for {
		select {
		case <-p.credits:
		case <-p.done:
			return
		}
		p.readMu.Lock()
		if p.readChunkLocked() {
			p.unlockRead()
			continue
		}
		p.send(&Exited{Proc: p, Status: st, InputPending: p.inputPending()})
		p.unlockRead()
		select {
		case p.credits <- struct{}{}: // the credit taken for nothing
		default:
		}
		return
	}
}

// Write queues b for the program's input. It never blocks: what the
// terminal cannot take at once is written by the writer goroutine.
func (p *Process) Write(b []byte) {
	if len(b) == 0 {
		return
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if len(p.writeQueue) == 0 {
		// Fast path: try the whole write now.
		var n int
		_ = p.rc.Control(func(fd uintptr) {
			n, _ = unix.Write(int(fd), b)
		})
		if n < 0 {
			n = 0
		}
		p.bytesWritten.Add(int64(n))
		if n == len(b) {
			return
		}
		b = b[n:]
	}
	p.writeQueue = append(p.writeQueue, b...)
	select {
	case p.writeWake <- struct{}{}:
	default:
	}
}

func (p *Process) writeLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.writeWake:
		case <-p.done:
			return
		}
		for {
			p.writeMu.Lock()
			chunk := p.writeQueue
			p.writeMu.Unlock()
			if len(chunk) == 0 {
				break
			}
			// Writing through the File parks in the poller while the terminal's
			// input queue is full; Close wakes it.
			n, err := p.master.Write(chunk)
			p.bytesWritten.Add(int64(n))
			p.writeMu.Lock()
			p.writeQueue = p.writeQueue[n:]
			if len(p.writeQueue) == 0 {
				p.writeQueue = nil
			}
			p.writeMu.Unlock()
			if err != nil {
				p.writeMu.Lock()
				p.writeQueue = nil
				p.writeMu.Unlock()
				break
			}
		}
	}
}

// control runs f on the master's descriptor.
func (p *Process) control(f func(fd int) error) error {
	var ferr error
	if err := p.rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// ForegroundGroup returns the terminal's foreground process group.
func (p *Process) ForegroundGroup() (int, error) {
	var pgrp int
	err := p.control(func(fd int) error {
		var err error
		pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return pgrp, err
}

// Signal sends sig to the terminal's foreground process group, as the
// terminal driver does for ^C, whatever the terminal modes are.
func (p *Process) Signal(sig syscall.Signal) error {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP:
		return p.control(func(fd int) error {
			return unix.IoctlSetInt(fd, unix.TIOCSIG, int(sig))
		})
	}
	// TIOCSIG on a pseudo-terminal takes only the three signals the
	// terminal itself generates (EINVAL for any other): send the rest to
	// the foreground group directly.
	pgrp, err := p.ForegroundGroup()
	if err != nil {
		return err
	}
	if pgrp <= 1 {
		// 0 once the session leader is gone; kill(0) would signal our own
		// process group.
		return fmt.Errorf("ptyproc: the terminal has no foreground process group (%d)", pgrp)
	}
	return unix.Kill(-pgrp, sig)
}

// RestoreModes puts back the terminal modes the process was started with
// (echo, output CRLF, canonical input, signals) if a program changed them,
// and reports whether it had to. A shell calls it before each command, so a
// program that died in raw mode or ran `stty echo` cannot make the shell
// echo its input or lose its line discipline.
func (p *Process) RestoreModes() (bool, error) {
	changed := false
	err := p.control(func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		want := *t
		applyModes(&want, p.opts)
		want.Lflag |= unix.ICANON | unix.ISIG
		if want == *t {
			return nil
		}
		changed = true
		return unix.IoctlSetTermios(fd, unix.TCSETS, &want)
	})
	return changed, err
}

// Resize sets the window size; the foreground group gets SIGWINCH.
func (p *Process) Resize(cols, rows uint16) error {
	return p.control(func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
	})
}

// Termios returns the slave's current terminal modes.
func (p *Process) Termios() (*unix.Termios, error) {
	var t *unix.Termios
	err := p.control(func(fd int) error {
		var err error
		t, err = unix.IoctlGetTermios(fd, unix.TCGETS)
		return err
	})
	return t, err
}

// ProbeWait asks, from a goroutine of its own, whether the foreground process
// group is blocked reading the terminal, and delivers a *Probe with tag.
func (p *Process) ProbeWait(tag any) {
	p.lifeMu.Lock()
	defer p.lifeMu.Unlock()
	if p.closing.Load() {
		return
	}
	p.probes.Add(1)
	go func() {
		defer p.probes.Done()
		p.send(p.probe(tag))
	}()
}

func (p *Process) probe(tag any) *Probe {
	pr := &Probe{Proc: p, Tag: tag}
	if p.closing.Load() {
		return pr // nobody will receive it; do not hold Close up
	}
	pgrp, err := p.ForegroundGroup()
	if err != nil {
		pr.Err = err
		return pr
	}
	// Order matters. First: no input is pending, so whatever the group was
	// given has been read. Then /proc: a member blocked reading the terminal
	// now is waiting for input that has not been written yet.
	if p.inputPending() {
		pr.InputPending = true
		return pr
	}
	pr.Wait, pr.Err = procfs.TTYWait(pgrp, p.ttyName)
	if pr.Err != nil || pr.Wait.State == procfs.NotWaiting {
		return pr
	}
	// The group was seen waiting. Everything it wrote before that is in the
	// master's queue or was already read. A non-blocking read flushes the
	// kernel's pending buffer work first (n_tty_read), so EAGAIN proves that
	// nothing written before the wait is left. Holding readMu keeps the
	// reader out and orders this Probe after every chunk it delivered. The
	// read takes a credit like the reader; with none free, output is still
	// on its way and the probe is inconclusive. (A zero-timeout poll would
	// spare the read, but on a loaded machine it stalled: 100 agents fell
	// from ~4,400 to ~450 calls/s.)
	p.readMu.Lock()
	defer p.unlockRead()
	select {
	case <-p.credits:
	default:
		return pr
	}
	bufp := chunkPool.Get().(*[]byte)
	var n int
	var rerr error
	_ = p.control(func(fd int) error {
		n, rerr = unix.Read(fd, *bufp)
		return nil
	})
	if n > 0 {
		// Output was still pending: hand it over, in order, with the credit.
		p.send(&Output{Proc: p, Data: (*bufp)[:n], buf: bufp})
		return pr
	}
	chunkPool.Put(bufp)
	select {
	case p.credits <- struct{}{}:
	default:
	}
	pr.Drained = rerr == unix.EAGAIN
	return pr
}

// readChunkLocked delivers one chunk of what the master holds, without
// waiting, and reports whether there was one. The caller holds readMu and a
// credit, which the chunk takes.
func (p *Process) readChunkLocked() bool {
	bufp := chunkPool.Get().(*[]byte)
	var n int
	_ = p.control(func(fd int) error {
		n, _ = unix.Read(fd, *bufp)
		return nil
	})
	if n <= 0 {
		chunkPool.Put(bufp)
		return false
	}
	p.send(&Output{Proc: p, Data: (*bufp)[:n], buf: bufp})
	return true
}

// ReadPendingOr returns, without waiting, what the program has written and
// the reader has not picked up yet (at most ChunkSize bytes). A caller that
// is about to write new input uses it to attribute earlier output to the
// time before that input.
//
// While a chunk is being read and delivered it returns ok=false, reads
// nothing, and calls retry once that delivery is over: the caller may be
// running inside that very delivery (an actor on a synchronized dispatcher),
// so it must not wait, and a chunk another goroutine is delivering lands
// behind whatever message the caller is handling. retry is called from the
// goroutine that delivered, once; it must not block.
func (p *Process) ReadPendingOr(retry func()) (b []byte, ok bool) {
	p.afterMu.Lock()
	if !p.readMu.TryLock() {
		// The holder runs retry after it unlocks; it cannot have unlocked
		// and checked afterRead yet, as that needs afterMu.
		p.afterRead = append(p.afterRead, retry)
		p.afterMu.Unlock()
		return nil, false
	}
	p.afterMu.Unlock()
	defer p.unlockRead()
	// A read, not FIONREAD: reading flushes the kernel's pending buffer work
	// first (n_tty_read), so bytes the program wrote a moment ago are seen;
	// FIONREAD does not wait for them, and they would land inside the call
	// that follows.
	bufp := chunkPool.Get().(*[]byte)
	defer chunkPool.Put(bufp)
	var n int
	_ = p.control(func(fd int) error {
		n, _ = unix.Read(fd, *bufp)
		return nil
	})
	if n <= 0 {
		return nil, true // the usual case: no allocation
	}
	return append([]byte(nil), (*bufp)[:n]...), true
}

// unlockRead releases readMu and runs the callbacks left for its release.
func (p *Process) unlockRead() {
	p.readMu.Unlock()
	p.afterMu.Lock()
	after := p.afterRead
	p.afterRead = nil
	p.afterMu.Unlock()
	for _, f := range after {
		f()
	}
}

// inputPending reports whether input written to the terminal has not been
// read yet: bytes still queued in Write, or readable on the slave.
func (p *Process) inputPending() bool {
	p.writeMu.Lock()
	queued := len(p.writeQueue) > 0
	p.writeMu.Unlock()
	if queued {
		return true
	}
	fds := []unix.PollFd{{Fd: int32(p.slaveFD), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
}

// ExitStatus returns the program's exit status once it has exited.
func (p *Process) ExitStatus() (ExitStatus, bool) {
	select {
	case <-p.exited:
		return p.exitStatus, true
	default:
		return ExitStatus{}, false
	}
}

// Close kills every process of the session, reaps the program, closes the
// terminal and joins the process's goroutines. No message is delivered after
// Close has started. It is safe to call more than once and from any
// goroutine; it returns the first error.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.lifeMu.Lock()
		p.closing.Store(true)
		p.lifeMu.Unlock()
		close(p.done)
		killErr := procfs.KillTree(p.tree, killTimeout)
		// The program was a member of the session, so Wait returns now.
		<-p.exited
		p.probes.Wait()
		closeErr := errors.Join(p.master.Close(), p.slave.Close())
		p.wg.Wait()
		// Buffers of chunks never released are garbage collected.
		p.closeErr = errors.Join(killErr, closeErr)
	})
	return p.closeErr
}

// SignalName returns the conventional name of sig, e.g. "SIGKILL".
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}
