package shell_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// Programs that wait for input in an event loop (node's REPL, readline's
// question, as npx's "Ok to proceed?", asyncio) return the call early as
// cat does, where they held it until the time limit and cost the shell; a
// relay (script, as ssh -t) is waited for while it works and said to be
// inferred waiting once it is quiet (issue 16 §6, §14).
func TestEventLoopsWaitingForInputReturnEarly(t *testing.T) {
	node := testkit.Node(t)
	py := testkit.Python3(t)
	h := newHost(t, func(c *config.Config) {
		c.Bash.TimeoutMs = 60000
		c.Bash.InputSilenceMs = 1500
	})
	wantText(t, bash(t, h, "a", "cd /tmp && X=kept"), "")
	tests := []struct {
		name     string
		command  string
		inferred bool
		contains []string
	}{
		{"node REPL", node, false, []string{"> ", "node", "epoll_wait"}},
		{"readline.question", node + ` -e "require('readline').createInterface({input: process.stdin, output: process.stdout}).question('Ok to proceed? (y) ', a => console.log(a))"`,
			false, []string{"Ok to proceed? (y)"}},
		{"asyncio reader", py + ` -c "import asyncio
async def main():
    f = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_reader(0, f.set_result, 1)
    print('ready?', flush=True)
    await f
asyncio.run(main())"`, false, []string{"ready?"}},
		{"a relay, quiet", "script -q -c 'echo relaying; read x' /dev/null", true, []string{"relaying", "script", "master side of another terminal", "may still be working"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// node's REPL starts with a timer of its own due in about 8 s,
			// which is waited out like any event loop's timer (a script's
			// setTimeout may print): the call may take that long.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := h.Bash(ctx, "a", shell.Args{Command: tt.command})
			if err != nil {
				t.Fatal(err)
			}
			if !res.WaitingForInput || res.WaitInferred != tt.inferred || res.TimedOut || res.ShellReset {
				t.Fatalf("want waiting for input (inferred %v), got %+v", tt.inferred, res)
			}
			for _, c := range tt.contains {
				if !strings.Contains(res.Text, c) {
					t.Errorf("result does not contain %q:\n%s", c, res.Text)
				}
			}
			// The next call interrupts it and runs in the same shell.
			next := bash(t, h, "a", "echo $X $PWD")
			if !strings.HasSuffix(strings.TrimSpace(next.Text), "kept /tmp") || next.ShellReset || next.ExitCode == nil || *next.ExitCode != 0 {
				t.Fatalf("the next call: %+v", next)
			}
		})
	}
	// A relay whose program works is waited for, not taken for a wait.
	res := bashArgs(t, h, "a", shell.Args{Command: "script -q -c 'sleep 0.5; echo relayed-$((6*7))' /dev/null"})
	if res.WaitingForInput || !strings.Contains(res.Text, "relayed-42") || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("a working relay: %+v", res)
	}
}

// A wait with a timeout of its own is not waited out when the program
// redraws a screen (cursor positioning, erasing, the alternate screen) each
// time its wait times out (a clock, top every 3 s), nor when a full-screen
// program (top, vim: a screen drawn and terminal modes of its own) waits for
// keys: it is waiting for input, not held until the call's time runs out.
func TestPeriodicDisplaysAreNotWaitedOut(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.TimeoutMs = 30000 })
	py := testkit.Python3(t)
	for _, c := range []struct{ name, command, contains string }{
		{"redraws", py + ` -c "import select
while True:
    select.select([0], [], [], 1.2)
    print('\033[H\033[2Jtick', flush=True)"`, "tick"},
		{"top", "TERM=xterm top -d 3", "load average"},
		// A clock in bash itself, waking every second (found by a hostile
		// pass: held until the time limit).
		{"a clock", `while :; do printf '\033[H\033[2J%s' "clock-$RANDOM"; read -t 1 -n 1 k && break; done`, "clock-"},
		// top where TERM has no cursor moves: plain text at each timeout,
		// with terminal modes of its own.
		{"top, dumb", "TERM=dumb top -d 1", "load average"},
		// An idle program that re-arms the same timer and prints nothing
		// (as ipython's prompt does every 500 ms).
		{"an idle timer", py + ` -c "import select
print('ready> ', end='', flush=True)
while not select.select([0], [], [], 0.6)[0]: pass"`, "ready> "},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := bash(t, h, "a", c.command)
			if !res.WaitingForInput || res.TimedOut || !strings.Contains(res.Text, c.contains) {
				t.Fatalf("want waiting for input, got %+v", res)
			}
			if next := bash(t, h, "a", "echo next"); !strings.HasSuffix(next.Text, "next\n") || next.ShellReset {
				t.Fatalf("the next call: %+v", next)
			}
		})
	}
}

// A timed wait is waited out whatever the program does between its waits,
// as a script would wait: a read that sets terminal modes of its own (read
// -n, -d, -e), a countdown that prints between its key checks, a program
// that works and prints progress between them. Before, the first was
// answered as waiting for input at once and the others after their first
// wait, and the next call's SIGINT killed them before their default.
func TestTimedWaitsAreWaitedOutWhatTheProgramPrints(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.TimeoutMs = 30000 })
	py := testkit.Python3(t)
	for _, c := range []struct{ name, command, want string }{
		{"read-n", `read -t 2 -n 1 -p 'Continue? [Y/n] ' a; echo " answer=${a:-Y}"`, "Continue? [Y/n]  answer=Y\n"},
		{"read-d", `read -t 2 -d q a; echo "a=[$a]"`, "a=[]\n"},
		{"read-e", `read -t 2 -e a; echo "a=[$a]"`, "a=[]\n"},
		{"countdown", `for i in 3 2 1; do echo "booting in $i (press a key to abort)"; read -t 1.5 -n 1 k && { echo aborted; break; }; done; echo booted`,
			"booting in 3 (press a key to abort)\nbooting in 2 (press a key to abort)\nbooting in 1 (press a key to abort)\nbooted\n"},
		{"rounds", `for i in 1 2 3; do read -t 1.5 x; echo waited $i; done`, "waited 1\nwaited 2\nwaited 3\n"},
		{"progress", py + ` -c 'import select,time
for i in range(3):
  t=time.time()
  while time.time()-t<0.3: pass
  print("progress",i,flush=True)
  if select.select([0],[],[],1)[0]: break
print("loop done")'`, "progress 0\nprogress 1\nprogress 2\nloop done\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := bash(t, h, c.name, c.command)
			if res.WaitingForInput || res.TimedOut || res.ExitCode == nil || *res.ExitCode != 0 || res.Text != c.want {
				t.Fatalf("want %q, got %+v", c.want, res)
			}
		})
	}
}

// Programs at work while they also watch the terminal are waited for, not
// taken for waiting for input (found by a hostile pass): an event loop
// with a child alive or a thread asleep or at work, a thread reading the
// terminal while the main thread computes, a relay whose program computes.
// And a loop that checks for a key every 20 ms is said to be waiting
// (inferred) once quiet, not held until the time limit.
func TestWorkingProgramsAreNotTakenForWaiting(t *testing.T) {
	node := testkit.Node(t)
	py := testkit.Python3(t)
	h := newHost(t, func(c *config.Config) {
		c.Bash.TimeoutMs = 60000
		c.Bash.InputSilenceMs = 1500
	})
	for _, c := range []struct{ name, command, want string }{
		{"a fork holding a pipe", py + ` -c 'import os, select, time
r, w = os.pipe()
if os.fork() == 0:
    time.sleep(1); os.write(w, b"x"); os._exit(0)
select.select([0, r], [], []); print("child done")'`, "child done\n"},
		{"node and its child", node + ` -e "require('readline').createInterface({input: process.stdin}); require('child_process').spawn('sh', ['-c', 'sleep 1; echo child-done'], {stdio: 'inherit'}).on('exit', () => process.exit(0))"`, "child-done\n"},
		{"a thread asleep", py + ` -c 'import asyncio, time
async def main():
    asyncio.get_running_loop().add_reader(0, print)
    await asyncio.to_thread(time.sleep, 1)
    print("slept")
asyncio.run(main())'`, "slept\n"},
		{"a worker at work", node + ` -e "const w = new (require('worker_threads').Worker)('let s = 0; for (let i = 0; i < 2e7; i++) s += i; require(\'worker_threads\').parentPort.postMessage(s)', {eval: true}); w.on('message', () => { console.log('summed'); process.exit(0) }); require('readline').createInterface({input: process.stdin})"`, "summed\n"},
		{"a thread reads while the main thread computes", py + ` -c 'import threading, time
threading.Thread(target=input, daemon=True).start()
t = time.time()
while time.time() - t < 2: pass
print("computed")'`, "computed\n"},
		// A timed prompt built on a thread: input() in a thread, the main
		// thread waiting for it with a timeout (a timed futex).
		{"a thread's input with a timeout", py + ` -c 'import threading
r = []
t = threading.Thread(target=lambda: r.append(input("answer? ")), daemon=True); t.start(); t.join(1.5)
print("got", r or "default")'`, "got default\n"},
		{"a relay whose program computes", `script -qc "` + py + ` -c 'import time
t = time.time()
while time.time() - t < 3: pass
print(123)'" /dev/null`, "123\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := bash(t, h, "a", c.command)
			if res.WaitingForInput || res.ExitCode == nil || *res.ExitCode != 0 || !strings.HasSuffix(strings.ReplaceAll(res.Text, "\r\n", "\n"), c.want) {
				t.Fatalf("want %q with exit 0, got %+v", c.want, res)
			}
		})
	}
	res := bash(t, h, "a", py+` -c 'import select, sys
print("start", flush=True)
while not select.select([0], [], [], 0.02)[0]: pass'`)
	if !res.WaitingForInput || !res.WaitInferred || res.TimedOut {
		t.Fatalf("a key check every 20 ms: %+v", res)
	}
}

// A progress bar's line is shown as the terminal shows it at the end, not
// every state it went through (issue 16 §10).
func TestRewrittenLinesAreShownAsTheyEnd(t *testing.T) {
	h := newHost(t, nil)
	res := bash(t, h, "a", `for i in $(seq 1 200); do printf '\r[%-20s] %3d%%' "$(printf '#%.0s' $(seq 1 $((i/10))))" $((i/2)); done; echo; printf 'step 1\r\033[Kstep 2\n'; echo 'RESULT: 42'`)
	want := "[####################] 100%\nstep 2\nRESULT: 42\n"
	if res.Text != want || exitCode(res) != "0" {
		t.Fatalf("got %q, want %q", res.Text, want)
	}
}
