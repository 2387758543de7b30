package waitproof

import (
	"os"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// run plays the owner's part: it feeds the tracker's ticks and the process's
// probes back to it until judge says stop, or fails the test at the deadline.
func run(t *testing.T, command string, judge func(v Verdict, probes int) bool) {
	t.Helper()
	mark := testkit.ProcessMark(t)
	ch := make(chan any, 1024)
	send := func(m any) { ch <- m }
	proc, err := ptyproc.Start(ptyproc.Options{Path: "bash", Args: []string{"-c", command}, Env: append(os.Environ(), mark)}, send)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Close() })
	tr := New(send)
	tr.Start(proc)
	defer tr.Stop()
	deadline := time.After(testkit.Timeout)
	probes := 0
	for {
		select {
		case m := <-ch:
			switch m := m.(type) {
			case *Tick:
				tr.Tick(m)
			case *ptyproc.Probe:
				probes++
				v, w := tr.Probe(m)
				if v == Waiting {
					t.Logf("waiting: %+v", w)
				}
				if judge(v, probes) {
					return
				}
			case *ptyproc.Output:
				tr.Output()
				m.Release()
			}
		case <-deadline:
			t.Fatalf("no decision after %d probes", probes)
		}
	}
}

func TestCatIsProvenWaiting(t *testing.T) {
	run(t, "cat", func(v Verdict, _ int) bool { return v == Waiting })
}

// A program that sleeps is never judged waiting, however often it is looked at.
func TestSleepIsNeverWaiting(t *testing.T) {
	run(t, "sleep 100", func(v Verdict, probes int) bool {
		if v == Waiting {
			t.Fatal("sleep judged waiting for input")
		}
		return probes >= 8
	})
}

// An event loop whose only outside source is the terminal waits for input.
func TestAnEventLoopOnTheTerminalIsProven(t *testing.T) {
	run(t, `exec python3 -c 'import selectors,sys; s=selectors.EpollSelector(); s.register(sys.stdin, selectors.EVENT_READ); s.select()'`,
		func(v Verdict, _ int) bool {
			if v == Unknown {
				t.Fatal("epoll on the terminal alone judged unknown")
			}
			return v == Waiting
		})
}

// A relay's wait (the terminal and another terminal's master side) is no
// proof: the program it relays for may be working.
func TestARelayIsUnknown(t *testing.T) {
	run(t, `exec script -q -c 'sleep 100' /dev/null`, func(v Verdict, probes int) bool {
		if v == Waiting {
			t.Fatal("a relay judged waiting for input")
		}
		return v == Unknown
	})
}

// A loop that wakes every 200 ms and does nothing is proven waiting, but
// only by a watch that spans a wake-up.
func TestAnIdleLoopIsProvenAcrossAWakeUp(t *testing.T) {
	var first time.Time
	run(t, `exec python3 -c 'import select
while True: select.select([0], [], [], 0.2)'`, func(v Verdict, probes int) bool {
		if first.IsZero() {
			first = time.Now()
		}
		if v == Waiting && time.Since(first) < 200*time.Millisecond {
			t.Fatalf("proven %v after the first look, before a wake-up could be seen", time.Since(first))
		}
		return v == Waiting
	})
}

// A loop that looks for a key between bits of work is never judged waiting,
// whether it works itself or waits for a child that does.
func TestABusyLoopIsNeverWaiting(t *testing.T) {
	for name, command := range map[string]string{
		"its own work": `exec python3 -c 'import select, time
while True:
    select.select([0], [], [], 0.15)
    end = time.process_time() + 0.02
    while time.process_time() < end: pass'`,
		"a child's work": `exec python3 -c 'import select, subprocess, sys
p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
while True: select.select([0], [], [], 0.3)'`,
		"a thread reads while the main thread works": `exec python3 -c 'import threading
threading.Thread(target=input, daemon=True).start()
while True: pass'`,
		"a worker thread works": `exec node -e "new (require('worker_threads').Worker)('for (;;) {}', {eval: true}); require('readline').createInterface({input: process.stdin})"`,
		"a key check": `exec python3 -c 'import select
while True: select.select([0], [], [], 0.02)'`,
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			run(t, command, func(v Verdict, probes int) bool {
				if v == Waiting {
					t.Fatal("judged waiting for input")
				}
				return time.Since(start) > 2*time.Second && probes >= 10
			})
		})
	}
}

func TestStaleTicksAndProbesAreIgnored(t *testing.T) {
	tr := New(func(any) {})
	if v, _ := tr.Probe(&ptyproc.Probe{Tag: "someone else's"}); v != Stale {
		t.Fatalf("%v", v)
	}
	tr.Tick(&Tick{t: New(nil), n: 1}) // another tracker's: nothing happens
}
