package testkit

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// containedEnv names, in the copy of the test binary Contained starts, the
// test it runs contained.
const containedEnv = "DSH_TEST_CONTAINED"

// Contained runs the calling test again in a throwaway place, for tests
// that attack the machine (kill -9 -1, a fork bomb, a memory hog): a
// copy of the test binary in a new pid namespace (so a signal to every
// process reaches only its own), in a pids and memory cgroup of its own
// where the machine allows one, killed after bound whatever it does. It
// returns true in that copy, which runs the test; in the test's own process
// it returns false once the copy has ended, having failed the test if the
// copy failed, and the caller returns.
//
//	if !testkit.Contained(t, time.Minute) {
//		return
//	}
func Contained(t *testing.T, bound time.Duration) bool {
	t.Helper()
	if os.Getenv(containedEnv) == t.Name() {
		return true
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-s", "KILL", strconv.Itoa(int(bound/time.Second) + 1), "unshare"}
	if os.Geteuid() != 0 {
		args = append(args, "--user", "--map-root-user")
	}
	// The test process is not the namespace's pid 1 (a shell is): an init
	// is immune to signals from inside its namespace, and a test of what
	// reaches the host must be able to fail.
	args = append(args, "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c", `"$@"; exit $?`, "sh", exe,
		"-test.run", strings.Join(run, "/"), "-test.count=1", "-test.v")
	cmd := exec.Command("timeout", args...)
	cmd.Env = append(os.Environ(), containedEnv+"="+t.Name())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cg := outerCgroup(t)
	if cg != nil {
		// Born in the cgroup: nothing it forks escapes the limits.
		cmd.SysProcAttr = cg.attr()
		cg.wrap(cmd)
	}
	err = cmd.Run()
	if cg != nil {
		cg.remove(t)
	}
	if err != nil {
		t.Errorf("testkit: the contained run of %s failed (%v):\n%s", t.Name(), err, out.String())
		return false
	}
	if !strings.Contains(out.String(), "--- PASS: "+t.Name()) {
		t.Errorf("testkit: the contained run of %s did not pass:\n%s", t.Name(), out.String())
		return false
	}
	t.Logf("testkit: ran contained (pid namespace%s, killed after %v):\n%s", cg.describe(), bound, out.String())
	return false
}

// testCgroup is a v1 pids and memory cgroup, or a v2 cgroup, for one
// contained test.
type testCgroup struct {
	dirs []string
	fd   *os.File // the v2 directory, for CLONE_INTO_CGROUP
	v1   bool
}

// containedPids and containedMemory bound a contained test: room for a
// host, a few agents and an attack, and no more.
const (
	containedPids   = 3000
	containedMemory = 6 << 30
)

func outerCgroup(t *testing.T) *testCgroup {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "dsh-test-" + hex.EncodeToString(b[:])
	own, _ := os.ReadFile("/proc/self/cgroup")
	var st unix.Statfs_t
	if unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		rel := ""
		for line := range strings.SplitSeq(string(own), "\n") {
			if v, ok := strings.CutPrefix(line, "0::"); ok {
				rel = v
			}
		}
		dir := filepath.Join("/sys/fs/cgroup", rel, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Logf("testkit: no cgroup for the contained run (%v); the pid namespace and the time bound still hold it", err)
			return nil
		}
		_ = os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(containedPids)), 0)
		_ = os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.Itoa(containedMemory)), 0)
		f, err := os.Open(dir)
		if err != nil {
			_ = os.Remove(dir)
			return nil
		}
		return &testCgroup{dirs: []string{dir}, fd: f}
	}
	cg := &testCgroup{v1: true}
	for _, ctrl := range []string{"pids", "memory", "cpu"} {
		rel := ""
		for line := range strings.SplitSeq(string(own), "\n") {
			f := strings.SplitN(line, ":", 3)
			if len(f) == 3 && f[1] == ctrl {
				rel = f[2]
			}
		}
		dir := filepath.Join("/sys/fs/cgroup", ctrl, rel, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Logf("testkit: no %s cgroup for the contained run (%v)", ctrl, err)
			continue
		}
		cg.dirs = append(cg.dirs, dir)
	}
	if len(cg.dirs) == 0 {
		return nil
	}
	for _, d := range cg.dirs {
		_ = os.WriteFile(filepath.Join(d, "pids.max"), []byte(strconv.Itoa(containedPids)), 0)
		_ = os.WriteFile(filepath.Join(d, "memory.limit_in_bytes"), []byte(strconv.Itoa(containedMemory)), 0)
	}
	return cg
}

func (cg *testCgroup) describe() string {
	if cg == nil {
		return ", no cgroup"
	}
	return ", cgroup " + strings.Join(cg.dirs, " ")
}

// attr starts the command in the cgroup: directly on v2; on v1 through a
// shell that moves itself in before it execs the command.
func (cg *testCgroup) attr() *unix.SysProcAttr {
	if cg.fd != nil {
		return &unix.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.fd.Fd())}
	}
	return nil
}

// wrap prefixes a v1 command with the move into the cgroup.
func (cg *testCgroup) wrap(cmd *exec.Cmd) {
	if cg == nil || !cg.v1 {
		return
	}
	var moves []string
	for _, d := range cg.dirs {
		moves = append(moves, "echo $$ > "+strconv.Quote(filepath.Join(d, "cgroup.procs")))
	}
	cmd.Args = append([]string{"sh", "-c", strings.Join(moves, " && ") + ` && exec "$@"`, "sh"}, cmd.Args...)
	cmd.Path, _ = exec.LookPath("sh")
	cmd.Err = nil
}

// remove kills what is left in the cgroup and removes it.
func (cg *testCgroup) remove(t *testing.T) {
	if cg.fd != nil {
		_ = os.WriteFile(filepath.Join(cg.dirs[0], "cgroup.kill"), []byte("1"), 0)
		cg.fd.Close()
	}
	deadline := time.Now().Add(Timeout)
	for _, top := range cg.dirs {
		// Cgroups made inside (a sandbox's) go first; a host killed in
		// the test left its own.
		var dirs []string
		_ = filepath.WalkDir(top, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			cg.removeOne(t, d, deadline)
		}
	}
}

func (cg *testCgroup) removeOne(t *testing.T, d string, deadline time.Time) {
	for {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		pids := strings.Fields(string(b))
		for _, p := range pids {
			if n, err := strconv.Atoi(p); err == nil {
				_ = unix.Kill(n, unix.SIGKILL)
			}
		}
		err := unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("testkit: cgroup %s not removed: %v (%d processes in it)", d, err, len(pids))
			return
		}
		time.Sleep(time.Millisecond) // a killed process leaves its cgroup a moment after
	}
}

// ShellPID is a shell command that prints its shell's pid and pid
// namespace; HostPID reads the host's pid of that shell from its output.
// A test that must find an agent's shell on the host uses them instead
// of `echo $$`, which inside a sandbox prints a pid that means another
// process on the host.
const ShellPID = `echo "$$ $(readlink /proc/$$/ns/pid)"`

// HostPID returns the host pid of the process ShellPID printed as the last
// line of out, failing the test when there is none.
func HostPID(t testing.TB, out string) int {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 2 {
		t.Fatalf("testkit: %q does not end with a pid and a pid namespace", out)
	}
	inner, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatalf("testkit: %q does not end with a pid: %v", out, err)
	}
	pid, err := hostPID(inner, f[1])
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	return pid
}

func hostPID(inner int, ns string) (int, error) {
	d, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(inner)
	for _, e := range d {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err != nil || l != ns {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 && f[len(f)-1] == want {
					return strconv.Atoi(e.Name())
				}
			}
		}
	}
	return 0, fmt.Errorf("no process is pid %d in %s", inner, ns)
}

// ShellGone fails the test unless the shell whose ShellPID output is out is
// gone with its whole session, or, in a sandbox, with every process of its
// pid namespace. It needs no pid read before (for a test that cannot read
// /proc while it runs, out of descriptors).
func ShellGone(t testing.TB, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 2 {
		t.Fatalf("testkit: %q does not end with a pid and a pid namespace", out)
	}
	own, _ := os.Readlink("/proc/self/ns/pid")
	if f[1] == own {
		sid, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("testkit: %q: %v", out, err)
		}
		SessionGone(t, sid)
		return
	}
	d, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range d {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == f[1] {
			stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
				continue // ended, not yet reaped by its parent (the system's init)
			}
			t.Errorf("testkit: process %s of the shell's sandbox (%s) is still there: %s", e.Name(), f[1], stat)
		}
	}
}
