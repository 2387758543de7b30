package bench

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// SoakOptions configure RunSoak.
type SoakOptions struct {
	// Agents run at once, each with its shell, terminals and tasks.
	Agents int
	// Duration is how long faults are thrown at them.
	Duration time.Duration
	// Terminals bounds the terminals each agent keeps open (default 2).
	// Each one and each shell take a pseudo-terminal of the system's
	// kernel.pty.max.
	Terminals int
	// Config is the host's configuration; the zero value means the
	// defaults.
	Config *config.Config
}

// SoakReport is what RunSoak found. A sound run has zero in every count
// but Calls and Ops.
type SoakReport struct {
	Agents   int            `json:"agents"`
	Duration float64        `json:"duration_s"`
	Calls    int64          `json:"calls"`
	Ops      map[string]int `json:"ops"`
	// Unanswered: calls with no answer within a minute (a hang).
	Unanswered int64 `json:"unanswered"`
	// Wrong: answers that were not what the call must give (another
	// call's output, a missing token, a failure where none may be).
	Wrong int64 `json:"wrong"`
	// FirstWrong describes the first of them.
	FirstWrong string `json:"first_wrong,omitempty"`
	// Left after the host stopped: processes of the soak, descriptors,
	// goroutines and OS threads beyond those before it started.
	ProcessesLeft  int `json:"processes_left"`
	DescriptorsOut int `json:"descriptors_left"`
	GoroutinesOut  int `json:"goroutines_left"`
	ThreadsAfter   int `json:"threads_after"`
	// The live heap (after forced collections): before the host started,
	// once every agent was stopped with the host still running (what a
	// long-lived server keeps of agents that are gone), and after the host
	// stopped.
	LiveHeapStart uint64 `json:"live_heap_start_bytes"`
	LiveHeapIdle  uint64 `json:"live_heap_idle_bytes"`
	LiveHeapEnd   uint64 `json:"live_heap_end_bytes"`
}

// liveHeap is the heap in use after two forced collections (the first may
// leave what sync.Pools held to the second).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Sound reports whether nothing went wrong.
func (r SoakReport) Sound() bool {
	return r.Unanswered == 0 && r.Wrong == 0 && r.ProcessesLeft == 0 && r.DescriptorsOut <= 0 && r.GoroutinesOut <= 0
}

// WriteTable prints the report for people.
func (r SoakReport) WriteTable(w io.Writer) error {
	b, _ := json.MarshalIndent(r, "", "  ")
	_, err := fmt.Fprintf(w, "%s\n", b)
	return err
}

const soakMark = "DSH_SOAK_MARK"

// RunSoak starts a host of its own, throws random faults at Agents agents
// for Duration (kill -9 of shells and of terminal programs, timeouts,
// exits, task kills, closes, cancellations, background output), checks
// every answer, stops the host and counts what is left.
func RunSoak(ctx context.Context, opts SoakOptions) (SoakReport, error) {
	rep := SoakReport{Agents: opts.Agents, Duration: opts.Duration.Seconds(), Ops: map[string]int{}}
	var tok [8]byte
	_, _ = crand.Read(tok[:])
	mark := soakMark + "=" + hex.EncodeToString(tok[:])
	fdsBefore, goBefore := countFDs(), runtime.NumGoroutine()
	rep.LiveHeapStart = liveHeap()
	cfg := config.Default()
	if opts.Config != nil {
		cfg = *opts.Config
	}
	cfg.Terminal.KillGraceMs = 200
	h, err := host.Start(host.Options{Config: &cfg, Env: append(os.Environ(), mark)})
	if err != nil {
		return rep, err
	}
	s := &soak{h: h, ops: map[string]int{}, terminals: opts.Terminals}
	if s.terminals <= 0 {
		s.terminals = 2
	}
	end := time.Now().Add(opts.Duration)
	var wg sync.WaitGroup
	for i := range opts.Agents {
		wg.Go(func() { s.agent(ctx, fmt.Sprintf("soak-%d", i), end) })
	}
	wg.Wait()
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var agentErr error
	for _, id := range h.Agents() {
		agentErr = errors.Join(agentErr, h.StopAgent(stopCtx, id))
	}
	rep.LiveHeapIdle = liveHeap()
	stopErr := errors.Join(agentErr, h.Stop(stopCtx))
	rep.Calls, rep.Unanswered, rep.Wrong = s.calls.Load(), s.unanswered.Load(), s.wrong.Load()
	rep.FirstWrong = s.firstWrong
	rep.Ops = s.ops
	rep.ProcessesLeft = len(marked(mark))
	// Goroutines of closed descriptors and timers end a moment after Stop.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (countFDs() > fdsBefore || runtime.NumGoroutine() > goBefore) {
		time.Sleep(10 * time.Millisecond)
	}
	rep.DescriptorsOut = countFDs() - fdsBefore
	rep.GoroutinesOut = runtime.NumGoroutine() - goBefore
	rep.ThreadsAfter = countThreads()
	rep.LiveHeapEnd = liveHeap()
	return rep, stopErr
}

type soak struct {
	h                        *host.Host
	calls, unanswered, wrong atomic.Int64
	mu                       sync.Mutex
	ops                      map[string]int
	firstWrong               string
	terminals                int
}

func (s *soak) bad(format string, args ...any) {
	s.wrong.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstWrong == "" {
		s.firstWrong = fmt.Sprintf(format, args...)
	}
}

// call runs one tool call with a safety bound; an answer that does not
// come within it is a hang. cancelAfter > 0 withdraws the call then.
func (s *soak) call(ctx context.Context, agent, tool string, args any, cancelAfter time.Duration) (text string, isErr bool, data map[string]any, err error) {
	s.calls.Add(1)
	raw, _ := json.Marshal(args)
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if cancelAfter > 0 {
		var cancelSoon context.CancelFunc
		c, cancelSoon = context.WithTimeout(c, cancelAfter)
		defer cancelSoon()
	}
	r, err := s.h.Call(c, agent, tool, raw)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && cancelAfter == 0 && ctx.Err() == nil {
			s.unanswered.Add(1)
		}
		return "", true, nil, err
	}
	if len(r.Data) > 0 {
		_ = json.Unmarshal(r.Data, &data)
	}
	return r.Text, r.IsError, data, nil
}

// agent throws faults at one agent until end.
func (s *soak) agent(ctx context.Context, id string, end time.Time) {
	var n int
	token := func() string { n++; return fmt.Sprintf("T%s-%d", strings.TrimPrefix(id, "soak-"), n) }
	// own reports whether every token in text is this agent's.
	own := func(text string) bool {
		for _, f := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ' ' }) {
			if strings.HasPrefix(f, "T") && strings.Contains(f, "-") && !strings.HasPrefix(f, "T"+strings.TrimPrefix(id, "soak-")+"-") {
				if _, err := strconv.Atoi(strings.SplitN(f[1:], "-", 2)[0]); err == nil {
					return false
				}
			}
		}
		return true
	}
	var terms []string
	for time.Now().Before(end) && ctx.Err() == nil {
		op := rand.IntN(len(soakOps))
		s.count(op)
		switch op {
		case 0, 1, 2: // a plain call: its own output, status 0
			tk := token()
			text, isErr, _, err := s.call(ctx, id, "bash", shell.Args{Command: "echo " + tk}, 0)
			if err == nil && (isErr || !strings.Contains(text, tk+"\n") || !own(text)) {
				s.bad("%s: echo %s gave %q", id, tk, text)
			}
		case 3: // a timeout
			if _, _, _, err := s.call(ctx, id, "bash", shell.Args{Command: "sleep 5", TimeoutMs: 20}, 0); err != nil && ctx.Err() == nil {
				s.bad("%s: timeout call: %v", id, err)
			}
		case 4: // the shell exits, or is killed
			cmd := "exit 3"
			if rand.IntN(2) == 0 {
				cmd = "kill -9 $$"
			}
			_, _, _, _ = s.call(ctx, id, "bash", shell.Args{Command: cmd}, 0)
		case 5: // a call withdrawn while it runs
			_, _, _, _ = s.call(ctx, id, "bash", shell.Args{Command: "sleep 1"}, time.Duration(1+rand.IntN(20))*time.Millisecond)
		case 6: // background output between calls
			tk := token()
			_, _, _, _ = s.call(ctx, id, "bash", shell.Args{Command: fmt.Sprintf("(for i in 1 2 3; do echo %s-$i; sleep 0.01; done) &", tk)}, 0)
		case 7: // a terminal opens
			if len(terms) < s.terminals {
				_, isErr, data, err := s.call(ctx, id, "terminal_open", map[string]any{}, 0)
				if tid, _ := data["terminal_id"].(string); err == nil && !isErr && tid != "" {
					terms = append(terms, tid)
				}
			}
		case 8: // a foreground send
			if len(terms) > 0 {
				tk := token()
				t := terms[rand.IntN(len(terms))]
				text, _, _, _ := s.call(ctx, id, "terminal_send", map[string]any{"terminal_id": t, "text": "echo " + tk, "keys": []string{"Enter"}, "wait_ms": 2000}, 0)
				if !own(text) {
					s.bad("%s: terminal send %s gave another's output: %q", id, tk, text)
				}
			}
		case 9: // a background send, killed
			if len(terms) > 0 {
				t := terms[rand.IntN(len(terms))]
				_, isErr, data, err := s.call(ctx, id, "terminal_send", map[string]any{"terminal_id": t, "text": "sleep 30", "keys": []string{"Enter"}, "run_in_background": true}, 0)
				if task, _ := data["task_id"].(string); err == nil && !isErr && task != "" {
					_, _, _, _ = s.call(ctx, id, "task_kill", map[string]any{"task_id": task}, 0)
				}
			}
		case 10: // a terminal's program killed, or the terminal closed
			if len(terms) > 0 {
				i := rand.IntN(len(terms))
				if rand.IntN(2) == 0 {
					_, _, _, _ = s.call(ctx, id, "terminal_signal", map[string]any{"terminal_id": terms[i], "signal": "KILL"}, 0)
				}
				_, _, _, _ = s.call(ctx, id, "terminal_close", map[string]any{"terminal_id": terms[i]}, 0)
				terms = append(terms[:i], terms[i+1:]...)
			}
		case 11: // a listing
			_, _, _, _ = s.call(ctx, id, "terminal_list", map[string]any{}, 0)
		case 12: // much output (1.5 MB, more than a history keeps)
			if len(terms) > 0 {
				t := terms[rand.IntN(len(terms))]
				text, _, _, _ := s.call(ctx, id, "terminal_send", map[string]any{"terminal_id": t, "text": "head -c 1125000 /dev/zero | base64 -w 100", "keys": []string{"Enter"}, "wait_ms": 20000}, 0)
				if !own(text) {
					s.bad("%s: terminal send of much output gave another's output: %q", id, text)
				}
			}
		}
	}
}

var soakOps = []string{"echo", "echo", "echo", "timeout", "exit_or_kill9", "cancel", "background_output",
	"terminal_open", "terminal_send", "task_kill", "kill_or_close_terminal", "terminal_list", "much_output"}

func (s *soak) count(op int) {
	s.mu.Lock()
	s.ops[soakOps[op]]++
	s.mu.Unlock()
}

// marked lists the live processes whose environment holds entry.
func marked(entry string) []int {
	procs, _ := procfs.List()
	var out []int
	needle := append([]byte(entry), 0)
	for _, p := range procs {
		if p.PID == os.Getpid() || p.Zombie() {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/environ")
		if err == nil && bytes.Contains(env, needle) {
			out = append(out, p.PID)
		}
	}
	return out
}

func countFDs() int {
	d, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(d)
}

func countThreads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}
