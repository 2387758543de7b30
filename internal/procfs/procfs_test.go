package procfs_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// startSession starts argv in a session of its own, without a terminal. The
// process and everything it starts carry a test mark; t.Cleanup kills every
// marked process (without procfs, so a broken KillSession cannot hide its
// own leftovers), reaps the leader and lets testkit check that none survive.
func startSession(t *testing.T, argv ...string) *exec.Cmd {
	t.Helper()
	mark := testkit.ProcessMark(t)
	cmd := exec.Command(program(t, argv[0]), argv[1:]...)
	cmd.Env = append(os.Environ(), mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		killMarked(mark)
		_ = cmd.Wait() // an error when the test reaped it already
	})
	return cmd
}

// program resolves python3 to the interpreter itself (see testkit.Python3).
func program(t *testing.T, name string) string {
	t.Helper()
	switch name {
	case "python3":
		return testkit.Python3(t)
	case "node":
		return testkit.Node(t)
	}
	return name
}

// killMarked sends SIGKILL, through pidfds, to every live process carrying
// mark. It does not wait.
func killMarked(mark string) {
	for _, p := range testkit.MarkedProcesses(mark) {
		pid, err := strconv.Atoi(strings.Fields(p)[0])
		if err != nil {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		unix.Close(fd)
	}
}

// pidsOf returns the sorted pids of procs.
func pidsOf(procs []procfs.Proc) []int {
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.PID
	}
	slices.Sort(pids)
	return pids
}

// children returns every process, zombies included, whose parent is ppid.
func children(t *testing.T, ppid int) []procfs.Proc {
	t.Helper()
	all, err := procfs.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []procfs.Proc
	for _, p := range all {
		if p.PPID == ppid {
			out = append(out, p)
		}
	}
	return out
}

// noSuchPID is a pid the kernel never hands out: one above pid_max.
func noSuchPID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return max + 1
}

func TestStatOfALiveProcess(t *testing.T) {
	cmd := startSession(t, "sleep", "1000")
	pid := cmd.Process.Pid
	p, err := procfs.Stat(pid)
	if err != nil {
		t.Fatal(err)
	}
	self, err := procfs.Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.Start == 0 || p.Start < self.Start {
		t.Errorf("child started at tick %d, this process at %d: want the child later", p.Start, self.Start)
	}
	want := procfs.Proc{PID: pid, PPID: os.Getpid(), PGRP: pid, Session: pid, State: p.State, Comm: "sleep", Start: p.Start}
	if p != want {
		t.Errorf("Stat(%d) = %+v, want %+v", pid, p, want)
	}
	if p.Zombie() {
		t.Errorf("a sleeping process is reported as a zombie: %+v", p)
	}
}

func TestStatOfNoProcess(t *testing.T) {
	for _, pid := range []int{noSuchPID(t), -1, 0} {
		if p, err := procfs.Stat(pid); !errors.Is(err, procfs.ErrNoProcess) {
			t.Errorf("Stat(%d) = %+v, %v; want ErrNoProcess", pid, p, err)
		}
	}
	// A process that existed and was reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if p, err := procfs.Stat(cmd.Process.Pid); !errors.Is(err, procfs.ErrNoProcess) && p.Comm == "true" {
		t.Errorf("Stat of a reaped process = %+v, %v; want ErrNoProcess", p, err)
	}
}

func TestListHasThisProcess(t *testing.T) {
	all, err := procfs.List()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(p procfs.Proc) bool { return p.PID == os.Getpid() })
	if i < 0 {
		t.Fatalf("List (%d processes) misses this process %d", len(all), os.Getpid())
	}
	if all[i].PPID != os.Getppid() {
		t.Errorf("this process: %+v, want parent %d", all[i], os.Getppid())
	}
}

// Session lists every live member of a session, whatever its process group;
// Group only the members of one group.
func TestSessionAndGroupMembers(t *testing.T) {
	// The first sleep stays in bash's group; after set -m the second gets a
	// group of its own.
	cmd := startSession(t, "bash", "--norc", "--noprofile", "-c", "sleep 1000 & set -m; sleep 1000 & wait")
	sid := cmd.Process.Pid
	var kids []procfs.Proc
	testkit.Eventually(t, "two sleeps", func() (bool, string) {
		kids = children(t, sid)
		n := 0
		for _, k := range kids {
			if k.Comm == "sleep" {
				n++
			}
		}
		return n == 2 && len(kids) == 2, fmt.Sprintf("%+v", kids)
	})
	var inGroup, ownGroup procfs.Proc
	for _, k := range kids {
		if k.PGRP == sid {
			inGroup = k
		} else {
			ownGroup = k
		}
	}
	if inGroup.PID == 0 || ownGroup.PGRP != ownGroup.PID {
		t.Fatalf("children %+v: want one in group %d and one leading its own", kids, sid)
	}

	session, err := procfs.Session(sid)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pidsOf(session), pidsOf([]procfs.Proc{{PID: sid}, inGroup, ownGroup}); !slices.Equal(got, want) {
		t.Errorf("Session(%d) = %v, want %v", sid, got, want)
	}
	for _, m := range session {
		if m.Session != sid {
			t.Errorf("member %+v of another session", m)
		}
	}
	group, err := procfs.Group(sid)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pidsOf(group), pidsOf([]procfs.Proc{{PID: sid}, inGroup}); !slices.Equal(got, want) {
		t.Errorf("Group(%d) = %v, want %v", sid, got, want)
	}
	own, err := procfs.Group(ownGroup.PID)
	if err != nil {
		t.Fatal(err)
	}
	if got := pidsOf(own); !slices.Equal(got, []int{ownGroup.PID}) {
		t.Errorf("Group(%d) = %v, want just the job", ownGroup.PID, got)
	}

	// Another session lists only its own members. (Not this test's own
	// session: under some runners its leader is outside our pid namespace
	// and getsid reports 0.)
	other := startSession(t, "sleep", "1000")
	theirs, err := procfs.Session(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if got := pidsOf(theirs); !slices.Equal(got, []int{other.Process.Pid}) {
		t.Errorf("Session(%d) = %v, want just its sleep", other.Process.Pid, got)
	}
}

// A member that has exited but not been reaped is listed by List and Stat
// as a zombie, and left out of Session and Group.
func TestSessionLeavesOutZombies(t *testing.T) {
	// python3 forks a child that exits at once and never reaps it.
	cmd := startSession(t, "python3", "-c",
		"import os, signal\nif os.fork() == 0:\n    os._exit(0)\nwhile True:\n    signal.pause()\n")
	sid := cmd.Process.Pid
	var zombie procfs.Proc
	testkit.Eventually(t, "a zombie child", func() (bool, string) {
		kids := children(t, sid)
		if len(kids) == 1 && kids[0].Zombie() {
			zombie = kids[0]
			return true, ""
		}
		return false, fmt.Sprintf("%+v", kids)
	})
	if zombie.Session != sid || zombie.PGRP != sid {
		t.Fatalf("zombie %+v is not in session and group %d", zombie, sid)
	}
	if p, err := procfs.Stat(zombie.PID); err != nil || p.State != 'Z' {
		t.Errorf("Stat(zombie) = %+v, %v; want state Z", p, err)
	}
	session, err := procfs.Session(sid)
	if err != nil {
		t.Fatal(err)
	}
	if got := pidsOf(session); !slices.Equal(got, []int{sid}) {
		t.Errorf("Session(%d) = %v, want only the live leader (zombie %d left out)", sid, got, zombie.PID)
	}
	group, err := procfs.Group(sid)
	if err != nil {
		t.Fatal(err)
	}
	if got := pidsOf(group); !slices.Equal(got, []int{sid}) {
		t.Errorf("Group(%d) = %v, want only the live leader", sid, got)
	}
}

func TestSessionOfNobody(t *testing.T) {
	sid := noSuchPID(t)
	members, err := procfs.Session(sid)
	if err != nil || len(members) != 0 {
		t.Errorf("Session(%d) = %v, %v; want nothing", sid, members, err)
	}
	members, err = procfs.Group(sid)
	if err != nil || len(members) != 0 {
		t.Errorf("Group(%d) = %v, %v; want nothing", sid, members, err)
	}
}

// 0 (the kernel's threads, and init's own) and 1 (init) are never ids of a
// session or group this project started: asking for them is an error, not
// a list that KillSession would go on to kill.
func TestSessionRefusesIDsNotOurs(t *testing.T) {
	for _, id := range []int{-1, 0, 1} {
		if members, err := procfs.Session(id); !errors.Is(err, procfs.ErrBadID) || len(members) != 0 {
			t.Errorf("Session(%d) = %d members, %v; want ErrBadID", id, len(members), err)
		}
		if members, err := procfs.Group(id); !errors.Is(err, procfs.ErrBadID) || len(members) != 0 {
			t.Errorf("Group(%d) = %d members, %v; want ErrBadID", id, len(members), err)
		}
	}
}
