package testkit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// ProcessMark returns an environment entry ("DSH_TEST_MARK=<random>") to
// give to every process a test starts, and registers a t.Cleanup check,
// run after the cleanups registered later (so after the host under test has
// stopped), that fails the test if any live process still carries the mark.
// Processes inherit the entry from the shell that started them, so jobs
// that escaped with nohup, disown or a trapped SIGHUP are found too.
//
// The check waits (on pidfds, up to Timeout) for marked processes that are
// still dying: a SIGKILLed process lingers a moment before it is gone.
func ProcessMark(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	entry := "DSH_TEST_MARK=" + hex.EncodeToString(b[:])
	t.Cleanup(func() { MarkedGone(t, entry, "the test") })
	return entry
}

// MarkedGone fails the test (without stopping it) unless every process
// whose environment holds entry is gone within Timeout; a SIGKILLed process
// lingers a moment, and its exit is waited for on a pidfd. what names the
// moment in the message ("the test", "the timeout").
func MarkedGone(t testing.TB, entry, what string) {
	t.Helper()
	if left := waitGone(MarkedProcesses(entry), Timeout); len(left) > 0 {
		t.Errorf("testkit: %d process(es) survived %s: %s", len(left), what, strings.Join(left, "; "))
	}
}

// waitGone waits until each listed process ("pid comm") has exited, using
// pidfds, and returns those still alive at the deadline.
func waitGone(procs []string, timeout time.Duration) []string {
	var left []string
	deadline := time.Now().Add(timeout)
	for _, p := range procs {
		pid, _ := strconv.Atoi(strings.Fields(p)[0])
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // already gone
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := 0, unix.EINTR
		for err == unix.EINTR { // the Go runtime's own signals (SIGURG) interrupt poll
			ms := int(time.Until(deadline) / time.Millisecond)
			n, err = unix.Poll(fds, max(ms, 0))
		}
		unix.Close(fd)
		if n <= 0 {
			left = append(left, p)
		}
	}
	return left
}

// MarkedProcesses lists the live processes (not zombies) whose environment
// holds entry, as "pid comm" strings.
func MarkedProcesses(entry string) []string {
	d, err := os.ReadDir("/proc")
	if err != nil {
		return []string{"reading /proc: " + err.Error()}
	}
	needle := append([]byte(entry), 0)
	var out []string
	for _, e := range d {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append(env, 0), needle) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		out = append(out, fmt.Sprintf("%d %s", pid, bytes.TrimSpace(comm)))
	}
	return out
}

// TerminalFDs returns how many pseudo-terminal descriptors (masters and
// slaves) the test process has open: the descriptors this project opens and
// must close. Other descriptors come and go with the Go runtime and os/exec
// (the poller, pidfds) and say nothing about a leak of ours.
func TerminalFDs(t testing.TB) int {
	t.Helper()
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range d {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && (target == "/dev/ptmx" || strings.HasPrefix(target, "/dev/pts/")) {
			n++
		}
	}
	return n
}

// SessionGone fails the test unless every process of session sid is gone
// within Timeout. It only watches: it kills nothing. A member may fork as
// the session is being killed, after the first look, and the runtime's
// sweeper ends that one on a later round: it looks again until none is
// left.
func SessionGone(t testing.TB, sid int) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		members, err := procfs.Session(sid)
		if err != nil {
			t.Fatal(err)
		}
		if len(members) == 0 {
			return
		}
		names := make([]string, len(members))
		for i, m := range members {
			names[i] = fmt.Sprintf("%d %s", m.PID, m.Comm)
		}
		if left := waitGone(names, time.Until(deadline)); len(left) > 0 || time.Now().After(deadline) {
			t.Fatalf("session %d: %d process(es) still alive: %s", sid, len(left), strings.Join(left, "; "))
		}
	}
}

// CommandsRunning lists the live processes whose command line is one of
// cmds (arguments joined by single spaces), as "pid command line".
func CommandsRunning(cmds ...string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue // gone, or a zombie
		}
		line := strings.ReplaceAll(strings.TrimSuffix(string(b), "\x00"), "\x00", " ")
		if slices.Contains(cmds, line) {
			out = append(out, fmt.Sprintf("%d %s", pid, line))
		}
	}
	return out
}

var python3 struct {
	once sync.Once
	path string
	err  error
}

// Python3 returns the path of the python3 interpreter itself, not of a
// version manager's shim (pyenv's is a bash script that execs python on the
// way), so that the process a test starts is python from its first
// instruction.
func Python3(t testing.TB) string {
	t.Helper()
	python3.once.Do(func() {
		out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		python3.path, python3.err = strings.TrimSpace(string(out)), err
	})
	if python3.err != nil || python3.path == "" {
		t.Fatalf("finding python3 (the tests need it: apt-get install python3): %v", python3.err)
	}
	return python3.path
}

// FDCount is the number of descriptors this process has open.
func FDCount(t testing.TB) int {
	t.Helper()
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(d)
}

// Node returns the path of node, which the tests of event-loop programs (a
// node REPL, readline.question) and the e2e suites need. A machine without
// it fails the test unless $DSH_TEST_SKIP names "e2e" (see Missing).
func Node(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("node")
	if err != nil {
		Missing(t, "e2e", "node (Node.js 20 or later) is not on PATH; the tests of event-loop programs need it")
	}
	return path
}
