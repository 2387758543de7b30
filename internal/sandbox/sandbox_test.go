package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/sandbox"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// run starts a sandbox as w asks, runs bash -c script in it on a terminal
// of its own, and returns what it printed and how it ended.
func run(t *testing.T, sb *sandbox.Sandbox, script string, env ...string) (string, syscall.WaitStatus) {
	t.Helper()
	p, err := sb.OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	k, err := sb.Exec(p, "/bin/bash", []string{"--norc", "--noprofile", "-c", script}, append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...), "/")
	if err != nil {
		p.Master.Close()
		p.Slave.Close()
		t.Fatal(err)
	}
	defer k.PidFD.Close()
	p.Slave.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&out, p.Master) // EIO once every slave is closed
	}()
	select {
	case <-k.Exited():
	case <-time.After(testkit.Timeout):
		t.Fatalf("%q did not end", script)
	}
	select {
	case <-copied:
	case <-time.After(testkit.Timeout):
		t.Fatalf("%q: its terminal is still held open after it ended", script)
	}
	p.Master.Close()
	ws, lost := k.Status()
	if lost {
		t.Fatalf("%q: the sandbox ended before it", script)
	}
	return strings.ReplaceAll(out.String(), "\r\n", "\n"), ws
}

func start(t *testing.T, w sandbox.Want) *sandbox.Sandbox {
	t.Helper()
	if w.Name == "" {
		w.Name = "test"
	}
	sb, r, err := sandbox.Start(w)
	if err != nil {
		t.Fatal(err)
	}
	if sb == nil {
		t.Fatalf("no sandbox: %s", r)
	}
	if len(r.Missing) > 0 {
		t.Fatalf("this machine should allow %s: %s", w.Level, r)
	}
	t.Cleanup(func() {
		if err := sb.Close(); err != nil {
			t.Error(err)
		}
	})
	return sb
}

// Inside, the agent is root in namespaces of its own: init is pid 1, ps
// shows only the sandbox, its terminal is the only one in its devpts, and
// the capabilities that would reach init or the host's terminals are gone.
func TestTheSandboxIsAWorldOfItsOwn(t *testing.T) {
	sb := start(t, sandbox.Want{Level: sandbox.LevelLimits, Limits: sandbox.LimitValues{Pids: 100}})
	out, ws := run(t, sb, `echo "pid $$ ppid $PPID uid $(id -u)"; p=$(ps -e -o comm=); echo $(printf '%s\n' $p | sort); ls /dev/pts | tr '\n' ' '; echo
grep -E '^CapBnd' /proc/self/status
for f in environ mem maps; do head -c1 /proc/1/$f >/dev/null 2>&1 && echo "read 1/$f"; done
readlink /proc/1/fd/3 >/dev/null 2>&1 && echo "resolved 1/fd/3"
(exec 9</proc/1/fd/3) 2>/dev/null && echo "opened 1/fd/3"
umount /dev/pts 2>/dev/null && echo unmounted
mount -t devpts devpts /mnt 2>/dev/null && echo mounted
true`)
	if ws.ExitStatus() != 0 {
		t.Fatalf("status %v: %s", ws, out)
	}
	lines := strings.Split(out, "\n")
	if lines[0] != "pid 2 ppid 1 uid 0" && !strings.HasSuffix(lines[0], " ppid 1 uid 0") {
		t.Errorf("identity: %q, want a child of init, root", lines[0])
	}
	if got := strings.Fields(lines[1]); strings.Join(got, " ") != "bash dsh-sandbox ps" {
		t.Errorf("ps shows %q, want only the sandbox's processes", lines[1])
	}
	if lines[2] != "0 ptmx " {
		t.Errorf("/dev/pts holds %q, want only this terminal", lines[2])
	}
	capBnd := strings.Fields(lines[3])
	if len(capBnd) != 2 {
		t.Fatalf("no CapBnd in %q", out)
	}
	var bnd uint64
	if _, err := fmt.Sscanf(capBnd[1], "%x", &bnd); err != nil {
		t.Fatal(err)
	}
	for _, c := range []uint{19, 21} { // CAP_SYS_PTRACE, CAP_SYS_ADMIN
		if bnd&(1<<c) != 0 {
			t.Errorf("capability %d is in the bounding set %s", c, capBnd[1])
		}
	}
	for _, bad := range []string{"read 1/", "resolved", "opened", "unmounted", "mounted"} {
		if strings.Contains(out, bad) {
			t.Errorf("an agent %s init or the mounts:\n%s", bad, out)
		}
	}
}

// Every signal an agent can send to init is dropped: the sandbox lives on,
// and programs started after it get no ignored signal from init.
func TestInitSurvivesEverySignalFromInside(t *testing.T) {
	sb := start(t, sandbox.Want{Level: sandbox.LevelProcess})
	out, _ := run(t, sb, `for s in $(seq 1 64); do kill -$s 1 2>/dev/null; done; echo sent`)
	if !strings.Contains(out, "sent") {
		t.Fatalf("%q", out)
	}
	select {
	case <-sb.Done():
		t.Fatal("init died of a signal from inside")
	default:
	}
	out, _ = run(t, sb, `grep SigIgn /proc/self/status`)
	if strings.TrimSpace(out) != "SigIgn:\t0000000000000000" {
		t.Fatalf("a program inherits ignored signals: %q", out)
	}
}

// Close kills whatever the sandbox's processes did to escape, and a
// sandbox whose init is killed from outside reports its end: programs
// still waited for are told their status is lost, requests fail.
func TestCloseLeavesNothingAndAnEndIsReported(t *testing.T) {
	sb := start(t, sandbox.Want{Level: sandbox.LevelProcess})
	mark := fmt.Sprintf("sleep 1009.%d", time.Now().UnixNano()%1e6)
	// (SIGHUP ignored until they are in sessions of their own: bash -c
	// ends at once, and its group gets a SIGHUP as its session ends.)
	out, _ := run(t, sb, `(trap '' HUP; setsid `+mark+` </dev/null >/dev/null 2>&1 &); (trap '' HUP; env -i /usr/bin/setsid `+mark+` </dev/null >/dev/null 2>&1 &); echo started`)
	if !strings.Contains(out, "started") {
		t.Fatal(out)
	}
	testkit.Eventually(t, "the escapes running", func() (bool, string) {
		n := len(testkit.CommandsRunning(mark))
		return n == 2, strings.Join(testkit.CommandsRunning(mark), "; ")
	})
	p, err := sb.OpenPTY()
	if err != nil {
		t.Fatal(err)
	}
	k, err := sb.Exec(p, "/bin/sleep", []string{"1000"}, nil, "/")
	if err != nil {
		t.Fatal(err)
	}
	p.Slave.Close()
	defer p.Master.Close()
	defer k.PidFD.Close()
	if err := syscall.Kill(sb.InitPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.Done():
	case <-time.After(testkit.Timeout):
		t.Fatal("the end of init was not reported")
	}
	<-k.Exited()
	if _, lost := k.Status(); !lost {
		t.Error("a program of a dead sandbox has a status")
	}
	if left := testkit.CommandsRunning(mark); len(left) > 0 {
		t.Errorf("survived init's death: %v", left)
	}
	if _, err := sb.OpenPTY(); !errors.Is(err, sandbox.ErrEnded) {
		t.Errorf("a request to an ended sandbox: %v, want ErrEnded", err)
	}
}

// At level nonet the sandbox has loopback only, up.
func TestNoNetHasLoopbackOnly(t *testing.T) {
	py := testkit.Python3(t)
	sb := start(t, sandbox.Want{Level: sandbox.LevelNoNet})
	out, _ := run(t, sb, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; `+py+` -c '
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
c = socket.create_connection(s.getsockname()); print("loopback ok")
try:
    socket.create_connection(("10.255.255.1", 80), timeout=2); print("reached outside")
except OSError as e:
    print("outside:", e.errno)
'`)
	if !strings.HasPrefix(out, "lo\nloopback ok\noutside: ") {
		t.Fatalf("%q, want only lo, loopback working, nothing outside", out)
	}
}

// At level fs the system is read-only, /tmp is private, and the writable
// directories (one under the host's /tmp too) are writable; what is hidden
// is not there.
func TestFilesAreConfined(t *testing.T) {
	work := t.TempDir()
	// Outside /tmp, which is private anyway.
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := os.MkdirTemp(home, ".dsh-test-hidden-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hidden) })
	if err := os.WriteFile(filepath.Join(hidden, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "old"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := start(t, sandbox.Want{Level: sandbox.LevelFS, Writable: []string{work}, Hide: []string{hidden}})
	out, _ := run(t, sb, `cd `+work+` && cat old && echo new > new && echo wrote-work
touch /etc/dsh-test 2>/dev/null && echo wrote-etc
echo x > /tmp/dsh-test-private && echo wrote-tmp
ls /tmp | wc -l
cat `+hidden+`/secret 2>/dev/null && echo read-hidden
echo done`)
	want := "old\nwrote-work\nwrote-tmp\n2\ndone\n"
	if out != want {
		t.Fatalf("%q, want %q", out, want)
	}
	if b, err := os.ReadFile(filepath.Join(work, "new")); err != nil || string(b) != "new\n" {
		t.Errorf("the write to the working directory: %q %v", b, err)
	}
	if _, err := os.Stat("/tmp/dsh-test-private"); err == nil {
		t.Error("the sandbox's /tmp is the host's")
	}
}

// The host's sandboxes together are bounded below the machine's pids and
// memory, each agent's own limits notwithstanding: their common parent
// cgroup keeps some of each for the host and the rest of the machine.
func TestSandboxesTogetherLeaveTheMachineSome(t *testing.T) {
	sb := start(t, sandbox.Want{Level: sandbox.LevelLimits, Limits: sandbox.LimitValues{Pids: 100}})
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", sb.InitPID()))
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) int64 {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("%s: %q", path, b)
		}
		return n
	}
	pidMax := min(read("/proc/sys/kernel/pid_max"), read("/proc/sys/kernel/threads-max"))
	var memTotal int64
	if m, err := os.ReadFile("/proc/meminfo"); err == nil {
		fmt.Sscanf(strings.TrimSpace(strings.SplitN(string(m), "\n", 2)[0]), "MemTotal: %d kB", &memTotal)
		memTotal <<= 10
	}
	// v1: the pids and memory hierarchies; v2 (only a "0::" line): one.
	pidsFile, memFile := map[string]string{}, map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		parent := filepath.Dir(f[2])
		switch f[1] {
		case "pids":
			pidsFile["v1"] = filepath.Join("/sys/fs/cgroup/pids", parent, "pids.max")
		case "memory":
			memFile["v1"] = filepath.Join("/sys/fs/cgroup/memory", parent, "memory.limit_in_bytes")
		case "":
			pidsFile["v2"] = filepath.Join("/sys/fs/cgroup", parent, "pids.max")
			memFile["v2"] = filepath.Join("/sys/fs/cgroup", parent, "memory.max")
		}
	}
	v := "v1"
	if pidsFile[v] == "" {
		v = "v2"
	}
	if pidsFile[v] == "" || memFile[v] == "" {
		t.Fatalf("init is not in a pids and a memory cgroup: %q", b)
	}
	if n := read(pidsFile[v]); n >= pidMax || n < pidMax/2 {
		t.Errorf("%s allows %d pids of the machine's %d", pidsFile[v], n, pidMax)
	}
	if n := read(memFile[v]); memTotal == 0 || n >= memTotal || n < memTotal/2 {
		t.Errorf("%s allows %d bytes of the machine's %d", memFile[v], n, memTotal)
	}
}
