package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/supervision"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

type fixture struct {
	t      *testing.T
	system *actor.ActorSystem
	mark   string
	logs   *testkit.Buffer
	// limits count the agents' shells, terminals and tasks (no limit).
	limits *limits.Set
}

func newFixture(t *testing.T) *fixture {
	mark := testkit.ProcessMark(t)
	return &fixture{t: t, system: testkit.NewSystem(t), mark: mark, logs: &testkit.Buffer{}, limits: config.Limits{}.NewSet()}
}

// spawn starts an agent as a root actor (protoactor's default guardian
// restarts it when it fails) and stops it, and waits for its processes, when
// the test ends.
func (f *fixture) spawn(id string, policy *supervision.Policy) *actor.PID {
	reaper := &ptyproc.Reaper{}
	pid, err := f.system.Root.SpawnNamed(Props(Options{
		ID:          id,
		Config:      config.Default(),
		Env:         append(os.Environ(), f.mark),
		Logger:      slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Reaper:      reaper,
		ShellPolicy: policy,
		Limits:      f.limits,
	}), id)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		testkit.Stop(f.t, f.system, pid)
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
		defer cancel()
		if err := reaper.Wait(ctx); err != nil {
			f.t.Error(err)
		}
	})
	return pid
}

func (f *fixture) call(pid *actor.PID, tool, args string) *messages.ToolResult {
	f.t.Helper()
	res, err := f.system.Root.RequestFuture(pid, &messages.ToolCall{CallId: "t", Tool: tool, Arguments: []byte(args)}, testkit.Timeout).Result()
	if err != nil {
		f.t.Fatalf("%s %s: %v", tool, args, err)
	}
	return res.(*messages.ToolResult)
}

func (f *fixture) bash(pid *actor.PID, command string) string {
	f.t.Helper()
	b, _ := json.Marshal(shell.Args{Command: command})
	r := f.call(pid, "bash", string(b))
	if r.IsError {
		f.t.Fatalf("bash %q: %s", command, r.Text)
	}
	return r.Text
}

func (f *fixture) shellPID(pid *actor.PID) int {
	f.t.Helper()
	n := testkit.HostPID(f.t, f.bash(pid, testkit.ShellPID))
	return n
}

// nextEvent waits for the supervision decision about child.
func nextEvent(t *testing.T, events <-chan *actor.SupervisorEvent, child *actor.PID) *actor.SupervisorEvent {
	t.Helper()
	deadline := time.After(testkit.Timeout)
	for {
		select {
		case e := <-events:
			if e.Child.Equal(child) {
				return e
			}
		case <-deadline:
			t.Fatalf("no supervision decision about %v", child)
		}
	}
}

// A panic in an agent is logged with its stack, handled by supervision (the
// agent restarts, which replaces its shell), and leaves other agents alone.
func TestPanicIsLoggedSupervisedAndContained(t *testing.T) {
	f := newFixture(t)
	events := testkit.SupervisorEvents(t, f.system)
	a, b := f.spawn("a", nil), f.spawn("b", nil)
	f.bash(a, "export X=from-a")
	f.bash(b, "export X=from-b")
	if res := f.call(a, "terminal_open", `{}`); res.IsError {
		t.Fatalf("%+v", res)
	}
	oldShell, otherShell := f.shellPID(a), f.shellPID(b)

	f.system.Root.Send(a, &crash{reason: errors.New("boom")})
	e := nextEvent(t, events, a)
	if e.Directive != actor.RestartDirective || !strings.Contains(e.Reason.(error).Error(), "boom") {
		t.Fatalf("decision %v for %v", e.Directive, e.Reason)
	}
	if got := f.bash(a, `echo "[${X-}]"`); got != "[]\n" {
		t.Fatalf("agent a after its restart: %q, want a fresh shell", got)
	}
	// What the failed agent held was given back: two shells (a's new one,
	// b's), no terminal.
	if s, tm := f.limits.Shells.InUse(), f.limits.Terminals.InUse(); s != 2 || tm != 0 {
		t.Errorf("after the restart, %d shells and %d terminals are counted, want 2 and 0", s, tm)
	}
	testkit.SessionGone(t, oldShell)
	// The terminal it lost is not simply unknown: the answer says why.
	if res := f.call(a, "terminal_read", `{"terminal_id":"t1"}`); !res.IsError || !strings.Contains(res.Text, "restarted") || !strings.Contains(res.Text, "t1") {
		t.Fatalf("a terminal lost in the restart: %+v", res)
	}
	if got := f.bash(b, `echo "[${X-}]"; `+testkit.ShellPID); !strings.HasPrefix(got, "[from-b]\n") || testkit.HostPID(t, got) != otherShell {
		t.Fatalf("agent b was disturbed: %q (its shell was %d)", got, otherShell)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "boom") || !strings.Contains(logs, "agent.(*Actor).Receive") {
		t.Fatalf("the panic was not logged with its stack:\n%s", logs)
	}
}

// A shell reset is a supervised restart with a typed reason; the shell keeps
// its PID and the next call gets a fresh bash.
func TestShellResetIsASupervisedRestart(t *testing.T) {
	f := newFixture(t)
	events := testkit.SupervisorEvents(t, f.system)
	a := f.spawn("a", nil)
	f.bash(a, "true")
	res := f.call(a, "bash", `{"command":"exit 5"}`)
	if !strings.Contains(res.Text, "[shell exited: code 5]") {
		t.Fatalf("%q", res.Text)
	}
	var reset *shell.ResetError
	for {
		e := testkit.Next(t, events, testkit.Timeout)
		if errors.As(asError(e.Reason), &reset) {
			if e.Directive != actor.RestartDirective || reset.Reason != shell.ResetExited {
				t.Fatalf("decision %v for %v", e.Directive, e.Reason)
			}
			break
		}
	}
	if got := f.bash(a, "echo again"); got != "again\n" {
		t.Fatalf("%q", got)
	}
	if strings.Contains(f.logs.String(), "goroutine ") {
		t.Fatalf("an expected reset was logged with a stack:\n%s", f.logs.String())
	}
}

func asError(v any) error {
	err, _ := v.(error)
	return err
}

// Resets are the protocol working, not failures: however many exits come,
// the shell's restart limit is never reached, the agent is not restarted,
// and its terminals stay.
func TestExpectedResetsNeverReachTheLimit(t *testing.T) {
	f := newFixture(t)
	events := testkit.SupervisorEvents(t, f.system)
	policy := DefaultShellPolicy()
	policy.MaxRestarts, policy.Within = 1, time.Hour
	a := f.spawn("a", &policy)
	if res := f.call(a, "terminal_open", `{}`); res.IsError {
		t.Fatalf("%+v", res)
	}
	for range 5 {
		f.bash(a, "exit")
	}
	if got := f.bash(a, "echo served"); got != "served\n" {
		t.Fatalf("%q", got)
	}
	if res := f.call(a, "terminal_list", `{}`); !strings.Contains(res.Text, "t1:") {
		t.Fatalf("the agent's terminal is gone: %+v", res)
	}
	for {
		select {
		case e := <-events:
			if e.Directive != actor.RestartDirective {
				t.Fatalf("a reset decided %v: %v", e.Directive, e.Reason)
			}
			continue
		default:
		}
		break
	}
}

func TestUnknownToolIsAnErrorListingTheTools(t *testing.T) {
	f := newFixture(t)
	a := f.spawn("a", nil)
	res := f.call(a, "teleport", `{}`)
	if !res.IsError || !strings.Contains(res.Text, `unknown tool "teleport"`) || !strings.Contains(res.Text, "bash") {
		t.Fatalf("%+v", res)
	}
}

func TestInvalidShellPolicyIsRejected(t *testing.T) {
	p := DefaultShellPolicy()
	p.MaxRestarts = -1
	err := Options{ShellPolicy: &p, Config: config.Default()}.Validate()
	if err == nil || !strings.Contains(err.Error(), "MaxRestarts") {
		t.Fatalf("got %v", err)
	}
}
