package ptyproc_test

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	if level := os.Getenv("DSH_TEST_SANDBOX"); level != "" && level != "off" {
		// The sandbox matrix (.ci/matrix): every program of these tests
		// runs in one sandbox at that level, which ends with this process.
		w := config.Default().Sandbox.Want("ptyproc-test", level, "")
		// At level fs the tests' files must be there: the matrix puts
		// TMPDIR outside /tmp (which is private there), writable.
		w.Writable = append(w.Writable, os.TempDir())
		sb, r, err := sandbox.Start(w)
		if err != nil || sb == nil {
			fmt.Fprintf(os.Stderr, "ptyproc tests: no sandbox at level %s: %v %s\n", level, err, r)
			os.Exit(1)
		}
		ptyproc.SetTestSandbox(sb)
		testkit.SandboxForAll = true
		goleak.VerifyTestMain(m, testkit.LeakOptions()...)
	}
	testkit.Main(m)
}

// proc is a ptyproc.Process under test with a record of every message it
// delivered. Every wait on it has a deadline of testkit.Timeout.
type proc struct {
	t *testing.T
	p *ptyproc.Process

	// onOutput, when set before Start, receives each *Output instead of the
	// default handling (copy the bytes, release at once, or hold them when
	// hold is set). It is called with mu held and must not block.
	onOutput func(*ptyproc.Output)
	// onProbe, when set, is called with each *Probe, with mu held, after it
	// has been recorded. It must not block.
	onProbe func(*ptyproc.Probe)
	// sandbox, when set before Start, gives the sandbox to start in
	// (ptyproc.StartIn).
	sandbox func() (*sandbox.Sandbox, error)

	mu          sync.Mutex
	hold        bool
	out         []byte
	held        []*ptyproc.Output
	outstanding int // delivered and not yet released
	maxOut      int
	chunks      int
	exited      *ptyproc.Exited
	outAtExit   int // len(out) when Exited was delivered
	afterExit   int // Output chunks delivered after Exited
	probes      []seenProbe
	outClosed   bool
	senders     map[*ptyproc.Process]bool
	unexpected  []string
	changed     chan struct{}
	closed      atomic.Bool  // set once Close has returned
	late        atomic.Int64 // messages delivered after Close returned
}

// seenProbe is a delivered *Probe and how much output had been delivered
// before it.
type seenProbe struct {
	*ptyproc.Probe
	outLen int
}

func newProc(t *testing.T) *proc {
	return &proc{t: t, senders: map[*ptyproc.Process]bool{}, changed: make(chan struct{}, 1)}
}

// start starts opts.Path on a terminal. The environment gets a test mark;
// t.Cleanup closes the process, then checks that nothing of its session is
// left, that every terminal descriptor it opened is closed, that nothing
// was delivered after Close returned and that every message named it.
func (r *proc) start(opts ptyproc.Options) *proc {
	t := r.t
	t.Helper()
	mark := testkit.ProcessMark(t)
	fds := testkit.TerminalFDs(t)
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	opts.Env = append(append([]string(nil), opts.Env...), mark)
	p, err := ptyproc.StartIn(r.sandbox, opts, r.deliver)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	t.Cleanup(func() {
		r.close()
		testkit.SessionGone(t, p.PID())
		// More than before is a leak. (Fewer happens when a test closes
		// its processes in another order than the cleanups run.)
		if n := testkit.TerminalFDs(t); n > fds {
			t.Errorf("terminal descriptors: %d open after Close, %d before Start", n, fds)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for s := range r.senders {
			if s != p {
				t.Errorf("a message named process %p, not %p", s, p)
			}
		}
		if len(r.unexpected) > 0 {
			t.Errorf("unexpected messages: %v", r.unexpected)
		}
		if n := r.late.Load(); n > 0 {
			t.Errorf("%d messages delivered after Close returned", n)
		}
	})
	return r
}

// run starts argv with default options.
func run(t *testing.T, argv ...string) *proc {
	t.Helper()
	return newProc(t).start(ptyproc.Options{Path: argv[0], Args: argv[1:]})
}

// close closes the process and records that Close has returned. A Close
// that does not return within testkit.Timeout fails the test instead of
// hanging it (its goroutine is left to goleak).
func (r *proc) close() error {
	r.t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.p.Close() }()
	select {
	case err := <-done:
		r.closed.Store(true)
		return err
	case <-time.After(testkit.Timeout):
		r.t.Fatalf("Close did not return within %v", testkit.Timeout)
		return nil
	}
}

func (r *proc) deliver(m any) {
	if r.closed.Load() {
		r.late.Add(1)
	}
	r.mu.Lock()
	switch m := m.(type) {
	case *ptyproc.Output:
		r.senders[m.Proc] = true
		r.chunks++
		r.outstanding++
		r.maxOut = max(r.maxOut, r.outstanding)
		if r.exited != nil {
			r.afterExit++
		}
		switch {
		case r.onOutput != nil:
			r.onOutput(m)
		case r.hold:
			r.out = append(r.out, m.Data...)
			r.held = append(r.held, m)
		default:
			r.out = append(r.out, m.Data...)
			r.outstanding--
			m.Release()
		}
	case *ptyproc.Exited:
		r.senders[m.Proc] = true
		if r.exited != nil {
			r.unexpected = append(r.unexpected, "a second Exited")
		}
		r.exited = m
		r.outAtExit = len(r.out)
	case *ptyproc.OutputClosed:
		r.senders[m.Proc] = true
		r.outClosed = true
	case *ptyproc.Probe:
		r.senders[m.Proc] = true
		r.probes = append(r.probes, seenProbe{m, len(r.out)})
		if r.onProbe != nil {
			r.onProbe(m)
		}
	default:
		r.unexpected = append(r.unexpected, fmt.Sprintf("%T", m))
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// releaseHeld releases every held chunk and stops holding new ones if stop.
func (r *proc) releaseHeld(stop bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.held {
		r.outstanding--
		o.Release()
	}
	r.held = nil
	if stop {
		r.hold = false
	}
}

// waitUntil waits until cond, called with mu held, is true. It wakes on
// every delivered message.
func (r *proc) waitUntil(what string, cond func() bool) {
	r.t.Helper()
	timer := time.NewTimer(testkit.Timeout)
	defer timer.Stop()
	// A Release that blocked would hold mu forever (chunks are released
	// with mu held, to count them exactly): never wait for mu itself.
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		if r.mu.TryLock() {
			ok := cond()
			r.mu.Unlock()
			if ok {
				return
			}
		}
		select {
		case <-r.changed:
		case <-tick.C:
		case <-timer.C:
			if !r.mu.TryLock() {
				r.t.Fatalf("%s: not within %v, and the record is locked (a Release blocks?)", what, testkit.Timeout)
			}
			defer r.mu.Unlock()
			r.t.Fatalf("%s: not within %v; output so far (%d bytes): %q", what, testkit.Timeout, len(r.out), tail(r.out))
		}
	}
}

func tail(b []byte) []byte {
	if len(b) > 400 {
		return b[len(b)-400:]
	}
	return b
}

// waitOutput waits until the output holds s.
func (r *proc) waitOutput(s string) {
	r.t.Helper()
	r.waitUntil(fmt.Sprintf("output %q", s), func() bool { return bytes.Contains(r.out, []byte(s)) })
}

// waitCount waits until the output holds s n times.
func (r *proc) waitCount(s string, n int) {
	r.t.Helper()
	r.waitUntil(fmt.Sprintf("%d times %q in the output", n, s), func() bool { return bytes.Count(r.out, []byte(s)) >= n })
}

func (r *proc) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.out)
}

// waitExited waits for Exited and checks that no output came after it.
func (r *proc) waitExited() *ptyproc.Exited {
	r.t.Helper()
	r.waitUntil("Exited", func() bool { return r.exited != nil })
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exited
}

// probe asks Probe with a fresh tag and waits for its answer.
func (r *proc) probe() seenProbe {
	r.t.Helper()
	return r.probeWith(func(tag any) { r.p.Probe(tag, true) })
}

// probeSignal is probe by ProbeSignal for sig.
func (r *proc) probeSignal(sig syscall.Signal) seenProbe {
	r.t.Helper()
	return r.probeWith(func(tag any) { r.p.ProbeSignal(tag, sig) })
}

// probeWith asks for a probe with ask and waits for its answer.
func (r *proc) probeWith(ask func(tag any)) seenProbe {
	r.t.Helper()
	tag := new(int)
	ask(tag)
	var got seenProbe
	r.waitUntil("the Probe", func() bool {
		for _, pr := range r.probes {
			if pr.Tag == tag {
				got = pr
				return true
			}
		}
		return false
	})
	return got
}

// probeUntil probes until ok accepts an answer, and returns that answer.
func (r *proc) probeUntil(what string, ok func(seenProbe) bool) seenProbe {
	r.t.Helper()
	var last seenProbe
	testkit.Eventually(r.t, what, func() (bool, string) {
		last = r.probe()
		return ok(last), fmt.Sprintf("%+v drained=%v pending=%v err=%v", last.Wait, last.Drained, last.InputPending, last.Err)
	})
	return last
}

func waiting(pr seenProbe) bool {
	return pr.Err == nil && pr.Wait.State == procfs.WaitingInput
}

// fdList lists this process's descriptors and their targets, for a failure
// message.
func fdList() string {
	d, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range d {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"->"+target)
	}
	return strings.Join(out, " ")
}

// shell starts an interactive bash with job control that prints
// "<rc=STATUS>" before each prompt and no prompt text.
func shell(t *testing.T) *proc {
	t.Helper()
	env := append(os.Environ(), "TERM=dumb", "PS1=", "PS2=", "HISTFILE=",
		`PROMPT_COMMAND=printf '<rc=%d>\n' $?`)
	r := newProc(t).start(ptyproc.Options{
		Path: "bash",
		Args: []string{"--norc", "--noprofile", "--noediting", "-i"},
		Env:  env,
		Dir:  t.TempDir(), // where a SIGQUIT's core file would go
	})
	r.waitCount("<rc=", 1)
	return r
}

// command writes lines to the shell and waits for the prompt marker after
// the last of them, and returns that marker.
func (r *proc) command(lines string) string {
	r.t.Helper()
	n := strings.Count(r.output(), "<rc=")
	r.p.Write([]byte(lines + "\n"))
	r.waitCount("<rc=", n+1+strings.Count(lines, "\n"))
	out := r.output()
	i := strings.LastIndex(out, "<rc=")
	return out[i : i+strings.Index(out[i:], ">")+1]
}

// members returns "pid comm state" of the live members of session sid.
func members(t *testing.T, sid int) []string {
	t.Helper()
	ms, err := procfs.Session(sid)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = strconv.Itoa(m.PID) + " " + m.Comm + " " + string(m.State)
	}
	return out
}
