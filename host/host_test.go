package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(signalsHelperEnv); mode != "" {
		os.Exit(signalsHelper(mode))
	}
	if jobs := os.Getenv(sandboxHelperEnv); jobs != "" {
		os.Exit(sandboxHost(jobs))
	}
	if path := os.Getenv(recorderEnv); path != "" {
		os.Exit(recorder(path))
	}
	testkit.Main(m)
}

// signalsHelperEnv makes the test binary start a host and print its log:
// after calling ResetInheritedSignals when the value is "reset".
const signalsHelperEnv = "HOST_TEST_SIGNALS"

func signalsHelper(mode string) int {
	if mode == "reset" {
		if err := host.ResetInheritedSignals(); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	h, err := host.Start(host.Options{Logger: slog.New(slog.NewTextHandler(os.Stdout, nil))})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := h.Stop(context.Background()); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// A host started in a process whose children would inherit a blocked or
// ignored signal says so, and names the remedy; after the remedy it is quiet.
func TestStartWarnsOfInheritedSignals(t *testing.T) {
	out, err := testkit.DirtySignalsCommand(t, signalsHelperEnv+"=warn").Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "level=WARN") || !strings.Contains(string(out), "ResetInheritedSignals") ||
		!strings.Contains(string(out), testkit.DirtySignals) {
		t.Errorf("log %q: want a warning naming %q and ResetInheritedSignals", out, testkit.DirtySignals)
	}
	out, err = testkit.DirtySignalsCommand(t, signalsHelperEnv+"=reset").Output()
	if err != nil || len(out) != 0 {
		t.Errorf("after ResetInheritedSignals: %v, log %q; want no log", err, out)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func ctxT(t *testing.T) context.Context { return hosttest.Context(t) }

func start(t *testing.T, opts host.Options) *host.Host {
	t.Helper()
	return hosttest.Start(t, nil, opts)
}

func TestStopEndsEveryProcessAndLaterCallsFail(t *testing.T) {
	h := start(t, host.Options{})
	var sids []int
	for _, id := range []string{"a", "b", "c"} {
		res, err := h.Bash(ctxT(t), id, shell.Args{Command: "nohup sleep 1000 >/dev/null 2>&1 & " + testkit.ShellPID})
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, testkit.HostPID(t, res.Text))
	}
	if err := h.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Stop returns when every process is gone: look right away.
	for _, sid := range sids {
		if left, err := procfs.Session(sid); err != nil || len(left) > 0 {
			t.Fatalf("session %d survived Stop: %v", sid, left)
		}
	}
	if _, err := h.Bash(ctxT(t), "a", shell.Args{Command: "true"}); !errors.Is(err, host.ErrStopped) {
		t.Fatalf("call after Stop: %v", err)
	}
	if err := h.Stop(ctxT(t)); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// A host can run on an actor system the program already has; stopping the
// host leaves that system running.
func TestRunsOnTheEmbeddersActorSystem(t *testing.T) {
	system := testkit.NewSystem(t)
	h := start(t, host.Options{System: system})
	if h.System() != system {
		t.Fatal("the host made a system of its own")
	}
	res, err := h.Bash(ctxT(t), "a", shell.Args{Command: "echo embedded"})
	if err != nil || res.Text != "embedded\n" {
		t.Fatalf("%q %v", res.Text, err)
	}
	if err := h.Stop(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if system.IsStopped() {
		t.Fatal("stopping the host shut the embedder's system down")
	}
	probe := testkit.NewProbe(t, system)
	system.Root.Send(probe.PID(), "still here")
	if got := testkit.Expect[string](t, probe, testkit.Timeout); got != "still here" {
		t.Fatal(got)
	}
	// A second host on the same system gets its own actor names.
	h2 := start(t, host.Options{System: system})
	if _, err := h2.Bash(ctxT(t), "a", shell.Args{Command: "true"}); err != nil {
		t.Fatal(err)
	}
}

func TestStopAgentKillsItsProcessesAndTheIDCanBeUsedAgain(t *testing.T) {
	h := start(t, host.Options{})
	res, err := h.Bash(ctxT(t), "a", shell.Args{Command: "export X=1; sleep 1000 & disown; " + testkit.ShellPID})
	if err != nil {
		t.Fatal(err)
	}
	sid := testkit.HostPID(t, res.Text)
	if err := h.StopAgent(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	if left, err := procfs.Session(sid); err != nil || len(left) > 0 {
		t.Fatalf("session %d survived StopAgent: %v", sid, left)
	}
	if err := h.StopAgent(ctxT(t), "a"); err != nil {
		t.Fatalf("stopping an agent that does not run: %v", err)
	}
	res, err = h.Bash(ctxT(t), "a", shell.Args{Command: `echo "[${X-}]"`})
	if err != nil || res.Text != "[]\n" || !res.FreshShell {
		t.Fatalf("%q %v", res.Text, err)
	}
	if ids := h.Agents(); len(ids) != 1 || ids[0] != "a" {
		t.Fatalf("agents %v", ids)
	}
}

func TestGenericCallCarriesTextErrorFlagAndData(t *testing.T) {
	h := start(t, host.Options{})
	r, err := h.Call(ctxT(t), "a", "bash", json.RawMessage(`{"command":"echo hi; exit_=3; false"}`))
	if err != nil {
		t.Fatal(err)
	}
	var data map[string]any
	if err := json.Unmarshal(r.Data, &data); err != nil {
		t.Fatal(err)
	}
	if r.Text != "hi\n[exit code: 1]" || r.IsError || data["exit_code"] != float64(1) || r.Tool != "bash" || r.CallId == "" {
		t.Fatalf("%+v %v", r, data)
	}
	r, err = h.Call(ctxT(t), "a", "nope", json.RawMessage(`{}`))
	if err != nil || !r.IsError || !strings.Contains(r.Text, `unknown tool "nope"`) {
		t.Fatalf("%+v %v", r, err)
	}
	tools := h.Tools()
	names := []string{}
	for _, tool := range tools {
		names = append(names, tool.Name)
		var schema map[string]any
		if err := json.Unmarshal(tool.InputSchema, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: schema %s: %v", tool.Name, tool.InputSchema, err)
		}
	}
	if tools[0].Name != "bash" || tools[0].Description != shell.DefaultDescription || !strings.Contains(string(tools[0].InputSchema), `"command"`) {
		t.Fatalf("bash tool: %+v", tools[0])
	}
	if want := "bash terminal_open terminal_send terminal_read terminal_signal terminal_resize terminal_close terminal_list task_output task_kill task_list"; strings.Join(names, " ") != want {
		t.Fatalf("tools %v", names)
	}
}

func TestAgentIDsAreValidated(t *testing.T) {
	h := start(t, host.Options{})
	for _, id := range []string{"", "a/b", "has space", "-lead", strings.Repeat("x", 129), "ünï"} {
		if _, err := h.Agent(ctxT(t), id); err == nil || !strings.Contains(err.Error(), "agent id") {
			t.Errorf("id %q: %v", id, err)
		}
	}
	for _, id := range []string{"a", "agent-1", "team.b_c:d@e", strings.Repeat("x", 128)} {
		if err := host.ValidateAgentID(id); err != nil {
			t.Errorf("id %q: %v", id, err)
		}
	}
	a, err := h.Agent(ctxT(t), "ok-1")
	if err != nil || a.ID() != "ok-1" {
		t.Fatal(err)
	}
	res, err := a.Bash(ctxT(t), shell.Args{Command: "echo via handle"})
	if err != nil || res.Text != "via handle\n" {
		t.Fatalf("%q %v", res.Text, err)
	}
}

func TestInvalidConfigIsRefused(t *testing.T) {
	cfg := host.Options{}
	bad := config.Default()
	bad.Bash.TimeoutMs = 0
	cfg.Config = &bad
	if _, err := host.Start(cfg); err == nil || !strings.Contains(err.Error(), "bash.timeoutMs") {
		t.Fatalf("got %v", err)
	}
}

func TestCancelledContextEndsTheCall(t *testing.T) {
	h := start(t, host.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Bash(ctx, "a", shell.Args{Command: "sleep 1000"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	res, err := h.Bash(ctxT(t), "a", shell.Args{Command: "echo after"})
	if err != nil || !strings.HasSuffix(res.Text, "after\n") {
		t.Fatalf("%q %v", res.Text, err)
	}
}

// A call whose context is already cancelled is refused before anything
// runs: the command leaves no trace.
func TestCallWithCancelledContextNeverRuns(t *testing.T) {
	h := start(t, host.Options{})
	flag := filepath.Join(t.TempDir(), "ran")
	if _, err := h.Bash(ctxT(t), "a", shell.Args{Command: "true"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	for range 20 {
		if _, err := h.Bash(ctx, "a", shell.Args{Command: "touch " + flag}); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	}
	// The shell is still the same one and never saw the command.
	res, err := h.Bash(ctxT(t), "a", shell.Args{Command: "test -e " + flag + "; echo $?"})
	if err != nil || res.Text != "1\n" || res.FreshShell {
		t.Fatalf("%+v %v: want the file absent and the same shell", res, err)
	}
}

// Every call is answered exactly once: many timeouts in a row (each a
// reset), and calls still queued when the agent stops.
func TestEveryCallIsAnswered(t *testing.T) {
	h := start(t, host.Options{})
	const n = 150
	var wg sync.WaitGroup
	answered := make(chan error, 2*n)
	for range n {
		wg.Go(func() {
			_, err := h.Bash(ctxT(t), "a", shell.Args{Command: "sleep 10", TimeoutMs: 10})
			answered <- err
		})
	}
	wg.Wait()
	for range n {
		if err := <-answered; err != nil {
			t.Fatalf("a timed-out call: %v", err)
		}
	}
	// Calls waiting behind a long one when the agent stops get an answer:
	// an error saying so, or (sent after the stop) a run in a new agent.
	// Never none.
	wg.Go(func() {
		res, err := h.Bash(ctxT(t), "b", shell.Args{Command: "sleep 30.0417"}) // a number no other test runs: the check below looks machine-wide
		if err == nil && !res.IsError {
			err = fmt.Errorf("the call the stop cut short succeeded: %+v", res)
		}
		if err != nil && strings.Contains(err.Error(), "stop") {
			err = nil
		}
		if err == nil && !strings.Contains(res.Text, "stop") {
			err = fmt.Errorf("the call the stop cut short: %q", res.Text)
		}
		answered <- err
	})
	for range 19 {
		wg.Go(func() {
			res, err := h.Bash(ctxT(t), "b", shell.Args{Command: "echo queued"})
			switch {
			case err != nil && !strings.Contains(err.Error(), "stop"):
				answered <- err
			case err == nil && res.IsError && !strings.Contains(res.Text, "stop"):
				answered <- fmt.Errorf("queued call: %q", res.Text)
			case err == nil && !res.IsError && res.Text != "queued\n" && !strings.HasSuffix(res.Text, "queued\n"):
				answered <- fmt.Errorf("queued call: %q", res.Text)
			default:
				answered <- nil
			}
		})
	}
	testkit.Eventually(t, "agent b's shell running sleep", func() (bool, string) {
		return len(testkit.CommandsRunning("sleep 30.0417")) > 0, "not yet"
	})
	if err := h.StopAgent(ctxT(t), "b"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for range 20 {
		if err := <-answered; err != nil {
			t.Error(err)
		}
	}
}

// Live shells do not hold an OS thread each: their exits are waited for in
// the runtime's poller.
func TestShellsHoldNoThreadEach(t *testing.T) {
	h := start(t, host.Options{})
	const n = 80
	// Started a few at a time: a sandbox's start blocks a thread or two
	// for milliseconds (cgroupfs writes are not in the runtime's poller),
	// and Go keeps the threads a burst made. What is measured is what the
	// shells hold once started.
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for a := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := h.Bash(ctxT(t), fmt.Sprintf("t%d", a), shell.Args{Command: "true"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var threads int
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if threads == 0 || threads >= n {
		t.Fatalf("%d OS threads with %d live shells", threads, n)
	}
}

// Out of file descriptors: starting one more shell is an error that names
// the limit, and Stop still ends every process.
func TestOutOfDescriptors(t *testing.T) {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(host.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var shells []string
	res, err := h.Bash(ctxT(t), "first", shell.Args{Command: "sleep 1000 & " + testkit.ShellPID})
	if err != nil {
		t.Fatal(err)
	}
	shells = append(shells, res.Text)
	// A limit just above what is open now.
	fds, _ := os.ReadDir("/proc/self/fd")
	low := old
	low.Cur = uint64(len(fds) + 12)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
		}
	}
	defer restore()
	var limitErr string
	for i := 0; i < 50 && limitErr == ""; i++ {
		res, err := h.Bash(ctxT(t), fmt.Sprintf("a%d", i), shell.Args{Command: "sleep 1000 & " + testkit.ShellPID})
		switch {
		case err != nil:
			limitErr = err.Error()
		case res.IsError:
			limitErr = res.Text
		default:
			shells = append(shells, res.Text)
		}
	}
	if !strings.Contains(limitErr, "ulimit -n") {
		t.Fatalf("no error naming the limit: %q", limitErr)
	}
	if err := h.Stop(ctxT(t)); err != nil {
		t.Fatalf("Stop with no descriptors left: %v", err)
	}
	restore()
	for _, out := range shells {
		testkit.ShellGone(t, out)
	}
}

// Stop while agents are making their first calls: every call is answered
// (done, or refused as stopped), Stop ends in time, and nothing is left. An agent handed a call while it
// stopped once spawned its shell then; protoactor never stopped that
// child, the agent never ended, and Stop timed out with shells and
// sandboxes left running.
func TestStopDuringABurstOfFirstCalls(t *testing.T) {
	for i := range 20 {
		mark := testkit.ProcessMark(t)
		h := hosttest.Start(t, nil, host.Options{Env: append(os.Environ(), mark)})
		answered := make(chan error, 10)
		for j := range 10 {
			go func() {
				_, err := h.Bash(context.Background(), fmt.Sprintf("s%d", j), shell.Args{Command: "echo hi"})
				answered <- err
			}()
		}
		// Stop once k agents exist, their calls on the way to them.
		k := 1 + i%10
		testkit.Eventually(t, fmt.Sprintf("%d agents", k), func() (bool, string) {
			n := len(h.Agents())
			return n >= k, fmt.Sprint(n)
		})
		if err := h.Stop(ctxT(t)); err != nil {
			t.Fatalf("round %d: Stop: %v", i, err)
		}
		for range 10 {
			select {
			case err := <-answered:
				if err != nil && !errors.Is(err, host.ErrStopped) {
					t.Errorf("round %d: a call: %v", i, err)
				}
			case <-time.After(testkit.Timeout):
				t.Fatalf("round %d: a call was never answered", i)
			}
		}
		// Stop returns when every process is gone: look right away.
		if left := testkit.MarkedProcesses(mark); len(left) > 0 {
			t.Fatalf("round %d: left after Stop: %v", i, left)
		}
	}
}
