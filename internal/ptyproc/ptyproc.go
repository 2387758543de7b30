package ptyproc

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
)

// testSandbox is set only by this package's tests (export_test.go).
var testSandbox *sandbox.Sandbox

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
	// Sandbox, when set, is where the program runs: its terminal is opened
	// in the sandbox's devpts and init starts it. Nil runs it as a child of
	// this process.
	Sandbox *sandbox.Sandbox
	// Literal passes input bytes to the program as they are: no line
	// editing and no line-length limit (ICANON off), no signal, flow-control
	// or literal-next characters (ISIG, IXON, IEXTEN off), no CR to NL
	// translation, and the interrupt, quit and suspend characters disabled
	// so that a program that turns ISIG back on (readline does) still gets
	// no signal from a byte. The persistent shell types its command text
	// this way; signals go through [Process.Signal].
	Literal bool
}

const (
	reqFlush requestKind = iota
	reqProbe
	reqExited
)

// Process is a program running on a pseudo-terminal, in a session of its own.
type Process struct {
	prog    program
	opts    Options
	pid     int
	ttyName string
	tty     procfs.Terminal
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

// StartIn starts the program in the sandbox that get gives (Start when
// get is nil). A sandbox whose init was killed from outside a moment
// ago is found ended only by the first request to it: the program is then
// started in the fresh one that get gives next, so that the agent's
// call does not fail for it.
func StartIn(get func() (*sandbox.Sandbox, error), opts Options, deliver func(any)) (*Process, error) {
	if get == nil {
		return Start(opts, deliver)
	}
	for try := 0; ; try++ {
		sb, err := get()
		if err != nil {
			return nil, fmt.Errorf("%w%s", err, LimitNote(err))
		}
		opts.Sandbox = sb
		p, err := Start(opts, deliver)
		if err == nil || try == 2 || sb == nil || !sb.Ended() {
			return p, err
		}
	}
}

// Start starts the program. deliver is called from the process's goroutines
// with the messages listed in the package documentation; it must not block.
func Start(opts Options, deliver func(any)) (*Process, error) {
	if opts.Sandbox == nil {
		opts.Sandbox = testSandbox
	}
	path, err := exec.LookPath(opts.Path)
	if err != nil {
		return nil, fmt.Errorf("ptyproc: program %q: %w", opts.Path, err)
	}
	if !filepath.IsAbs(path) {
		// Init resolves nothing against the host's directory.
		if path, err = filepath.Abs(path); err != nil {
			return nil, fmt.Errorf("ptyproc: program %q: %w", opts.Path, err)
		}
	}
	var master, tty *os.File
	var ttyName string
	var spty *sandbox.PTY
	if opts.Sandbox != nil {
		spty, err = opts.Sandbox.OpenPTY()
		if err == nil {
			master, tty, ttyName = spty.Master, spty.Slave, spty.Name
		}
	} else if master, tty, err = pty.Open(); err == nil {
		ttyName = tty.Name()
	}
	if err != nil {
		return nil, fmt.Errorf("ptyproc: opening a pseudo-terminal: %w%s", err, LimitNote(err))
	}
	term := procfs.Terminal{Path: ttyName}
	var st unix.Stat_t
	if err := unix.Fstat(int(tty.Fd()), &st); err == nil {
		term.Dev = st.Rdev
	}
	modes, err := setupTTY(tty, opts)
	if err != nil {
		if spty != nil {
			opts.Sandbox.Discard(spty)
		}
		master.Close()
		tty.Close()
		return nil, err
	}
	tree, env := markTree(opts.Env)
	var prog program
	if opts.Sandbox != nil {
		var k *sandbox.Child
		k, err = opts.Sandbox.Exec(spty, path, opts.Args, env, opts.Dir)
		if err == nil {
			prog = sandboxProgram{k}
		} else {
			opts.Sandbox.Discard(spty) // init's copy, if it still holds it
		}
	} else {
		cmd := exec.Command(path, opts.Args...)
		cmd.Env = env
		cmd.Dir = opts.Dir
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		// A new session with the terminal as its controlling terminal (fd 0 in the
		// child). No Pdeathsig: it fires when the forking OS thread exits
		// (golang/go#27505), not when this process does.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		err = cmd.Start()
		prog = execProgram{cmd}
	}
	if err != nil {
		master.Close()
		tty.Close()
		return nil, fmt.Errorf("ptyproc: starting %s: %w%s", path, err, LimitNote(err))
	}
	slaveFD := int(tty.Fd())
	pid := prog.pid()
	if pid <= 0 {
		// It ended before its host pid could be read (only in a sandbox).
		prog.kill()
		prog.wait()
		prog.release()
		master.Close()
		tty.Close()
		return nil, fmt.Errorf("ptyproc: %s ended as it started", path)
	}
	tree.Session = pid
	liveSessions.Store(tree.Session, struct{}{})
	if st, err := procfs.Stat(pid); err == nil {
		tree.Since = st.Start // what leaves the session starts after its leader
	}
	fail := func(err error) (*Process, error) {
		liveSessions.Delete(tree.Session)
		tty.Close()
		_ = procfs.KillTree(tree, killTimeout)
		prog.kill()
		prog.wait()
		prog.release()
		if note := LimitNote(err); note != "" {
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
	leader, err := procfs.OpenSyscall(pid)
	if err != nil && opts.Sandbox != nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) && exitedAlready(prog)) {
		// A sandbox's init reaps at once what this process would have
		// held as a zombie until its wait: a program that ended this
		// quickly is read as gone, and its end is on its way. (An
		// unprivileged host is refused a program of another user
		// namespace that has just ended, instead.)
		leader, err = nil, nil
	}
	if err != nil {
		f.Close()
		return fail(err)
	}
	p := &Process{
		prog:      prog,
		opts:      opts,
		pid:       pid,
		tree:      tree,
		ttyName:   ttyName,
		tty:       term,
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

// exitedAlready reports whether prog has ended, waiting a moment for its
// end to be reported.
func exitedAlready(prog program) bool {
	sp, ok := prog.(sandboxProgram)
	if !ok {
		return false
	}
	select {
	case <-sp.k.Exited():
		return true
	case <-time.After(time.Second):
		return false
	}
}

// PID is the started program's process id on the host, which is also its
// session id; /proc is read by it.
func (p *Process) PID() int { return p.pid }

// InnerPID is the program's pid as the programs beside it know it: inside
// a sandbox with a pid namespace of its own, not the host's.
func (p *Process) InnerPID() int { return p.prog.innerPID() }

// Terminal names the process's terminal for procfs.
func (p *Process) Terminal() procfs.Terminal { return p.tty }

// TTYName is the slave side's path, e.g. "/dev/pts/3".
func (p *Process) TTYName() string { return p.ttyName }

// LimitNote names the limit an error ran into, when it is one: the
// process's open-file limit, the system's, or the number of pseudo-
// terminals (kernel.pty.max).
func LimitNote(err error) string {
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

// Tree is what Close kills: the session, and what left it carrying its mark.
func (p *Process) Tree() procfs.Tree { return p.tree }
