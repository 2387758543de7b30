package procfs_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// escapees is a bash script whose jobs survive the SIGHUP of a closing
// terminal: nohup, disown, an ignored SIGHUP, and a stopped job.
const escapees = `
nohup sleep 1000 >/dev/null 2>&1 &
sleep 1000 & disown
(trap '' HUP; sleep 1000) &
sleep 1000 & kill -STOP $!
`

// countComm counts the live members of session sid named comm, and the
// stopped ones.
func countComm(t *testing.T, sid int, comm string) (n, stopped int, seen string) {
	t.Helper()
	members, err := procfs.Session(sid)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, m := range members {
		if m.Comm == comm {
			n++
		}
		if m.State == 'T' {
			stopped++
		}
		all = append(all, fmt.Sprintf("%d %s %c", m.PID, m.Comm, m.State))
	}
	return n, stopped, strings.Join(all, ", ")
}

// settled waits until the jobs of escapees are all there: three sleeps and
// the stopped job (stopped before or after it became a sleep).
func settled(t *testing.T, sid int) {
	t.Helper()
	testkit.Eventually(t, "the escaped jobs in the session", func() (bool, string) {
		n, stopped, seen := countComm(t, sid, "sleep")
		return n >= 3 && stopped == 1, seen
	})
}

// psSession lists, with ps rather than procfs, the live processes whose
// session is sid: an independent witness for KillSession's result.
func psSession(t *testing.T, sid int) []string {
	t.Helper()
	out, err := exec.Command("ps", "-e", "-o", "pid=,sid=,stat=,comm=").Output()
	if err != nil {
		t.Fatalf("ps: %v", err)
	}
	var live []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		if s, _ := strconv.Atoi(f[1]); s == sid && !strings.HasPrefix(f[2], "Z") && !strings.HasPrefix(f[2], "X") {
			live = append(live, line)
		}
	}
	return live
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	p, err := procfs.Stat(pid)
	return err == nil && !p.Zombie()
}

func TestKillSessionWithEscapedJobs(t *testing.T) {
	// A bystander in a session of its own must be left alone.
	bystander := startSession(t, "sleep", "1000")

	cmd := startSession(t, "bash", "--norc", "--noprofile", "-c", escapees+"wait")
	sid := cmd.Process.Pid
	settled(t, sid)

	fds := testkit.FDCount(t)
	if err := procfs.KillSession(sid, testkit.Timeout); err != nil {
		t.Fatalf("KillSession: %v", err)
	}
	// Every pidfd it opened is closed again.
	if n := testkit.FDCount(t); n != fds {
		t.Errorf("%d descriptors open after KillSession, %d before", n, fds)
	}
	// KillSession returns only once nothing of the session is left.
	if members, err := procfs.Session(sid); err != nil || len(members) != 0 {
		t.Errorf("after KillSession: Session(%d) = %+v, %v", sid, members, err)
	}
	if left := psSession(t, sid); len(left) > 0 {
		t.Errorf("after KillSession, ps still lists members of session %d: %q", sid, left)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the leader ended with %v, want SIGKILL", err)
	}
	if !alive(bystander.Process.Pid) {
		t.Errorf("the bystander in session %d was killed too", bystander.Process.Pid)
	}
}

// The leader has exited and its jobs live on, reparented: they are still
// members of its session and KillSession finds them.
func TestKillSessionWithoutLeader(t *testing.T) {
	cmd := startSession(t, "bash", "--norc", "--noprofile", "-c", escapees+"exit 0")
	sid := cmd.Process.Pid
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bash: %v", err)
	}
	settled(t, sid)
	if err := procfs.KillSession(sid, testkit.Timeout); err != nil {
		t.Fatalf("KillSession: %v", err)
	}
	if members, err := procfs.Session(sid); err != nil || len(members) != 0 {
		t.Errorf("after KillSession: Session(%d) = %+v, %v", sid, members, err)
	}
	if left := psSession(t, sid); len(left) > 0 {
		t.Errorf("after KillSession, ps still lists members of session %d: %q", sid, left)
	}
}

// Members forked while KillSession works are found by its next scan.
func TestKillSessionThatKeepsForking(t *testing.T) {
	cmd := startSession(t, "bash", "--norc", "--noprofile", "-c", "while :; do sleep 1000 & done")
	sid := cmd.Process.Pid
	testkit.Eventually(t, "a forking session", func() (bool, string) {
		n, _, seen := countComm(t, sid, "sleep")
		return n >= 20, seen
	})
	fds := testkit.FDCount(t)
	if err := procfs.KillSession(sid, testkit.Timeout); err != nil {
		t.Fatalf("KillSession: %v", err)
	}
	if n := testkit.FDCount(t); n != fds {
		t.Errorf("%d descriptors open after KillSession, %d before", n, fds)
	}
	if members, err := procfs.Session(sid); err != nil || len(members) != 0 {
		t.Errorf("after KillSession: %d members left, %v", len(members), err)
	}
	if left := psSession(t, sid); len(left) > 0 {
		t.Errorf("after KillSession, ps still lists %d members of session %d", len(left), sid)
	}
}

func TestKillSessionOfNobody(t *testing.T) {
	// A session whose only member has exited and been reaped.
	cmd := startSession(t, "true")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, sid := range []int{cmd.Process.Pid, noSuchPID(t)} {
		start := time.Now()
		if err := procfs.KillSession(sid, testkit.Timeout); err != nil {
			t.Errorf("KillSession(%d): %v", sid, err)
		}
		// Nothing to wait for: it must not have sat out its timeout.
		if d := time.Since(start); d >= testkit.Timeout {
			t.Errorf("KillSession(%d) of an empty session took %v", sid, d)
		}
	}
	// Never a session of ours: refused before anything is signalled. (0
	// would be the kernel's threads and whatever init started without
	// setsid; it is not tried here on purpose.)
	if err := procfs.KillSession(-1, testkit.Timeout); !errors.Is(err, procfs.ErrBadID) {
		t.Errorf("KillSession(-1) = %v, want ErrBadID", err)
	}
}

// With a zero timeout KillSession still signals, and it reports the member it
// could not see exit rather than claiming success.
func TestKillSessionZeroTimeout(t *testing.T) {
	cmd := startSession(t, "sleep", "1000")
	sid := cmd.Process.Pid
	// No time to see the member exit: it must be reported, by pid and name.
	err := procfs.KillSession(sid, 0)
	if err == nil {
		t.Error("KillSession with no time to wait claims the session is gone")
	} else if msg := err.Error(); !strings.Contains(msg, strconv.Itoa(sid)) || !strings.Contains(msg, "sleep") {
		t.Errorf("KillSession error %q does not name the survivor", err)
	}
	// The SIGKILL was sent all the same.
	var exit *exec.ExitError
	if werr := cmd.Wait(); !errors.As(werr, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("sleep ended with %v, want SIGKILL", werr)
	}
	testkit.SessionGone(t, sid)
}

// KillTree also reaches what left the session with setsid, directly or by a
// double fork that leaves it to init, through the token in its environment;
// a process with another token, or one that merely contains ours, is not
// touched.
func TestKillTreeReachesWhatLeftTheSession(t *testing.T) {
	const name = "DSH_TEST_TREE"
	token := "c0ffee" + strconv.Itoa(os.Getpid())
	setsidPath, err := exec.LookPath("setsid")
	if err != nil {
		t.Fatal(err)
	}
	// Two that leave: one still the shell's child, one handed to init.
	cmd := startSession(t, "env", name+"=outer:"+token, "bash", "--norc", "--noprofile", "-c",
		setsidPath+" sleep 1000 & ("+setsidPath+" sleep 1000 &); sleep 1000 & wait")
	bystander := startSession(t, "env", name+"=outer:"+token+"x", "sleep", "1000")
	sid := cmd.Process.Pid
	leader, err := procfs.Stat(sid)
	if err != nil {
		t.Fatal(err)
	}
	marked := func() []procfs.Proc {
		all, err := procfs.List()
		if err != nil {
			t.Fatal(err)
		}
		var out []procfs.Proc
		for _, p := range all {
			if !p.Zombie() && procfs.Marked(p.PID, name, token) {
				out = append(out, p)
			}
		}
		return out
	}
	testkit.Eventually(t, "three sleeps, two of them in sessions of their own", func() (bool, string) {
		sleeps, outside := 0, 0
		for _, p := range marked() {
			if p.Comm == "sleep" {
				sleeps++
				if p.Session != sid {
					outside++
				}
			}
		}
		return sleeps == 3 && outside == 2, fmt.Sprintf("%+v", marked())
	})

	tree := procfs.Tree{Session: sid, MarkName: name, MarkToken: token, Since: leader.Start}
	if err := procfs.KillTree(tree, testkit.Timeout); err != nil {
		t.Fatal(err)
	}
	if left := marked(); len(left) > 0 {
		t.Errorf("still alive after KillTree: %+v", left)
	}
	if p, err := procfs.Stat(bystander.Process.Pid); err != nil || p.Zombie() {
		t.Errorf("the bystander with token %sx was killed: %+v %v", token, p, err)
	}
	// Without the token only the session is reached, as KillSession.
	if procfs.Marked(bystander.Process.Pid, name, token) || !procfs.Marked(bystander.Process.Pid, name, token+"x") ||
		!procfs.Marked(bystander.Process.Pid, name, "outer") || procfs.Marked(bystander.Process.Pid, "DSH_TEST", "outer") {
		t.Errorf("Marked reads the list of tokens wrongly")
	}
}
