package sandbox_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/sandbox"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// This machine mounts its cgroup2 at /sys/fs/cgroup/unified, beside the v1
// hierarchies that hold the pids, memory and cpu controllers; its only
// controller is hugetlb. The v2 tests run there with hugetlb in place of
// the three (no limit is set), each in a process of its own placed in a
// fresh cgroup, as systemd places a delegated service: the set-up that
// moves the host into a leaf, the per-sandbox cgroups, cgroup.kill and the
// sweep of a dead host's cgroups all run on the real thing.
const unified = "/sys/fs/cgroup/unified"

// v2Step names the step a child process of TestCgroupV2 runs, and
// v2Dir the cgroup it runs in.
const (
	v2Step = "DSH_TEST_CGROUP2_STEP"
	v2Dir  = "DSH_TEST_CGROUP2_DIR"
)

func TestCgroupV2(t *testing.T) {
	if step := os.Getenv(v2Step); step != "" {
		v2Child(t, step, os.Getenv(v2Dir))
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("cgroup v2 test: needs root to make cgroups (the unprivileged path is the delegated one, tested as root here)")
	}
	controllers, err := os.ReadFile(filepath.Join(unified, "cgroup.controllers"))
	if err != nil || !strings.Contains(" "+strings.TrimSpace(string(controllers))+" ", " hugetlb ") {
		t.Skipf("cgroup v2 test: no cgroup2 with the hugetlb controller at %s (%q, %v)", unified, controllers, err)
	}
	if own := cgroupOf(t, os.Getpid()); own != "/" {
		t.Skipf("cgroup v2 test: this process is in %s of %s, not its root", own, unified)
	}
	// The root gives hugetlb to its children for the test, as before after
	// (cleanups run last first: this one after every cgroup is removed).
	rootCtl := filepath.Join(unified, "cgroup.subtree_control")
	before, err := os.ReadFile(rootCtl)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(before, []byte("hugetlb")) {
		if err := os.WriteFile(rootCtl, []byte("+hugetlb"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Busy while another run of this test has cgroups there: the
			// last one out takes it back.
			if err := os.WriteFile(rootCtl, []byte("-hugetlb"), 0); errors.Is(err, syscall.EBUSY) {
				t.Logf("%s keeps hugetlb: another run has cgroups there", rootCtl)
			} else if err != nil {
				t.Errorf("giving back %s: %v", rootCtl, err)
			}
		})
	}
	newDir := func() string {
		dir := filepath.Join(unified, "dsh-test-v2-"+rand.Text()[:8])
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeTree(t, dir) })
		return dir
	}

	t.Run("delegated", func(t *testing.T) {
		// A cgroup of the host's own, as systemd-run --scope -p
		// Delegate=yes makes: the host moves into a leaf of it.
		dir := newDir()
		stale := child(t, "run", dir)
		waitEmpty(t, stale)
	})
	t.Run("shared", func(t *testing.T) {
		// Another process in the host's cgroup: no controllers for its
		// children, the level falls back with the remedy, and the host is
		// put back where it was.
		dir := newDir()
		other := exec.Command("sleep", "1000")
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(other.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		child(t, "shared", dir)
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() {
				t.Errorf("a refused set-up left cgroup %s in %s", e.Name(), dir)
			}
		}
		_ = other.Process.Kill()
		_ = other.Wait()
		_ = os.WriteFile(filepath.Join(unified, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
	})
	t.Run("root", func(t *testing.T) {
		// The root cgroup may hold processes and give controllers: the
		// host stays there, and a later host there sweeps what a host
		// killed with -9 left.
		stale := child(t, "run", "")[1:] // the first is the root itself
		t.Cleanup(func() { removeTree(t, stale[0]) })
		waitEmpty(t, stale)
		child(t, "sweep", "")
		if l, _ := os.Readlink("/proc/self/ns/pid"); l != "pid:[4026531836]" {
			t.Logf("in a pid namespace of its own (%s) a host sweeps nothing: it cannot tell a dead host's pid", l)
			return
		}
		for _, d := range stale {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s survived the sweep of a dead host's cgroups: %v", d, err)
			}
		}
	})
}

// child runs step of TestCgroupV2 in a process of its own in cgroup dir
// (the root when empty). Step run ends killed (-9), and child returns the
// cgroups it names as left: the host's own (in dir), its sandboxes'
// parent, the cgroup of the sandbox left open.
func child(t *testing.T, step, dir string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCgroupV2$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), v2Step+"="+step, v2Dir+"="+dir, "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case step != "run":
	case errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
		err = nil
	case err == nil:
		err = errors.New("it ended, where it should have been killed")
	}
	if err != nil {
		t.Fatalf("step %s: %v\n%s", step, err, out)
	}
	if step != "run" {
		return nil
	}
	left := strings.Fields(between(string(out), "LEFT=", "\n"))
	if len(left) != 3 {
		t.Fatalf("step run did not name the cgroups it left:\n%s", out)
	}
	for _, d := range left {
		// (In the root, another run of this test sweeps them too.)
		if _, err := os.Stat(d); err != nil && dir != "" {
			t.Fatalf("step run should have left %s: %v", d, err)
		}
	}
	return left
}

// waitEmpty waits until the cgroups hold no process: a sandbox's init ends
// with its host.
func waitEmpty(t *testing.T, dirs []string) {
	t.Helper()
	testkit.Eventually(t, "the dead host's cgroups empty", func() (bool, string) {
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if errors.Is(err, os.ErrNotExist) {
				continue // swept by another run of this test
			}
			if err != nil || len(bytes.TrimSpace(b)) > 0 {
				return false, fmt.Sprintf("%s: %q %v", d, b, err)
			}
		}
		return true, ""
	})
}

// v2Child runs a step of TestCgroupV2 in the cgroup dir.
func v2Child(t *testing.T, step, dir string) {
	if dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			t.Fatal(err)
		}
	}
	sandbox.UseCgroupV2(unified, []string{"hugetlb"})
	rel := strings.TrimPrefix(dir, unified)
	if rel == "" {
		rel = "/"
	}
	switch step {
	case "sweep":
		sandbox.SweepStale()
		return
	case "shared":
		sb, r, err := sandbox.Start(sandbox.Want{Name: "v2", Level: sandbox.LevelLimits})
		if err != nil || sb == nil {
			t.Fatalf("a shared cgroup should give a weaker sandbox: %v %s", err, r)
		}
		defer sb.Close()
		if r.Has(sandbox.Limits) || len(r.Missing) != 1 || !strings.Contains(r.Missing[0].Remedy, "cgroup of its own") {
			t.Errorf("report %s: want limits missing, with the remedy of a cgroup of the host's own", r)
		}
		if own := cgroupOf(t, os.Getpid()); own != rel {
			t.Errorf("the host was left in %s, want it back in %s", own, rel)
		}
		return
	case "run":
	default:
		t.Fatalf("unknown step %q", step)
	}
	sb, r, err := sandbox.Start(sandbox.Want{Name: "v2", Level: sandbox.LevelLimits})
	if err != nil || sb == nil || len(r.Missing) > 0 {
		t.Fatalf("a sandbox with limits on cgroup v2: %v %s", err, r)
	}
	own := cgroupOf(t, os.Getpid())
	if dir == "" && own != "/" {
		t.Errorf("a host in the root cgroup moved to %s", own)
	}
	if want := filepath.Join(rel, "dsh-actors-host-"+strconv.Itoa(os.Getpid())); dir != "" && own != want {
		// It left its cgroup for a leaf, so that the cgroup could give
		// controllers to the sandboxes' parent.
		t.Errorf("the host is in %s, want %s", own, want)
	}
	initCg := cgroupOf(t, sb.InitPID())
	if !strings.HasPrefix(initCg, filepath.Join(rel, "dsh-actors-"+strconv.Itoa(os.Getpid()))+"-") {
		t.Fatalf("init is in cgroup %s, not under the host's sandboxes' parent in %s", initCg, rel)
	}
	if ctl, _ := os.ReadFile(filepath.Join(unified, filepath.Dir(initCg), "cgroup.subtree_control")); !bytes.Contains(ctl, []byte("hugetlb")) {
		t.Errorf("the sandboxes' parent does not give them hugetlb: %q", ctl)
	}
	// A program escaped into a session of its own is in the sandbox's
	// cgroup; closing the sandbox kills it and removes the cgroup.
	mark := fmt.Sprintf("sleep 1011.%d", time.Now().UnixNano()%1e6)
	out, _ := run(t, sb, `(trap '' HUP; setsid `+mark+` </dev/null >/dev/null 2>&1 &); echo started`)
	if !strings.Contains(out, "started") {
		t.Fatal(out)
	}
	var pid int
	testkit.Eventually(t, "the escape running", func() (bool, string) {
		left := testkit.CommandsRunning(mark)
		if len(left) == 1 {
			pid, _ = strconv.Atoi(strings.Fields(left[0])[0])
		}
		return len(left) == 1, strings.Join(left, "; ")
	})
	if pid == 0 {
		t.Fatalf("no pid in %v", testkit.CommandsRunning(mark))
	}
	if cg := cgroupOf(t, pid); cg != initCg {
		t.Errorf("the escape is in cgroup %s, want init's %s", cg, initCg)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if left := testkit.CommandsRunning(mark); len(left) > 0 {
		t.Errorf("survived the sandbox's close: %v", left)
	}
	if _, err := os.Stat(filepath.Join(unified, initCg)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sandbox's cgroup %s is still there: %v", initCg, err)
	}
	// The host is killed (-9) with a second sandbox open: its init ends
	// with the host, and its cgroup stays for the next host's sweep.
	sb2, r, err := sandbox.Start(sandbox.Want{Name: "v2", Level: sandbox.LevelLimits})
	if err != nil || sb2 == nil || len(r.Missing) > 0 {
		t.Fatalf("a second sandbox: %v %s", err, r)
	}
	open := cgroupOf(t, sb2.InitPID())
	fmt.Printf("LEFT=%s %s %s\n", filepath.Join(unified, own), filepath.Join(unified, filepath.Dir(open)), filepath.Join(unified, open))
	_ = os.Stdout.Sync()
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// cgroupOf is pid's cgroup v2 path, from /proc/PID/cgroup.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	t.Fatalf("pid %d has no cgroup v2 line: %q", pid, b)
	return ""
}

func between(s, start, end string) string {
	_, rest, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	rest, _, _ = strings.Cut(rest, end)
	return rest
}

// removeTree removes a cgroup tree, deepest first; a cgroup that still
// holds processes fails the test.
func removeTree(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeTree(t, filepath.Join(dir, e.Name()))
		}
	}
	// A process that has just ended may leave its cgroup busy a moment.
	testkit.Eventually(t, "cgroup "+dir+" removed", func() (bool, string) {
		err := syscall.Rmdir(dir)
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		return err == nil || errors.Is(err, syscall.ENOENT), fmt.Sprintf("%v (processes: %q)", err, procs)
	})
}
