package ptyproc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// escapees are background jobs that survive the SIGHUP of a closing
// terminal: nohup, disown, an ignored SIGHUP, and a stopped job.
const escapees = "nohup sleep 1000 >/dev/null 2>&1 &\n" +
	"sleep 1000 & disown\n" +
	"(trap '' HUP; sleep 1000) &\n" +
	"sleep 1000 & kill -STOP $!\n" +
	"sleep 1000 &\n"

// warmUp starts and closes one process, so that what the runtime opens once
// (the poller's descriptors) is open before a test counts descriptors.
func warmUp(t *testing.T) {
	t.Helper()
	p, err := ptyproc.Start(ptyproc.Options{Path: "true"}, func(m any) {
		if o, ok := m.(*ptyproc.Output); ok {
			o.Release()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// Close kills every job of the session, escaped or not, and leaves nothing
// behind: no process, no descriptor, no goroutine.
func TestCloseKillsTheWholeSession(t *testing.T) {
	warmUp(t)
	fds := testkit.FDCount(t)
	r := shell(t)
	pid := r.p.PID()
	if got := r.command(escapees + "echo started"); !strings.Contains(r.output(), "started\n") {
		t.Fatalf("the jobs did not start: %s %q", got, r.output())
	}
	testkit.Eventually(t, "five jobs in the session", func() (bool, string) {
		ms, err := procfs.Session(pid)
		if err != nil {
			t.Fatal(err)
		}
		sleeps, stopped := 0, 0
		for _, m := range ms {
			if m.Comm == "sleep" {
				sleeps++
			}
			if m.State == 'T' {
				stopped++
			}
		}
		return sleeps >= 4 && stopped == 1 && len(ms) >= 6, strings.Join(members(t, pid), ", ")
	})
	// Some jobs run in process groups of their own.
	if g, err := procfs.Group(pid); err != nil || len(g) != 1 {
		t.Errorf("the shell's own group: %+v, %v; want the shell alone", g, err)
	}

	if err := r.close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close returns once the session is empty: no wait needed here.
	if m := members(t, pid); len(m) > 0 {
		t.Errorf("after Close the session still has %v", m)
	}
	if st, ok := r.p.ExitStatus(); !ok || st.Signal != syscall.SIGKILL {
		t.Errorf("the shell's status %+v, %v; want killed by SIGKILL", st, ok)
	}
	if n := testkit.FDCount(t); n != fds {
		t.Errorf("%d descriptors open after Close, %d before Start: %s", n, fds, fdList())
	}
	goleak.VerifyNone(t, testkit.LeakOptions()...)

	// Idempotent, and nothing starts after it.
	if err := r.p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	r.p.Probe("after close", true)
	r.p.Write([]byte("echo late\n"))
	if err := r.p.Signal(syscall.SIGINT); err == nil {
		t.Error("Signal after Close succeeded")
	}
	if _, err := r.p.ForegroundGroup(); err == nil {
		t.Error("ForegroundGroup after Close succeeded")
	}
	goleak.VerifyNone(t, testkit.LeakOptions()...)
	if n := testkit.FDCount(t); n != fds {
		t.Errorf("%d descriptors open after the calls after Close, %d before: %s", n, fds, fdList())
	}
}

// Close from several goroutines at once, while others keep probing.
func TestCloseConcurrentWithProbes(t *testing.T) {
	r := run(t, "cat")
	r.probeUntil("cat waiting", waiting)

	// At most 16 probes in flight, as a caller with a timer would have a
	// few: each Probe starts a goroutine that reads /proc, and Close
	// waits for all of them, so a loop calling it without pause piles up
	// enough (tens of thousands under -race) to keep Close busy for
	// seconds. A slot is freed when a Probe is delivered; after Close none
	// is, and the probers stop.
	slots := make(chan struct{}, 16)
	r.mu.Lock()
	r.onProbe = func(*ptyproc.Probe) {
		select {
		case <-slots:
		default:
		}
	}
	r.mu.Unlock()
	stop := make(chan struct{})
	var probers sync.WaitGroup
	for range 4 {
		probers.Add(1)
		go func() {
			defer probers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case slots <- struct{}{}:
				}
				r.p.Probe(i, true)
			}
		}()
	}
	// Some probes are under way before Close starts.
	r.waitUntil("probes from the probers", func() bool { return len(r.probes) >= 20 })

	errs := make(chan error, 3)
	var closers sync.WaitGroup
	for range 3 {
		closers.Add(1)
		go func() {
			defer closers.Done()
			errs <- r.p.Close()
		}()
	}
	joined := make(chan struct{})
	go func() { closers.Wait(); close(joined) }()
	select {
	case <-joined:
	case <-time.After(testkit.Timeout):
		t.Fatalf("concurrent Closes did not return within %v", testkit.Timeout)
	}
	r.closed.Store(true)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	close(stop)
	probers.Wait()
	if m := members(t, r.p.PID()); len(m) > 0 {
		t.Errorf("after Close the session still has %v", m)
	}
	if st, ok := r.p.ExitStatus(); !ok || st.Signal != syscall.SIGKILL {
		t.Errorf("cat's status %+v, %v; want killed by SIGKILL", st, ok)
	}
	// The cleanup checks that nothing was delivered after Close returned.
}

// Close returns only when the probe goroutines have: one still delivering
// its Probe holds Close up, and the descriptors stay open meanwhile.
func TestCloseWaitsForProbes(t *testing.T) {
	gate := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	mark := testkit.ProcessMark(t)
	fds := testkit.TerminalFDs(t)
	p, err := ptyproc.Start(ptyproc.Options{Path: "sleep", Args: []string{"100"}, Env: append(os.Environ(), mark)}, func(m any) {
		if _, ok := m.(*ptyproc.Probe); ok {
			once.Do(func() { close(entered) })
			<-gate // blocking in deliver breaks its contract, on purpose
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	opened := false
	t.Cleanup(func() {
		if !opened {
			close(gate)
		}
		_ = p.Close()
	})
	p.Probe(nil, true)
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	// Close gets as far as killing the session...
	testkit.Eventually(t, "sleep killed", func() (bool, string) {
		_, ok := p.ExitStatus()
		return ok, ""
	})
	// ...and then must wait. Give a Close that does not wait a moment to
	// return (a pause to let a bug show, not to wait for an event).
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a probe was still delivering", err)
	case <-time.After(50 * time.Millisecond):
	}
	if n := testkit.TerminalFDs(t); n != fds+2 {
		t.Errorf("%d terminal descriptors open while Close waits, want %d: closed under the probe's feet", n, fds+2)
	}
	close(gate)
	opened = true
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("Close did not return after the probe finished")
	}
	if n := testkit.TerminalFDs(t); n != fds {
		t.Errorf("%d terminal descriptors open after Close, %d before Start", n, fds)
	}
}

// Close while the program floods the terminal and the receiver never
// releases a chunk: the reader waits for a credit that never comes, and
// Close must end it all the same.
func TestCloseWithOutputHeld(t *testing.T) {
	r := newProc(t)
	r.hold = true
	r.start(ptyproc.Options{Path: "yes"})
	r.waitUntil("Credits chunks held", func() bool { return len(r.held) == ptyproc.Credits })
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.maxOut > ptyproc.Credits {
		t.Errorf("%d chunks outstanding, want at most %d", r.maxOut, ptyproc.Credits)
	}
	// Releasing after Close is harmless, and so is releasing twice.
	for _, o := range r.held {
		o.Release()
		o.Release()
	}
	r.held = nil
}

// Close after the program has exited by itself.
func TestCloseAfterExit(t *testing.T) {
	r := run(t, "true")
	if ex := r.waitExited(); ex.Status != (ptyproc.ExitStatus{}) {
		t.Errorf("true: %v", ex.Status)
	}
	if err := r.close(); err != nil {
		t.Error(err)
	}
}

// The program gets the terminal on 0, 1 and 2 and none of our descriptors:
// neither the master nor the slave we keep. (Descriptors this test process
// inherited without close-on-exec pass through to every child; they are
// not ours.)
func TestNoDescriptorsLeakIntoTheProgram(t *testing.T) {
	inherited := map[string]bool{}
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range d {
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if flags, ok := strings.CutPrefix(line, "flags:"); ok {
				if v, err := strconv.ParseUint(strings.TrimSpace(flags), 8, 64); err == nil && v&unix.O_CLOEXEC == 0 {
					inherited[e.Name()] = true
				}
			}
		}
	}
	// cat, once blocked reading, opens nothing more (sleep, for one,
	// opens and closes files while it starts).
	r := run(t, "cat")
	r.probeUntil("cat waiting", waiting)
	dir := fmt.Sprintf("/proc/%d/fd", r.p.PID())
	d, err = os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range d {
		target, _ := os.Readlink(dir + "/" + e.Name())
		switch e.Name() {
		case "0", "1", "2":
			if target != r.p.TTYName() {
				t.Errorf("fd %s of the program is %s, want the terminal %s", e.Name(), target, r.p.TTYName())
			}
		default:
			if !inherited[e.Name()] || target == "/dev/ptmx" || strings.HasPrefix(target, "/dev/pts/") {
				t.Errorf("the program has our fd %s -> %s", e.Name(), target)
			}
		}
	}
}

func TestReaperWaitsForAllCloses(t *testing.T) {
	var reaper ptyproc.Reaper
	rs := []*proc{
		run(t, "sleep", "100"),
		run(t, "cat"),
		shell(t),
	}
	rs[2].command("nohup sleep 1000 >/dev/null 2>&1 & disown")
	for _, r := range rs {
		reaper.Close(r.p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if err := reaper.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	for _, r := range rs {
		r.closed.Store(true)
		if m := members(t, r.p.PID()); len(m) > 0 {
			t.Errorf("after Wait, session %d still has %v", r.p.PID(), m)
		}
		if _, ok := r.p.ExitStatus(); !ok {
			t.Errorf("after Wait, %d has not exited", r.p.PID())
		}
	}
	// Nothing more to wait for.
	if err := reaper.Wait(ctx); err != nil {
		t.Errorf("second Wait: %v", err)
	}
}

// Wait gives up when its context ends while a Close is still under way,
// and a later Wait sees that Close through.
func TestReaperWaitCancelled(t *testing.T) {
	// A deliver function that blocks on a Probe until the test lets it go:
	// the probe goroutine, and with it Close, cannot finish before then.
	// (Blocking in deliver breaks its contract on purpose.)
	gate := make(chan struct{})
	entered := make(chan struct{})
	var once sync.Once
	mark := testkit.ProcessMark(t)
	p, err := ptyproc.Start(ptyproc.Options{Path: "sleep", Args: []string{"100"}, Env: append(os.Environ(), mark)}, func(m any) {
		if _, ok := m.(*ptyproc.Probe); ok {
			once.Do(func() { close(entered) })
			<-gate
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			close(gate)
		}
		_ = p.Close()
	})
	p.Probe(nil, true)
	<-entered

	var reaper ptyproc.Reaper
	reaper.Close(p)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waited := make(chan error, 1)
	go func() { waited <- reaper.Wait(ctx) }()
	select {
	case err := <-waited:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait with a cancelled context = %v, want context.Canceled", err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("Wait with a cancelled context did not return") // the cleanup opens the gate
	}
	close(gate)
	released = true
	ctx, cancel = context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if err := reaper.Wait(ctx); err != nil {
		t.Errorf("Wait: %v", err)
	}
	if m := members(t, p.PID()); len(m) > 0 {
		t.Errorf("after Wait the session still has %v", m)
	}
}

func TestReaperZeroValue(t *testing.T) {
	var reaper ptyproc.Reaper
	if err := reaper.Wait(context.Background()); err != nil {
		t.Errorf("Wait with nothing to close: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	fds := testkit.TerminalFDs(t)
	deliver := func(m any) { t.Errorf("a failed Start delivered %T", m) }

	_, err := ptyproc.Start(ptyproc.Options{Path: "no-such-program-dsh"}, deliver)
	if err == nil || !strings.Contains(err.Error(), `"no-such-program-dsh"`) || !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing program: %v; want an error naming it, wrapping exec.ErrNotFound", err)
	}

	missing := filepath.Join(t.TempDir(), "missing")
	_, err = ptyproc.Start(ptyproc.Options{Path: missing}, deliver)
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing path: %v; want an error naming %s", err, missing)
	}

	// A file that exists and is executable but cannot be executed: the
	// failure comes from starting it, after the terminal was opened.
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte{0x7f, 'E', 'L', 'F', 0, 0, 0, 0}, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = ptyproc.Start(ptyproc.Options{Path: bad}, deliver)
	if err == nil || !strings.Contains(err.Error(), bad) || !errors.Is(err, syscall.ENOEXEC) {
		t.Errorf("unexecutable file: %v; want an error naming %s", err, bad)
	}

	_, err = ptyproc.Start(ptyproc.Options{Path: "true", Dir: missing}, deliver)
	if err == nil || !strings.Contains(err.Error(), "true") {
		t.Errorf("missing directory: %v; want an error naming the program", err)
	}

	if n := testkit.TerminalFDs(t); n != fds {
		t.Errorf("%d terminal descriptors open after failed starts, %d before", n, fds)
	}
}
