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

// drainChunks bounds a drain: a program that floods the terminal must not
// hold a flush or a probe back for ever. What it writes after the bound is
// delivered after the flush or probe.
const drainChunks = 8

// maxYields bounds how often a probe gives the CPU away to let a session
// leader that is still running (it has just written) reach the call it will
// block in.
const maxYields = 20

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
	// Literal passes input bytes to the program as they are: no line
	// editing and no line-length limit (ICANON off), no signal, flow-control
	// or literal-next characters (ISIG, IXON, IEXTEN off), no CR to NL
	// translation, and the interrupt, quit and suspend characters disabled
	// so that a program that turns ISIG back on (readline does) still gets
	// no signal from a byte. The persistent shell types its command text
	// this way; signals go through [Process.Signal].
	Literal bool
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

// Exited says the started program has exited. Everything it wrote was
// delivered before this message.
type Exited struct {
	Proc   *Process
	Status ExitStatus
	// InputPending: input written to the terminal was never read, so the
	// program ended before it saw it.
	InputPending bool
}

// Flushed answers [Process.FlushThenWrite]: every chunk delivered before it
// was read before the data was written.
type Flushed struct {
	Proc *Process
	Tag  any
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

// Probe answers [Process.Probe]: what the terminal's foreground process
// group and the session leader are doing, taken after every byte written
// before that moment was delivered.
type Probe struct {
	Proc *Process
	// Tag is the value given to Probe.
	Tag any
	// Pgrp is the terminal's foreground process group.
	Pgrp int
	// Leader is what the session leader (the started program) is doing. A
	// leader that was still running when first looked at is given the CPU a
	// few times to reach the call it blocks in.
	Leader procfs.Syscall
	// Wait says whether the foreground group is blocked reading the
	// terminal; only filled in when the probe asked for it and no input is
	// pending.
	Wait procfs.Wait
	// LeaderStopped: the session leader is stopped (SIGSTOP); only filled
	// in when the probe asked for the wait.
	LeaderStopped bool
	// Drained is true when every byte the program wrote before the look was
	// delivered before this message: a read after the look found nothing.
	Drained bool
	// InputPending is true when the terminal holds input that the program
	// has not read yet (or Write still has bytes to send).
	InputPending bool
	// Err is set when the state could not be read.
	Err error
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, ChunkSize); return &b }}

// request is work for the reader: something that must happen after
// everything readable has been delivered.
type request struct {
	kind  requestKind
	tag   any
	data  []byte
	modes bool // restore the terminal modes before writing data
	wait  bool // a probe that also asks procfs.TTYWait
}

type requestKind int

const (
	reqFlush requestKind = iota
	reqProbe
	reqExited
)

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
	// leader reads the session leader's /proc/PID/syscall; only the reader
	// goroutine uses it.
	leader *procfs.SyscallReader

	credits chan struct{}
	done    chan struct{} // closed when Close starts
	closing atomic.Bool

	reqMu    sync.Mutex
	requests []request
	pending  atomic.Bool   // requests is not empty
	wake     chan struct{} // a request came while the reader waits for a credit
	// The reader's read attempt, made once so that each read allocates
	// nothing: rbuf is the chunk being read into, rn and rerr its result.
	readFn func(fd uintptr) bool
	rbuf   []byte
	rn     int
	rerr   error
	// delivering is set while the reader delivers a message. A request made
	// then (typically by the receiver, running on the reader's goroutine)
	// needs no wake-up: the reader looks at pending before it parks.
	delivering atomic.Bool

	// writeMu guards writeQueue and every write(2) to the master, so that
	// discardInput can drop what is queued with no write of it still under
	// way.
	writeMu      sync.Mutex
	writeQueue   []byte
	writeWake    chan struct{}
	exited       chan struct{} // closed by the waiter after Wait returns
	exitStatus   ExitStatus
	wg           sync.WaitGroup
	closeOnce    sync.Once
	closeErr     error
	closed       chan struct{} // closed when Close's work is done
	bytesWritten atomic.Int64
	// tree is what Close kills: the session, and what left it with the mark.
	tree procfs.Tree
	// modes are the terminal modes set at start, which RestoreModes puts
	// back.
	modes unix.Termios
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
		return nil, fmt.Errorf("ptyproc: opening a pseudo-terminal: %w%s", err, limitNote(err))
	}
	ttyName := tty.Name()
	modes, err := setupTTY(tty, opts)
	if err != nil {
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
		return nil, fmt.Errorf("ptyproc: starting %s: %w%s", path, err, limitNote(err))
	}
	slaveFD := int(tty.Fd())
	tree.Session = cmd.Process.Pid
	liveSessions.Store(tree.Session, struct{}{})
	if st, err := procfs.Stat(cmd.Process.Pid); err == nil {
		tree.Since = st.Start // what leaves the session starts after its leader
	}
	fail := func(err error) (*Process, error) {
		liveSessions.Delete(tree.Session)
		tty.Close()
		_ = procfs.KillTree(tree, killTimeout)
		_ = cmd.Wait()
		if note := limitNote(err); note != "" {
			err = fmt.Errorf("%w%s", err, note)
		}
		return nil, err
	}

	f, err := nonBlockingDup(master)
	master.Close()
	if err != nil {
		return fail(err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fail(fmt.Errorf("ptyproc: %w", err))
	}
	leader, err := procfs.OpenSyscall(cmd.Process.Pid)
	if err != nil {
		f.Close()
		return fail(err)
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
		leader:    leader,
		credits:   make(chan struct{}, Credits),
		done:      make(chan struct{}),
		closed:    make(chan struct{}),
		writeWake: make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		exited:    make(chan struct{}),
		modes:     modes,
	}
	for i := 0; i < Credits; i++ {
		p.credits <- struct{}{}
	}
	p.readFn = p.tryRead
	p.wg.Add(3)
	go p.readLoop()
	go p.waitLoop()
	go p.writeLoop()
	return p, nil
}

func setupTTY(tty *os.File, opts Options) (unix.Termios, error) {
	fd := int(tty.Fd())
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return unix.Termios{}, fmt.Errorf("ptyproc: reading terminal modes: %w", err)
	}
	applyModes(t, opts)
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return unix.Termios{}, fmt.Errorf("ptyproc: setting terminal modes: %w", err)
	}
	cols, rows := opts.Cols, opts.Rows
	if cols == 0 {
		cols = 80
	}
	if rows == 0 {
		rows = 24
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows}); err != nil {
		return unix.Termios{}, fmt.Errorf("ptyproc: setting window size: %w", err)
	}
	return *t, nil
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
	if opts.Literal {
		t.Lflag &^= unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Iflag &^= unix.IXON | unix.IXOFF | unix.ICRNL | unix.INLCR | unix.IGNCR | unix.ISTRIP
		t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
		t.Cc[unix.VINTR], t.Cc[unix.VQUIT], t.Cc[unix.VSUSP] = 0, 0, 0
	} else {
		t.Lflag |= unix.ICANON | unix.ISIG
	}
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

// send delivers m. The reader, the only goroutine that calls it, clears
// delivering afterwards and only then looks at pending: a request seen by
// submit as made during a delivery is seen by the reader (sequentially
// consistent atomics, as in Dekker's algorithm).
func (p *Process) send(m any) {
	if !p.closing.Load() {
		p.delivering.Store(true)
		p.deliver(m)
		p.delivering.Store(false)
	}
}

// submit queues work for the reader and wakes it if it is parked.
func (p *Process) submit(r request) {
	p.reqMu.Lock()
	p.requests = append(p.requests, r)
	p.pending.Store(true)
	p.reqMu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	if p.delivering.Load() {
		return
	}
	// A deadline in the past wakes a parked read at once, and one set before
	// the reader parks makes it return at once: no wake-up is lost.
	_ = p.master.SetReadDeadline(time.Unix(1, 0))
}

// FlushThenWrite has the reader deliver everything the program has written
// so far, then a *Flushed with tag, and then write data (nil: nothing) to
// the program's input, restoring the terminal modes first when modes is
// set. A caller that files output by whether it came before or after its
// input (the shell: output of background jobs before a call, the call's own
// after) gets that order from the message order alone.
func (p *Process) FlushThenWrite(tag any, data []byte, modes bool) {
	p.submit(request{kind: reqFlush, tag: tag, data: data, modes: modes})
}

// Probe has the reader deliver everything the program has written so far,
// then look at what the foreground group and the session leader are doing,
// and deliver the answer as a *Probe with tag, after every chunk written
// before the look. With wait set, the look also asks whether the foreground
// group is blocked reading the terminal (procfs.TTYWait), which costs more.
func (p *Process) Probe(tag any, wait bool) {
	p.submit(request{kind: reqProbe, tag: tag, wait: wait})
}

// readLoop is the one goroutine that reads the master. Every chunk, every
// answer to a request and the exit are delivered from here, in the order
// they happened.
func (p *Process) readLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		default:
		}
		if p.pending.Load() {
			if !p.serve() {
				return
			}
		}
		// Wait for a credit to read with; a request is served meanwhile.
		select {
		case <-p.credits:
		case <-p.wake:
			continue
		case <-p.done:
			return
		}
		bufp := chunkPool.Get().(*[]byte)
		// rc.Read may return (a deadline, a close) without calling readFn.
		p.rbuf, p.rn, p.rerr = *bufp, 0, nil
		err := p.rc.Read(p.readFn)
		n, readErr := p.rn, p.rerr
		switch {
		case n > 0:
			p.send(&Output{Proc: p, Data: (*bufp)[:n], buf: bufp})
			continue
		case errors.Is(err, os.ErrDeadlineExceeded) || (err == nil && readErr == unix.EAGAIN):
			// Woken for a request.
			chunkPool.Put(bufp)
			p.returnCredit()
			_ = p.master.SetReadDeadline(time.Time{})
			continue
		}
		chunkPool.Put(bufp)
		// EIO once every holder of the slave has closed it; EOF or a closed
		// file when Close ran.
		p.send(&OutputClosed{Proc: p})
		return
	}
}

// tryRead is the reader's read attempt inside rc.Read: it parks on EAGAIN
// unless there is work to do first.
func (p *Process) tryRead(fd uintptr) bool {
	p.rn, p.rerr = unix.Read(int(fd), p.rbuf)
	if p.rerr == unix.EAGAIN {
		return p.pending.Load()
	}
	return true
}

func (p *Process) takeCredit() bool {
	select {
	case <-p.credits:
		return true
	case <-p.done:
		return false
	}
}

func (p *Process) tryCredit() bool {
	select {
	case <-p.credits:
		return true
	default:
		return false
	}
}

func (p *Process) returnCredit() {
	select {
	case p.credits <- struct{}{}:
	default:
	}
}

// serve runs the queued requests. It reports false once the process is
// closing.
func (p *Process) serve() bool {
	p.reqMu.Lock()
	reqs := p.requests
	p.requests = nil
	p.pending.Store(false)
	p.reqMu.Unlock()
	for _, r := range reqs {
		// A flush and the exit promise an order: what was written before
		// them is delivered first, waiting for credits if need be. A probe
		// needs no drain before it: the read after its look proves the
		// order, and it never waits for a credit (a receiver that holds
		// its output still gets an answer: not drained).
		if r.kind != reqProbe && !p.drain() {
			return false
		}
		switch r.kind {
		case reqFlush:
			p.send(&Flushed{Proc: p, Tag: r.tag})
			if r.modes {
				_, _ = p.RestoreModes()
			}
			p.Write(r.data)
		case reqProbe:
			pr, open := p.probe(r.tag, r.wait)
			if !open {
				return false
			}
			p.send(pr)
		case reqExited:
			p.send(&Exited{Proc: p, Status: p.exitStatus, InputPending: p.inputPending()})
		}
	}
	return true
}

// drain delivers what the master holds now, a chunk per credit, at most
// drainChunks of them. It reports false once the process is closing.
func (p *Process) drain() bool {
	for i := 0; i < drainChunks; i++ {
		if !p.takeCredit() {
			return false
		}
		if !p.readChunk() {
			p.returnCredit()
			return true
		}
	}
	return true
}

// readChunk reads and delivers one chunk without waiting; the caller holds
// a credit, which the chunk takes. It reports whether there was one.
func (p *Process) readChunk() bool {
	bufp := chunkPool.Get().(*[]byte)
	var n int
	_ = p.rc.Control(func(fd uintptr) {
		n, _ = unix.Read(int(fd), *bufp)
	})
	if n <= 0 {
		chunkPool.Put(bufp)
		return false
	}
	p.send(&Output{Proc: p, Data: (*bufp)[:n], buf: bufp})
	return true
}

// probe looks at the foreground group and the leader. A read after the
// look that finds nothing proves that every byte
// written before the look has been delivered (reading flushes the kernel's
// pending buffer work first, n_tty_read). Output found by that read is
// delivered and the look taken again, a few times.
func (p *Process) probe(tag any, wait bool) (*Probe, bool) {
	for again := 0; ; again++ {
		pr := &Probe{Proc: p, Tag: tag}
		p.look(pr, wait)
		if !p.tryCredit() {
			return pr, !p.closing.Load() // output still held by the receiver
		}
		if !p.readChunk() {
			p.returnCredit()
			// Inconclusive looks (input pending, an error) prove nothing
			// about the output either.
			pr.Drained = !pr.InputPending && pr.Err == nil
			return pr, true
		}
		if again == 2 {
			return pr, true // still writing: not drained
		}
	}
}

func (p *Process) look(pr *Probe, wait bool) {
	pgrp, err := p.ForegroundGroup()
	if err != nil {
		pr.Err = err
		return
	}
	pr.Pgrp = pgrp
	// Input first, then the leader: a leader seen blocked in a read after no
	// input was pending has read everything written before, and come back
	// to its read since. The other order lets it take input between the two
	// looks and seem to wait for more while it works on what it took.
	pending := p.inputPending()
	for yields := 0; ; yields++ {
		pr.Leader, err = p.leader.Read()
		if err != nil {
			pr.Err = err
			return
		}
		if !pr.Leader.Running || pgrp != p.pid || yields == maxYields {
			break
		}
		// The leader has the terminal and is still running: it has most
		// likely just written and is on its way to the call it will block
		// in. Give it the CPU rather than answer "running".
		_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	if wait {
		if st, err := procfs.Stat(p.pid); err == nil {
			pr.LeaderStopped = st.State == 'T' || st.State == 't'
		}
	}
	if pending {
		pr.InputPending = true
		return
	}
	if wait {
		pr.Wait, pr.Err = procfs.TTYWait(pgrp, p.ttyName)
	}
}

func (p *Process) waitLoop() {
	defer p.wg.Done()
	waitExit(p.cmd.Process.Pid)
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
	// queue now: the reader delivers it, then Exited.
	p.submit(request{kind: reqExited})
}

// limitNote names the limit an error ran into, when it is one: the
// process's open-file limit, the system's, or the number of pseudo-
// terminals (kernel.pty.max).
func limitNote(err error) string {
	switch {
	case errors.Is(err, syscall.EMFILE):
		var rl unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &rl)
		return fmt.Sprintf(" (this process's open-file limit, ulimit -n %d, is reached: each shell or terminal holds a few descriptors; raise the limit or run fewer at once)", rl.Cur)
	case errors.Is(err, syscall.ENFILE):
		return " (the system's open-file limit, fs.file-max, is reached)"
	case errors.Is(err, syscall.ENOSPC):
		max, _ := os.ReadFile("/proc/sys/kernel/pty/max")
		nr, _ := os.ReadFile("/proc/sys/kernel/pty/nr")
		return fmt.Sprintf(" (the system's pseudo-terminal limit is reached: kernel.pty.max is %s, %s in use)", strings.TrimSpace(string(max)), strings.TrimSpace(string(nr)))
	}
	return ""
}

// waitExit returns once process pid has exited, waiting in the runtime's
// poller on a pidfd rather than in a thread of its own blocked in wait4:
// a thousand shells must not hold a thousand threads. (cmd.Wait then reaps
// at once.) Where a pidfd cannot be had, it returns at once and the wait
// blocks in cmd.Wait as before.
func waitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd turns readable when the process exits. Ask the descriptor
	// itself each time (the poller forgets a readiness that came before
	// the wait began).
	_ = rc.Read(func(fd uintptr) bool {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			return false
		}
		return err != nil || n > 0 // an error: cmd.Wait waits instead
	})
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
		for p.writeSome() {
		}
	}
}

// writeSome writes what the queue holds with one write(2), parking in the
// poller while the terminal's input queue is full (Close wakes it). It
// reports whether more is left to write. Each attempt takes writeMu and
// looks at the queue afresh, so nothing discardInput dropped is written.
func (p *Process) writeSome() bool {
	var n int
	var werr error
	err := p.rc.Write(func(fd uintptr) bool {
		p.writeMu.Lock()
		defer p.writeMu.Unlock()
		if len(p.writeQueue) == 0 {
			n, werr = 0, nil
			return true
		}
		n, werr = unix.Write(int(fd), p.writeQueue)
		if werr == unix.EAGAIN {
			return false
		}
		if n > 0 {
			p.bytesWritten.Add(int64(n))
			p.writeQueue = p.writeQueue[n:]
		}
		if werr != nil || len(p.writeQueue) == 0 {
			p.writeQueue = nil // a failed write fails for the rest too
		}
		return true
	})
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if err != nil {
		p.writeQueue = nil // closed, or woken by Close
	}
	return len(p.writeQueue) > 0
}

// discardInput drops the input not yet read by the program, as the line
// discipline does when it turns ^C, ^\ or ^Z into a signal (unless the
// program set NOFLSH): what is still queued here, and what the terminal
// holds unread. Output is never dropped.
func (p *Process) discardInput() error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	t, err := unix.IoctlGetTermios(p.slaveFD, unix.TCGETS)
	if err != nil {
		return err
	}
	if t.Lflag&unix.NOFLSH != 0 {
		return nil
	}
	p.writeQueue = nil
	return unix.IoctlSetInt(p.slaveFD, unix.TCFLSH, unix.TCIFLUSH)
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
// terminal driver does for ^C, whatever the terminal modes are. SIGINT,
// SIGQUIT and SIGTSTP also discard the input not yet read, as their keys
// do: a line typed just before ^C never runs after it.
func (p *Process) Signal(sig syscall.Signal) error {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTSTP:
		// As the key would: the text typed before it is not read after it.
		if err := p.discardInput(); err != nil {
			return err
		}
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

// RestoreModes puts back the terminal modes the process was started with,
// all of them, if a program changed them, and reports whether it had to. A
// shell calls it before each command, so a program that died in raw mode or
// ran `stty echo` or `stty olcuc` cannot make the shell echo its input, lose
// its line discipline or change the next command's output.
func (p *Process) RestoreModes() (bool, error) {
	changed := false
	err := p.control(func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		if *t == p.modes {
			return nil
		}
		changed = true
		return unix.IoctlSetTermios(fd, unix.TCSETS, &p.modes)
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

// Tree is what Close kills: the session, and what left it carrying its mark.
func (p *Process) Tree() procfs.Tree { return p.tree }

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
	if p.claimClose() {
		p.finishClose(procfs.KillTree(p.beginClose(), killTimeout))
	}
	<-p.closed
	return p.closeErr
}

// claimClose reports whether the caller is the one to close p.
func (p *Process) claimClose() bool {
	claimed := false
	p.closeOnce.Do(func() { claimed = true })
	return claimed
}

// liveSessions holds the session ids of the processes not being closed.
var liveSessions sync.Map

func liveSession(sid int) bool {
	_, ok := liveSessions.Load(sid)
	return ok
}

// beginClose stops the deliveries and returns what is to be killed.
func (p *Process) beginClose() procfs.Tree {
	liveSessions.Delete(p.tree.Session)
	p.closing.Store(true)
	close(p.done)
	return p.tree
}

// finishClose runs once the session is killed: it reaps the program,
// joins the goroutines and closes the descriptors.
func (p *Process) finishClose(killErr error) {
	// The program was a member of the session, so Wait returns now.
	<-p.exited
	// Wake the reader and the writer where they park, and let them
	// return before the descriptors they use are closed: a descriptor
	// closed under a running probe could be reused by another open.
	_ = p.master.SetReadDeadline(time.Unix(1, 0))
	_ = p.master.SetWriteDeadline(time.Unix(1, 0))
	p.wg.Wait()
	closeErr := errors.Join(p.master.Close(), p.slave.Close(), p.leader.Close())
	// Buffers of chunks never released are garbage collected.
	p.closeErr = errors.Join(killErr, closeErr)
	close(p.closed)
}

// closeAll closes processes together: their sessions are killed with one
// look at /proc per round for all of them (see procfs.KillTrees). It
// returns the kill's error; each process's Close error has the rest.
func closeAll(ps []*Process) error {
	var mine []*Process
	var trees []procfs.Tree
	for _, p := range ps {
		if p.claimClose() {
			mine = append(mine, p)
			trees = append(trees, p.beginClose())
		}
	}
	killErr := procfs.KillTrees(trees, killTimeout, liveSession)
	outOfFiles := errors.Is(killErr, syscall.EMFILE) || errors.Is(killErr, syscall.ENFILE)
	if outOfFiles {
		// No descriptor left to look at /proc with. Kill what needs none:
		// each session's leader and its process group. Closing those frees
		// their descriptors, and the rest of each session is looked for
		// after that.
		// (Only leaders not reaped yet: their pid and group id cannot have
		// been given to anyone else. The signal to the leader goes
		// through the pidfd os.Process keeps.)
		for _, p := range mine {
			if _, done := p.ExitStatus(); !done {
				_ = unix.Kill(-p.tree.Session, unix.SIGKILL)
				_ = p.cmd.Process.Signal(syscall.SIGKILL)
			}
		}
	}
	var wg sync.WaitGroup
	for _, p := range mine {
		wg.Go(func() { p.finishClose(nil) })
	}
	wg.Wait()
	if outOfFiles {
		killErr = procfs.KillTrees(trees, killTimeout, liveSession)
	}
	for _, p := range ps {
		<-p.closed
	}
	return killErr
}

// SignalName returns the conventional name of sig, e.g. "SIGKILL".
func SignalName(sig syscall.Signal) string {
	if name := unix.SignalName(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(sig))
}
