package host_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/agent"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

// sessionHost is a host whose session log is the file at path.
func sessionHost(t *testing.T, path string, listeners ...agent.Listener) *host.Host {
	t.Helper()
	return hosttest.Start(t, func(c *config.Config) { c.Session.Path = path }, host.Options{Listeners: listeners})
}

// events describes a log's events in order, one word each.
func events(t *testing.T, path, agentID string) string {
	t.Helper()
	l, err := sessionlog.Open(path, sessionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []string
	err = l.Scan(agentID, 1, func(r sessionlog.Record) error {
		e := r.Event
		w := fmt.Sprintf("%d.%d:", e.Turn, e.Step)
		switch k := e.Kind.(type) {
		case *messages.Event_User:
			w += "user(" + k.User.Text
			if src := k.User.Source; src != nil {
				w += "@" + src.Plugin
			}
			w += ")"
		case *messages.Event_Model:
			w += "model(" + k.Model.Text + ")"
		case *messages.Event_ToolCall:
			w += "call(" + k.ToolCall.Tool + ")"
		case *messages.Event_ToolResult:
			w += "result(" + strings.TrimSpace(k.ToolResult.Text) + ")"
		default:
			w += fmt.Sprintf("%T", k)
		}
		out = append(out, w)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, " ")
}

func bashCall(id, command string) *messages.ToolCall {
	return &messages.ToolCall{CallId: id, Tool: "bash", Arguments: []byte(fmt.Sprintf(`{"command":%q}`, command))}
}

func TestATurnRecordsItsStepsAndTheNextHostContinuesIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	h := sessionHost(t, path)
	ctx := context.Background()
	model := &agent.ScriptedModel{Replies: []*messages.ModelMessage{
		{Text: "let me look", ToolCalls: []*messages.ToolCall{bashCall("m1", "echo hi")}},
		{Text: "done"},
	}}
	res, err := h.RunTurn(ctx, "a", "say hi", model, 5)
	if err != nil {
		t.Fatal(err)
	}
	if res.Turn != 1 || res.Steps != 2 || res.Final.Text != "done" || res.StepLimit {
		t.Fatalf("%+v", res)
	}
	// The second request saw the first one's events (user, model, call, result).
	if len(model.Seen) != 2 || model.Seen[0] != 1 || model.Seen[1] != 4 {
		t.Fatalf("the model was shown %v events", model.Seen)
	}
	// A step limit ends a turn that keeps asking for tools.
	loop := &agent.ScriptedModel{Replies: []*messages.ModelMessage{
		{ToolCalls: []*messages.ToolCall{bashCall("m2", "echo again")}},
		{ToolCalls: []*messages.ToolCall{bashCall("m3", "echo more")}},
	}}
	if res, err := h.RunTurn(ctx, "a", "loop", loop, 1); err != nil || !res.StepLimit || res.Turn != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	if err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	want := "1.1:user(say hi) 1.1:model(let me look) 1.1:call(bash) 1.1:result(hi) 1.2:model(done) " +
		"2.1:user(loop) 2.1:model() 2.1:call(bash) 2.1:result(again)"
	if got := events(t, path, "a"); got != want {
		t.Fatalf("the log:\n%s\nwant:\n%s", got, want)
	}
	// A new host on the same file: agent a's session goes on at turn 3.
	h2 := sessionHost(t, path)
	if turn, err := h2.BeginTurn(ctx, "a", "back"); err != nil || turn != 3 {
		t.Fatalf("turn %d, %v; want 3", turn, err)
	}
	if turn, err := h2.BeginTurn(ctx, "b", "new agent"); err != nil || turn != 1 {
		t.Fatalf("another agent: turn %d, %v; want 1", turn, err)
	}
}

// listener records that it ran, and does what it is told.
type listener struct {
	name   string
	ran    *[]string
	mu     *sync.Mutex
	inject string
	err    error
}

func (l *listener) Name() string { return l.name }

func (l *listener) PreStep(_ context.Context, s *agent.Step) error {
	l.mu.Lock()
	*l.ran = append(*l.ran, fmt.Sprintf("%s@%d.%d", l.name, s.Turn, s.Step))
	l.mu.Unlock()
	if l.inject != "" {
		if _, err := s.Inject(l.inject, &messages.Source{Kind: "plugin", Plugin: l.name}); err != nil {
			return err
		}
	}
	return l.err
}

func TestListenersRunInOrderAndMayCancelOrFailTheStep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	var ran []string
	var mu sync.Mutex
	gate := &listener{name: "gate", ran: &ran, mu: &mu}
	h := sessionHost(t, path,
		&listener{name: "first", ran: &ran, mu: &mu, inject: "context from first"},
		gate,
		&listener{name: "last", ran: &ran, mu: &mu})
	ctx := context.Background()
	prep, err := h.PrepareStep(ctx, "a", 1, 1)
	if err != nil || len(prep.Injected) != 1 || prep.Injected[0].Event.GetUser().GetText() != "context from first" || len(prep.Visible) != 1 {
		t.Fatalf("%+v %v", prep, err)
	}
	gate.err = agent.ErrStepCancelled
	prep, err = h.PrepareStep(ctx, "a", 1, 2)
	if !errors.Is(err, agent.ErrStepCancelled) || len(prep.Injected) != 1 {
		t.Fatalf("a cancelled step: %+v %v", prep, err)
	}
	gate.err = errors.New("broken plugin")
	if _, err = h.PrepareStep(ctx, "a", 1, 3); err == nil || !strings.Contains(err.Error(), "gate") || !strings.Contains(err.Error(), "broken plugin") {
		t.Fatalf("a failed step: %v", err)
	}
	if _, err := h.PrepareStep(ctx, "a", 0, 1); err == nil {
		t.Fatal("turn 0 was accepted")
	}
	mu.Lock()
	got := strings.Join(ran, " ")
	mu.Unlock()
	if got != "first@1.1 gate@1.1 last@1.1 first@1.2 gate@1.2 first@1.3 gate@1.3" {
		t.Fatalf("listeners ran: %s", got)
	}
	// The injections of the cancelled and failed attempts stay: the log is
	// append-only.
	h.Stop(ctx)
	if got := events(t, path, "a"); got != "1.1:user(context from first@first) 1.2:user(context from first@first) 1.3:user(context from first@first)" {
		t.Fatalf("the log: %s", got)
	}
}

func TestInjectAndRecordNeedNoTurn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	h := sessionHost(t, path)
	ctx := context.Background()
	if seq, err := h.Inject(ctx, "a", "note", &messages.Source{Kind: "plugin", Plugin: "p"}); err != nil || seq != 1 {
		t.Fatalf("%d %v", seq, err)
	}
	if seq, err := h.Record(ctx, "a", &messages.Event{Kind: &messages.Event_Model{Model: &messages.ModelMessage{Text: "hello"}}}); err != nil || seq != 2 {
		t.Fatalf("%d %v", seq, err)
	}
	if _, err := h.Record(ctx, "a", &messages.Event{Kind: &messages.Event_Compaction{Compaction: &messages.Compaction{Upto: 9}}}); err == nil {
		t.Fatal("a compaction of events that do not exist was recorded")
	}
}

// panicky is a listener with a bug.
type panicky struct{}

func (panicky) Name() string                               { return "panicky" }
func (panicky) PreStep(context.Context, *agent.Step) error { panic("listener bug") }

func TestAListenerThatPanicsFailsTheStepNotTheHost(t *testing.T) {
	h := sessionHost(t, filepath.Join(t.TempDir(), "sessions.db"), panicky{})
	_, err := h.PrepareStep(context.Background(), "a", 1, 1)
	if err == nil || !strings.Contains(err.Error(), "panicky") || !strings.Contains(err.Error(), "listener bug") {
		t.Fatalf("%v", err)
	}
	if _, err := h.BeginTurn(context.Background(), "a", "still here"); err != nil {
		t.Fatal(err)
	}
}

// blocking holds the session goroutine until released, ignoring its
// context (a badly written plugin).
type blocking struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blocking) Name() string { return "blocking" }
func (b *blocking) PreStep(context.Context, *agent.Step) error {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return nil
}

func TestAStuckListenerHoldsUpNobodyElse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	b := &blocking{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h := sessionHost(t, path, b)
	defer close(b.release) // before the host's Stop, which waits for the goroutine
	go h.PrepareStep(context.Background(), "a", 1, 1)
	<-b.entered
	// A record queued behind the stuck step, withdrawn by its caller:
	// answered as such, and never appended.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := h.Record(ctx, "a", &messages.Event{Kind: &messages.Event_Model{Model: &messages.ModelMessage{Text: "once"}}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a withdrawn record: %v", err)
	}
	// Stopping the stuck agent waits for its goroutine as for its
	// processes, within the caller's context; the host is not held up.
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stopCancel()
	if err := h.StopAgent(stopCtx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stopping the stuck agent: %v, want its context's deadline", err)
	}
	if turn, err := h.BeginTurn(context.Background(), "b", "hello"); err != nil || turn != 1 {
		t.Fatalf("another agent: %d %v", turn, err)
	}
	l, err := sessionlog.Open(path, sessionlog.Options{LockTimeout: 10 * time.Millisecond})
	if err == nil {
		l.Close()
		t.Fatal("the host let go of the log while running")
	}
	if turn, err := h.BeginTurn(context.Background(), "a", "again"); err != nil || turn != 1 {
		t.Fatalf("agent a after its stop: %d %v", turn, err)
	}
}

func TestAFailedOpenOfTheLogIsTriedAgain(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "state")
	os.WriteFile(blocker, []byte("a file where the directory goes"), 0o600)
	h := sessionHost(t, filepath.Join(blocker, "sessions.db"))
	if _, err := h.BeginTurn(context.Background(), "a", "hello"); err == nil {
		t.Fatal("a log under a file opened")
	}
	os.Remove(blocker)
	if turn, err := h.BeginTurn(context.Background(), "a", "hello"); err != nil || turn != 1 {
		t.Fatalf("after the path was fixed: %d %v", turn, err)
	}
}

// recorderEnv makes the test binary a host that records events for many
// agents at once and prints each acknowledged one: the child that
// TestAcknowledgedEventsSurviveKill9OfTheHost kills.
const recorderEnv = "HOST_TEST_RECORDER"

func recorder(path string) int {
	cfg := config.Default()
	cfg.Session.Path = path
	h, err := host.Start(host.Options{Config: &cfg})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for a := range 20 {
		wg.Go(func() {
			id := fmt.Sprint("agent-", a)
			for i := 0; ; i++ {
				text := fmt.Sprintf("a%d-%d", a, i)
				seq, err := h.Record(context.Background(), id, &messages.Event{Kind: &messages.Event_Model{Model: &messages.ModelMessage{Text: text}}})
				mu.Lock()
				if err != nil {
					fmt.Println("error", err)
					os.Exit(1)
				}
				fmt.Printf("%s %d %s\n", id, seq, text)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return 0
}

func TestAcknowledgedEventsSurviveKill9OfTheHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	acked := testkit.KillMidStream(t, recorderEnv+"="+path, 3000)
	l, err := sessionlog.Open(path, sessionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for id, want := range acked {
		got := map[uint64]string{}
		l.Scan(id, 1, func(r sessionlog.Record) error { got[r.Seq] = r.Event.GetModel().GetText(); return nil })
		for seq, text := range want {
			if got[seq] != text {
				t.Fatalf("%s seq %d: acknowledged %q, after kill -9 %q", id, seq, text, got[seq])
			}
		}
	}
}
