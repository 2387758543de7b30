package procfs_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// term is a program on a real pseudo-terminal, in a session of its own with
// the terminal as its controlling terminal. Nothing reads the master: the
// programs used here write a few hundred bytes at most, which the kernel
// buffers.
type term struct {
	cmd    *exec.Cmd
	master *os.File
	tty    string // the slave's path, /dev/pts/N
}

func startTerm(t *testing.T, argv ...string) *term {
	t.Helper()
	mark := testkit.ProcessMark(t)
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: 24, Cols: 80}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(program(t, argv[0]), argv[1:]...)
	cmd.Env = append(os.Environ(), mark, "TERM=xterm")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = cmd.Start()
	tty := slave.Name()
	slave.Close()
	if err != nil {
		master.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		killMarked(mark)
		_ = cmd.Wait()
		master.Close()
	})
	return &term{cmd: cmd, master: master, tty: tty}
}

func (tm *term) pid() int { return tm.cmd.Process.Pid }

// waitFor polls TTYWait(pgrp) until it reports want.
func waitFor(t *testing.T, pgrp int, tty string, want procfs.WaitState) procfs.Wait {
	t.Helper()
	var w procfs.Wait
	testkit.Eventually(t, fmt.Sprintf("TTYWait(%d) %v", pgrp, want), func() (bool, string) {
		var err error
		w, err = procfs.TTYWait(pgrp, procfs.TerminalAt(tty))
		if err != nil {
			t.Fatalf("TTYWait(%d): %v", pgrp, err)
		}
		return w.State == want, fmt.Sprintf("%+v", w)
	})
	return w
}

// blockedInSyscall reports whether pid's main thread is asleep inside a
// system call, and what /proc says it is doing.
func blockedInSyscall(pid int) (bool, string) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/syscall")
	if err != nil {
		return false, err.Error()
	}
	s := strings.TrimSpace(string(raw))
	p, err := procfs.Stat(pid)
	if err != nil {
		return false, err.Error()
	}
	nr, err := strconv.Atoi(strings.Fields(s)[0])
	return err == nil && nr >= 0 && p.State == 'S', fmt.Sprintf("%c %s", p.State, s)
}

// neverWaiting asserts, over many readings, that TTYWait finds no wait.
func neverWaiting(t *testing.T, pgrp int, tty string) {
	t.Helper()
	for i := 0; i < 50; i++ {
		w, err := procfs.TTYWait(pgrp, procfs.TerminalAt(tty))
		if err != nil {
			t.Fatalf("TTYWait(%d): %v", pgrp, err)
		}
		if w.State != procfs.NotWaiting {
			t.Fatalf("TTYWait(%d) = %+v, want not waiting", pgrp, w)
		}
	}
}

// Programs that wait for terminal input, each in the way /proc shows it: a
// single-threaded program blocked reading it, or waiting for it in an event
// loop with nothing from outside, is proven; a program with more threads
// (asyncio's, node) is an idle loop, which its owner proves by watching its
// processor time (waitproof).
func TestTTYWaitProvesWaiting(t *testing.T) {
	tests := []struct {
		name    string
		argv    []string
		comm    string
		syscall []string // any of
		state   procfs.WaitState
	}{
		{"cat", []string{"cat"}, "cat", []string{"read"}, procfs.WaitingInput},
		{"bash read", []string{"bash", "--norc", "--noprofile", "-c", "read x"}, "bash", []string{"read"}, procfs.WaitingInput},
		{"input()", []string{"python3", "-c", "input()"}, "python3", []string{"read"}, procfs.WaitingInput},
		{"select", []string{"python3", "-c", "import select; select.select([0], [], [])"}, "python3", []string{"select"}, procfs.WaitingInput},
		// The terminal at a high descriptor, with nothing else in the set.
		{"select fd 100", []string{"python3", "-c", "import os, select; os.dup2(0, 100); select.select([100], [], [])"}, "python3", []string{"select"}, procfs.WaitingInput},
		// The terminal after a pipe in the set.
		{"select pipe and tty", []string{"python3", "-c", "import os, select; r, w = os.pipe(); select.select([r, 0], [], [])"}, "python3", []string{"select"}, procfs.WaitingInput},
		{"poll", []string{"python3", "-c", "import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()"}, "python3", []string{"poll"}, procfs.WaitingInput},
		{"poll pipe and tty", []string{"python3", "-c", "import os, select; r, w = os.pipe(); p = select.poll(); p.register(r, select.POLLIN); p.register(0, select.POLLIN); p.poll()"}, "python3", []string{"poll"}, procfs.WaitingInput},
		// A REPL with readline: select or poll on the terminal, read from
		// the process's memory.
		{"python3 REPL", []string{"python3", "-q", "-i"}, "python3", []string{"select", "poll"}, procfs.WaitingInput},
		// Event loops: the terminal among sources only the program itself
		// can make ready.
		{"epoll", []string{"python3", "-c", "import select; e = select.epoll(); e.register(0, select.EPOLLIN); e.poll()"}, "python3", []string{"epoll_wait"}, procfs.WaitingInput},
		{"epoll, eventfd and self-pipe", []string{"python3", "-c", "import os, select; r, w = os.pipe(); ev = os.eventfd(0); e = select.epoll(); [e.register(f, select.EPOLLIN) for f in (r, ev, 0)]; e.poll()"}, "python3", []string{"epoll_wait"}, procfs.WaitingInput},
		{"select, socketpair", []string{"python3", "-c", "import select, socket; a, b = socket.socketpair(); select.select([a, 0], [], [])"}, "python3", []string{"select"}, procfs.WaitingInput},
		// asyncio's loop: epoll, with its self-pipe a socketpair.
		{"asyncio reader", []string{"python3", "-c", "import asyncio, sys\nasync def main():\n    f = asyncio.get_running_loop().create_future()\n    asyncio.get_running_loop().add_reader(0, f.set_result, 1)\n    await f\nasyncio.run(main())"}, "python3", []string{"epoll_wait"}, procfs.WaitingInput},
		{"node REPL", []string{"node"}, "node", []string{"epoll_wait"}, procfs.IdleLoop},
		{"readline.question", []string{"node", "-e", "require('readline').createInterface({input: process.stdin, output: process.stdout}).question('Ok to proceed? (y) ', a => console.log(a))"}, "node", []string{"epoll_wait"}, procfs.IdleLoop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := startTerm(t, tt.argv...)
			w := waitFor(t, tm.pid(), tm.tty, tt.state)
			if w.Also != "" {
				t.Errorf("Also = %q, want nothing from outside", w.Also)
			}
			if w.PID != tm.pid() || w.Comm != tt.comm {
				t.Errorf("decided by %d %q, want %d %q", w.PID, w.Comm, tm.pid(), tt.comm)
			}
			if !contains(tt.syscall, w.Syscall) {
				t.Errorf("system call %q, want one of %q", w.Syscall, tt.syscall)
			}
			// The same process asked about another terminal is not waiting
			// for that one.
			other := startTerm(t, "sleep", "1000")
			if w, err := procfs.TTYWait(tm.pid(), procfs.TerminalAt(other.tty)); err != nil || w.State != procfs.NotWaiting {
				t.Errorf("TTYWait with another terminal %s = %+v, %v; want not waiting", other.tty, w, err)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The group leader waits for a child that reads the terminal: the scan of
// the group finds the child.
func TestTTYWaitFindsChildOfWaitingLeader(t *testing.T) {
	for _, argv := range [][]string{
		{"bash", "--norc", "--noprofile", "-c", "cat; echo done"},
		{"sh", "-c", "cat; true"},
		// A pipeline: the leader waits, the first stage reads the terminal
		// and the second reads a pipe.
		{"bash", "--norc", "--noprofile", "-c", "cat | cat; echo done"},
	} {
		t.Run(strings.Join(argv, " "), func(t *testing.T) {
			tm := startTerm(t, argv...)
			w := waitFor(t, tm.pid(), tm.tty, procfs.WaitingInput)
			if w.PID == tm.pid() || w.Comm != "cat" || w.Syscall != "read" {
				t.Errorf("decided by %+v, want a cat child of %d reading", w, tm.pid())
			}
			p, err := procfs.Stat(w.PID)
			if err != nil || p.PPID != tm.pid() || p.PGRP != tm.pid() {
				t.Errorf("the waiter %+v, %v is not a child of %d in its group", p, err, tm.pid())
			}
		})
	}
}

// The group's leader has exited and been reaped; a member still reads the
// terminal.
func TestTTYWaitGroupWithoutLeader(t *testing.T) {
	// With job control the pipeline is a group of its own, led by `true`,
	// which exits at once; cat lives on in that group in the foreground.
	// cat reads the terminal through a copy of bash's fd 0.
	tm := startTerm(t, "bash", "--norc", "--noprofile", "-c", "set -m; exec 3<&0; true | cat <&3; echo done")
	var cat procfs.Proc
	testkit.Eventually(t, "cat in a group of its own", func() (bool, string) {
		members, err := procfs.Session(tm.pid())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range members {
			if m.Comm == "cat" && m.PGRP != tm.pid() && m.PGRP != m.PID {
				cat = m
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", members)
	})
	testkit.Eventually(t, "the group leader gone", func() (bool, string) {
		p, err := procfs.Stat(cat.PGRP)
		return err != nil || p.Zombie() || p.PGRP != cat.PGRP, fmt.Sprintf("%+v %v", p, err)
	})
	w := waitFor(t, cat.PGRP, tm.tty, procfs.WaitingInput)
	if w.PID != cat.PID {
		t.Errorf("decided by %+v, want cat %d", w, cat.PID)
	}
}

// Programs that do not wait for the terminal, observed once they have
// settled in what they do.
func TestTTYWaitNotWaiting(t *testing.T) {
	t.Run("sleep", func(t *testing.T) {
		// sleep's fd 0 is the terminal and clock_nanosleep's first
		// argument is 0: only the system call tells them apart from a read.
		tm := startTerm(t, "sleep", "1000")
		testkit.Eventually(t, "sleep asleep", func() (bool, string) { return blockedInSyscall(tm.pid()) })
		neverWaiting(t, tm.pid(), tm.tty)
	})
	t.Run("busy loop", func(t *testing.T) {
		tm := startTerm(t, "bash", "--norc", "--noprofile", "-c", "while :; do :; done")
		testkit.Eventually(t, "bash running", func() (bool, string) {
			p, err := procfs.Stat(tm.pid())
			return err == nil && p.State == 'R', fmt.Sprintf("%+v %v", p, err)
		})
		neverWaiting(t, tm.pid(), tm.tty)
	})
	t.Run("sleep | cat", func(t *testing.T) {
		// The leader waits for its children; cat reads a pipe, not the
		// terminal.
		tm := startTerm(t, "bash", "--norc", "--noprofile", "-c", "sleep 1000 | cat; echo done")
		testkit.Eventually(t, "the pipeline settled", func() (bool, string) {
			members, err := procfs.Group(tm.pid())
			if err != nil {
				t.Fatal(err)
			}
			var seen []string
			settled := 0
			for _, m := range members {
				ok, s := blockedInSyscall(m.PID)
				if ok && (m.Comm == "sleep" || m.Comm == "cat" || m.PID == tm.pid()) {
					settled++
				}
				seen = append(seen, fmt.Sprintf("%d %s: %s", m.PID, m.Comm, s))
			}
			return settled == 3 && len(members) == 3, strings.Join(seen, "; ")
		})
		neverWaiting(t, tm.pid(), tm.tty)
	})
	t.Run("select on a pipe", func(t *testing.T) {
		// select whose set holds only a pipe, though fd 0 is the terminal.
		tm := startTerm(t, "python3", "-c", "import os, select; r, w = os.pipe(); print('ready', flush=True); select.select([r], [], [])")
		testkit.Eventually(t, "python3 in select", func() (bool, string) { return blockedInSyscall(tm.pid()) })
		neverWaiting(t, tm.pid(), tm.tty)
	})
	t.Run("no such group", func(t *testing.T) {
		tm := startTerm(t, "sleep", "1000")
		w, err := procfs.TTYWait(noSuchPID(t), procfs.TerminalAt(tm.tty))
		if err != nil || w != (procfs.Wait{State: procfs.NotWaiting}) {
			t.Errorf("TTYWait of no group = %+v, %v; want not waiting", w, err)
		}
	})
}

// The same process goes from waiting to working and back: TTYWait follows.
func TestTTYWaitFollowsTheProgram(t *testing.T) {
	// Reads a line, then computes forever.
	tm := startTerm(t, "bash", "--norc", "--noprofile", "-c", "read x; while :; do :; done")
	waitFor(t, tm.pid(), tm.tty, procfs.WaitingInput)
	if _, err := tm.master.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tm.pid(), tm.tty, procfs.NotWaiting)
}

// A shell without job control waiting at a read, with a background job in
// its own group that reads the terminal too: the job is the other reader,
// the leader never is.
func TestOtherReadersFindsABackgroundReader(t *testing.T) {
	tm := startTerm(t, "bash", "--norc", "--noprofile", "-c", "set +m; cat /dev/tty >/dev/null & read x; wait")
	var readers []procfs.Wait
	testkit.Eventually(t, "cat reading beside its shell", func() (bool, string) {
		var err error
		readers, err = procfs.OtherReaders(procfs.Tree{Session: tm.pid()}, procfs.TerminalAt(tm.tty))
		if err != nil {
			t.Fatal(err)
		}
		return len(readers) == 1, fmt.Sprintf("%+v", readers)
	})
	if readers[0].PID == tm.pid() || readers[0].Comm != "cat" {
		t.Fatalf("readers %+v", readers)
	}
	// A shell reading alone has no other reader.
	alone := startTerm(t, "bash", "--norc", "--noprofile", "-c", "read x")
	waitFor(t, alone.pid(), alone.tty, procfs.WaitingInput)
	if r, err := procfs.OtherReaders(procfs.Tree{Session: alone.pid()}, procfs.TerminalAt(alone.tty)); err != nil || len(r) != 0 {
		t.Fatalf("alone: %+v %v", r, err)
	}
}

// A background job of a shell without job control reads the terminal from
// the foreground group while the foreground command sleeps: the group does
// not wait for input. When the foreground command reads too, it does.
func TestTTYWaitLeavesOutAsyncJobsOfAShellWithoutJobControl(t *testing.T) {
	tm := startTerm(t, "bash", "--norc", "--noprofile", "-c", "set +m; cat /dev/tty >/dev/null & sleep 100")
	testkit.Eventually(t, "cat reading beside the sleeping command", func() (bool, string) {
		r, err := procfs.OtherReaders(procfs.Tree{Session: tm.pid()}, procfs.TerminalAt(tm.tty))
		return err == nil && len(r) == 1, fmt.Sprintf("%+v %v", r, err)
	})
	neverWaiting(t, tm.pid(), tm.tty)
	tm2 := startTerm(t, "bash", "--norc", "--noprofile", "-c", "set +m; cat /dev/tty >/dev/null & read x")
	w := waitFor(t, tm2.pid(), tm2.tty, procfs.WaitingInput)
	if w.Comm == "cat" {
		t.Fatalf("decided by the background job: %+v", w)
	}
}

// Event loops that are no proof of a wait for input: a relay (its other
// side can wake it while the program it relays for works), a connection, a
// pipe from another program; and a loop that wakes itself soon or has a
// thread at work, which only its processor time can clear.
func TestTTYWaitEventLoopsThatAreNoProof(t *testing.T) {
	tests := []struct {
		name  string
		argv  []string
		state procfs.WaitState
		also  string // part of Also, for WaitUnknown
		every bool   // a wake-up interval is known, for IdleLoop
	}{
		{"script relay", []string{"script", "-q", "-c", "sleep 1000", "/dev/null"}, procfs.WaitUnknown, "master side of another terminal", false},
		{"pty.spawn relay", []string{"python3", "-c", "import pty; pty.spawn(['sleep', '1000'])"}, procfs.WaitUnknown, "master side of another terminal", false},
		{"tcp connection", []string{"python3", "-c", "import select, socket; s = socket.create_server(('127.0.0.1', 0)); c = socket.create_connection(s.getsockname()); select.select([0, c], [], [])"}, procfs.WaitUnknown, "a socket", false},
		{"pipe from a child", []string{"python3", "-c", "import os, select, time\nr, w = os.pipe()\nif os.fork() == 0:\n    os.close(r); time.sleep(1000)\nos.close(w); select.select([0, r], [], [])"}, procfs.WaitUnknown, "a pipe from another program", false},
		// Woken from outside in other ways: a child alive (node's
		// child_process, a fork that holds the other end of a pipe, asyncio's
		// subprocesses), another thread that sleeps.
		{"node and a child", []string{"node", "-e", "require('readline').createInterface({input: process.stdin}); require('child_process').spawn('sleep', ['1000'], {stdio: 'inherit'})"}, procfs.WaitUnknown, "its child process `sleep`", false},
		{"a fork holding a pipe", []string{"python3", "-c", "import os, select, time\nr, w = os.pipe()\nif os.fork() == 0:\n    time.sleep(1000)\nselect.select([0, r], [], [])"}, procfs.WaitUnknown, "its child process", false},
		{"a sleeping thread", []string{"python3", "-c", "import asyncio, time\nasync def main():\n    asyncio.get_running_loop().add_reader(0, print)\n    await asyncio.to_thread(time.sleep, 1000)\nasyncio.run(main())"}, procfs.WaitUnknown, "another of its threads, which sleeps", false},
		{"a key check", []string{"python3", "-c", "import select\nwhile True: select.select([0], [], [], 0.02)"}, procfs.WaitUnknown, "a timeout of 20 ms", false},
		{"short timeout", []string{"python3", "-c", "import select\nwhile True: select.select([0], [], [], 0.2)"}, procfs.IdleLoop, "", true},
		{"a thread at work", []string{"python3", "-c", "import select, threading\nthreading.Thread(target=lambda: [0 for _ in iter(int, 1)], daemon=True).start()\nselect.select([0], [], [])"}, procfs.IdleLoop, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tm := startTerm(t, tt.argv...)
			w := waitFor(t, tm.pid(), tm.tty, tt.state)
			if w.PID != tm.pid() {
				t.Errorf("decided by %+v, want the leader %d", w, tm.pid())
			}
			if !strings.Contains(w.Also, tt.also) {
				t.Errorf("Also = %q, want it to name %q", w.Also, tt.also)
			}
			if (w.Every > 0) != tt.every || w.Every >= time.Second {
				t.Errorf("Every = %v, want a short interval: %v", w.Every, tt.every)
			}
			if tt.state == procfs.IdleLoop && w.Work == 0 {
				t.Errorf("Work = 0: the threads' processor time was not read")
			}
		})
	}
}
