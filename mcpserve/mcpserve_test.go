package mcpserve_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-actors/dsh-actors/actors/agent"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/mcpserve"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// connect opens one MCP session to s, in memory.
func connect(t *testing.T, s *mcpserve.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func text(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func TestToolsOverMCPWithASessionPerAgent(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := mcpserve.New(h, nil)
	defer s.Close()
	a := connect(t, s)
	// Every tool is listed with its schema, and the guidance is the
	// server's instructions.
	tools, err := a.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
		if b, _ := json.Marshal(tl.InputSchema); !strings.Contains(string(b), `"type":"object"`) {
			t.Errorf("%s: schema %s", tl.Name, b)
		}
	}
	for _, want := range []string{"bash", "terminal_open", "terminal_send", "task_kill"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s not listed (%v)", want, names)
		}
	}
	if ins := a.InitializeResult().Instructions; ins != h.Guidance() || ins == "" {
		t.Errorf("instructions %q", ins)
	}
	// bash keeps its state within a session; another session is another
	// agent.
	text(t, a, "bash", map[string]any{"command": "export X=from-a; cd /tmp"})
	if got, _ := text(t, a, "bash", map[string]any{"command": "echo $X $PWD"}); got != "from-a /tmp\n" {
		t.Fatalf("state within a session: %q", got)
	}
	b := connect(t, s)
	if got, _ := text(t, b, "bash", map[string]any{"command": `echo "[$X]"`}); got != "[]\n" {
		t.Fatalf("another session saw a's state: %q", got)
	}
	// Bad arguments and unknown tools are answered, not crashed on.
	if got, isErr := text(t, a, "bash", map[string]any{"command": 5}); !isErr || !strings.Contains(got, "command") {
		t.Fatalf("bad arguments: %q %v", got, isErr)
	}
	if _, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope"}); err == nil {
		t.Fatal("an unknown tool was called")
	}
	// A session that ends stops its agent: its shell is gone.
	pidText, _ := text(t, b, "bash", map[string]any{"command": testkit.ShellPID})
	pid := testkit.HostPID(t, pidText)
	before := len(h.Agents())
	b.Close()
	testkit.Eventually(t, "the ended session's agent stopped", func() (bool, string) {
		n := len(h.Agents())
		return n == before-1, strings.Join(h.Agents(), ",")
	})
	testkit.SessionGone(t, pid)
}

// A session past the host's limit on agents is told so in a tool result
// the model can read, and the session that runs is not disturbed.
func TestASessionPastTheAgentLimitIsToldWhy(t *testing.T) {
	h := hosttest.Start(t, func(c *config.Config) { c.Limits.Agents = 1 }, host.Options{})
	s := mcpserve.New(h, nil)
	defer s.Close()
	a, b := connect(t, s), connect(t, s)
	if got, isErr := text(t, a, "bash", map[string]any{"command": "echo a"}); isErr || got != "a\n" {
		t.Fatalf("first session: %q", got)
	}
	if got, isErr := text(t, b, "bash", map[string]any{"command": "echo b"}); !isErr || !strings.Contains(got, "limits.agents") {
		t.Fatalf("second session past the limit: %q (error %v)", got, isErr)
	}
	if got, isErr := text(t, a, "bash", map[string]any{"command": "echo again"}); isErr || got != "again\n" {
		t.Fatalf("first session after the refusal: %q", got)
	}
	a.Close()
	testkit.Eventually(t, "the second session's agent starts once the first ended", func() (bool, string) {
		got, isErr := text(t, b, "bash", map[string]any{"command": "echo b"})
		return !isErr && got == "b\n", got
	})
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func TestStreamableHTTPWithAToken(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := mcpserve.New(h, nil)
	srv := httptest.NewServer(s.Handler(mcpserve.HTTPOptions{Token: "s3cret"}))
	defer srv.Close()
	defer s.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	// Without the token: refused.
	if _, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil); err == nil {
		t.Fatal("a session without the token was accepted")
	}
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d", resp.StatusCode)
	}
	// With it: a session, bash with state, and the session's end stops the
	// agent.
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: bearer{"s3cret", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	text(t, cs, "bash", map[string]any{"command": "export Y=kept"})
	if got, _ := text(t, cs, "bash", map[string]any{"command": "echo $Y"}); got != "kept\n" {
		t.Fatalf("%q", got)
	}
	if len(h.Agents()) != 1 {
		t.Fatalf("agents %v", h.Agents())
	}
	cs.Close()
	testkit.Eventually(t, "the ended session's agent stopped", func() (bool, string) {
		return len(h.Agents()) == 0, strings.Join(h.Agents(), ",")
	})
}

// Drain refuses new calls, with a text saying why, lets the one in flight
// finish, and returns once it is answered.
func TestDrainRefusesNewCallsAndWaitsForThoseInFlight(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := mcpserve.New(h, nil)
	defer s.Close()
	a, b := connect(t, s), connect(t, s)
	started, waitStarted := testkit.Signal(t)
	gate, open := testkit.Gate(t)
	answer := make(chan string, 1)
	go func() {
		res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": "echo > " + started + "; read l < " + gate + "; echo got-$l"}})
		if err != nil {
			answer <- err.Error()
			return
		}
		answer <- res.Content[0].(*mcp.TextContent).Text
	}()
	waitStarted()
	drained := make(chan error, 1)
	go func() { drained <- s.Drain(hosttest.Context(t)) }()
	testkit.Eventually(t, "a new call is refused while draining", func() (bool, string) {
		got, isErr := text(t, b, "bash", map[string]any{"command": "echo late"})
		return isErr && strings.Contains(got, "shutting down"), got
	})
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) with a call in flight", err)
	default:
	}
	open("x")
	if got := <-answer; got != "got-x\n" {
		t.Fatalf("the call in flight: %q", got)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
}

// turnCounter injects "context for turn N" on the first step of each turn.
type turnCounter struct{}

func (turnCounter) Name() string { return "test" }

func (turnCounter) PreStep(_ context.Context, s *agent.Step) error {
	if s.Step == 1 {
		_, err := s.Inject(fmt.Sprintf("context for turn %d", s.Turn), &messages.Source{Kind: "plugin", Plugin: "test"})
		return err
	}
	return nil
}

// texts are the text blocks of a result.
func texts(t *testing.T, cs *mcp.ClientSession, command string) []string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": command}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range res.Content {
		out = append(out, c.(*mcp.TextContent).Text)
	}
	return out
}

// What the listeners inject reaches the client: with the result of a
// session's first call, and of the first call after a pause; not with the
// calls in between. Each session is its own agent, with its own turns.
func TestListenersContextComesWithTheFirstCallOfATurn(t *testing.T) {
	for _, c := range []struct {
		idleMs int64
		want   [][]string
	}{
		{30000, [][]string{{"context for turn 1", "one\n"}, {"two\n"}, {"three\n"}}},
		{0, [][]string{{"context for turn 1", "one\n"}, {"context for turn 2", "two\n"}, {"context for turn 3", "three\n"}}},
	} {
		t.Run(fmt.Sprint(c.idleMs), func(t *testing.T) {
			log, err := sessionlog.Open(filepath.Join(t.TempDir(), "s.db"), sessionlog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer log.Close()
			h := hosttest.Start(t, func(cfg *config.Config) { cfg.MCP.TurnIdleMs = c.idleMs },
				host.Options{SessionLog: log, Listeners: []agent.Listener{turnCounter{}}})
			s := mcpserve.New(h, nil)
			defer s.Close()
			cs := connect(t, s)
			for i, cmd := range []string{"echo one", "echo two", "echo three"} {
				if got := texts(t, cs, cmd); !slices.Equal(got, c.want[i]) {
					t.Errorf("call %d: %q, want %q", i+1, got, c.want[i])
				}
			}
		})
	}
}

// A client that ends its HTTP session during a call gets its DELETE
// answered at once; the call is cancelled and its process killed.
func TestEndingASessionDuringACallCancelsIt(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	srv, cs := overHTTP(t, mcpserve.New(h, nil))
	started, waitStarted := testkit.Signal(t)
	answer := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": "echo > " + started + "; sleep 4719.5"}})
		switch {
		case err != nil:
			answer <- "error: " + err.Error()
		case !res.IsError || len(res.Content) == 0:
			answer <- fmt.Sprintf("not an error result: %+v", res)
		default:
			answer <- res.Content[0].(*mcp.TextContent).Text
		}
	}()
	waitStarted()
	// As a client ends its session (the Go client's Close waits for its
	// own calls first; other clients do not).
	closed := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				err = fmt.Errorf("DELETE: %s", resp.Status)
			}
		}
		closed <- err
	}()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("ending the session waited for the call")
	}
	// The call is answered, with why it stopped.
	select {
	case got := <-answer:
		if !strings.Contains(got, "stopped before it finished: the client ended the session") {
			t.Errorf("the call the DELETE stopped was answered %q", got)
		}
	case <-time.After(testkit.Timeout):
		t.Error("the call the DELETE stopped was not answered")
	}
	testkit.Eventually(t, "the session's process is gone", func() (bool, string) {
		left := testkit.CommandsRunning("sleep 4719.5")
		return len(left) == 0, strings.Join(left, ", ")
	})
	testkit.Eventually(t, "the session's agent stopped", func() (bool, string) {
		return len(h.Agents()) == 0, strings.Join(h.Agents(), ",")
	})
}

// A DELETE the SDK refuses (a bad protocol version header) ends nothing:
// the session goes on taking calls.
func TestARefusedDeleteEndsNothing(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	srv, cs := overHTTP(t, mcpserve.New(h, nil))
	text(t, cs, "bash", map[string]any{"command": "true"})
	req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("MCP-Protocol-Version", "1999-01-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("a DELETE with a bad protocol version: %s", resp.Status)
	}
	if got, isErr := text(t, cs, "bash", map[string]any{"command": "echo still"}); isErr || got != "still\n" {
		t.Fatalf("after a refused DELETE: %q (error %v)", got, isErr)
	}
}

// Past mcp.maxSessions a new session is refused, with the key named; once
// one ends, a new one opens.
func TestSessionsPastTheLimitAreRefused(t *testing.T) {
	h := hosttest.Start(t, func(c *config.Config) { c.MCP.MaxSessions = 2 }, host.Options{})
	s := mcpserve.New(h, nil)
	srv := httptest.NewServer(s.Handler(mcpserve.HTTPOptions{}))
	defer srv.Close()
	defer s.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	open := func() (*mcp.ClientSession, error) {
		return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1}, nil)
	}
	// Many opened at once cannot all pass.
	var opened atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []*mcp.ClientSession
	for range 12 {
		wg.Go(func() {
			if cs, err := open(); err == nil {
				opened.Add(1)
				mu.Lock()
				all = append(all, cs)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := opened.Load(); n > 2 || n == 0 {
		t.Fatalf("%d of 12 sessions opened at once under mcp.maxSessions 2", n)
	}
	for _, cs := range all {
		cs.Close()
	}
	testkit.Eventually(t, "the sessions opened at once ended", func() (bool, string) {
		return s.OpenSessions() == 0, fmt.Sprint(s.OpenSessions())
	})
	var sessions []*mcp.ClientSession
	for range 2 {
		cs, err := open()
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, cs)
	}
	if cs, err := open(); err == nil {
		cs.Close()
		t.Fatal("a third session opened past mcp.maxSessions 2")
	}

	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "mcp.maxSessions") {
		t.Fatalf("past the limit: %s %s", resp.Status, b)
	}
	sessions[0].Close()
	testkit.Eventually(t, "a session opens once one ended", func() (bool, string) {
		cs, err := open()
		if err != nil {
			return false, err.Error()
		}
		sessions = append(sessions, cs)
		return true, ""
	})
	for _, cs := range sessions[1:] {
		cs.Close()
	}
}

// overHTTP serves s over streamable HTTP and opens one client session to
// it; the test's end closes both, and s.
func overHTTP(t *testing.T, s *mcpserve.Server) (*httptest.Server, *mcp.ClientSession) {
	t.Helper()
	srv := httptest.NewServer(s.Handler(mcpserve.HTTPOptions{}))
	t.Cleanup(srv.Close)
	t.Cleanup(s.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return srv, cs
}

// A DELETE is answered once the session's agent is stopped and every
// process it started is gone, a job deaf to SIGHUP and SIGTERM included:
// when the client hears, nothing of the session is left.
func TestADeleteIsAnsweredOnceTheAgentIsGone(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	srv, a := overHTTP(t, mcpserve.New(h, nil))
	if got, isErr := text(t, a, "bash", map[string]any{"command": "(trap '' HUP TERM INT; exec sleep 4730.5) &"}); isErr {
		t.Fatal(got)
	}
	testkit.Eventually(t, "the job running", func() (bool, string) {
		return len(testkit.CommandsRunning("sleep 4730.5")) == 1, "not yet"
	})
	req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
	req.Header.Set("Mcp-Session-Id", a.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if left := testkit.CommandsRunning("sleep 4730.5"); len(left) > 0 || len(h.Agents()) > 0 {
		t.Fatalf("when the DELETE was answered: processes %v, agents %v", left, h.Agents())
	}
}

// seenByModel is what a host hands its model for a result: Claude Code and
// Codex take JSON of structuredContent whenever a result has one and drop
// content; Gemini CLI and opencode take the text of content.
func seenByModel(res *mcp.CallToolResult) string {
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// Every host shows its model the output, the status and the notices; the
// metadata a harness reads travels in _meta.
func TestEveryHostShowsTheModelTheOutput(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := mcpserve.New(h, nil)
	defer s.Close()
	cs := connect(t, s)
	call := func(tool string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var data map[string]any
		if raw, ok := res.Meta[mcpserve.DataKey]; ok {
			b, _ := json.Marshal(raw)
			if err := json.Unmarshal(b, &data); err != nil {
				t.Fatalf("%s: _meta %s: %v", tool, b, err)
			}
		}
		return res, data
	}
	res, data := call("bash", map[string]any{"command": "export X=1; cd /tmp"})
	if data["exit_code"] != float64(0) {
		t.Errorf("bash: _meta %v", res.Meta)
	}
	res, _ = call("bash", map[string]any{"command": "echo $X $PWD; false"})
	if got := seenByModel(res); got != "1 /tmp\n[exit code: 1]" {
		t.Errorf("bash: the model sees %q", got)
	}
	res, data = call("terminal_open", map[string]any{"command": "python3"})
	id, _ := data["terminal_id"].(string)
	if got := seenByModel(res); id == "" || !strings.Contains(got, ">>> ") || !strings.Contains(got, "terminal "+id) || !strings.Contains(got, "stdin_read") {
		t.Fatalf("terminal_open: the model sees %q (_meta %v)", got, res.Meta)
	}
	// Gemini CLI's wait_for_previous is taken; a misspelt argument is not.
	res, _ = call("terminal_send", map[string]any{"terminal_id": id, "text": "6*7\n", "wait_for_previous": true})
	if got := seenByModel(res); res.IsError || !strings.Contains(got, "42") {
		t.Errorf("terminal_send with wait_for_previous: the model sees %q", got)
	}
	res, _ = call("bash", map[string]any{"command": "touch nothing-ran", "timeoutMs": 5})
	if got := seenByModel(res); !res.IsError || !strings.Contains(got, `did you mean "timeout_ms"`) || !strings.Contains(got, "nothing was run") {
		t.Errorf("a misspelt argument: the model sees %q", got)
	}
	if res, _ = call("bash", map[string]any{"command": "ls nothing-ran"}); res.IsError || !strings.Contains(seenByModel(res), "No such file") {
		t.Errorf("the call with a misspelt argument ran: %q", seenByModel(res))
	}
	res, _ = call("terminal_close", map[string]any{"terminal_id": id})
	if got := seenByModel(res); res.StructuredContent != nil || !strings.Contains(got, id) {
		t.Errorf("terminal_close: the model sees %q", got)
	}
	// Every tool's schema names its properties, an empty set included.
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		var sch map[string]any
		if err := json.Unmarshal(b, &sch); err != nil {
			t.Fatal(err)
		}
		if _, ok := sch["properties"].(map[string]any); !ok {
			t.Errorf("%s: schema without properties: %s", tl.Name, b)
		}
	}
}

// A call whose client gave a progress token is reported while it runs: the
// seconds so far, growing, and the last line it printed.
func TestLongCallsReportProgress(t *testing.T) {
	h := hosttest.Start(t, func(c *config.Config) { c.MCP.ProgressIntervalMs = 100 }, host.Options{})
	s := mcpserve.New(h, nil)
	defer s.Close()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := s.Connect(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params)
			mu.Unlock()
		},
	})
	cs, err := c.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	dir := t.TempDir()
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
		// Each step waits until the test has seen it reported.
		"command": fmt.Sprintf(`for i in 1 2 3; do echo "step-$i"; while [ ! -e %s/seen-$i ]; do sleep 0.01; done; done; echo finished`, dir)}}
	params.SetProgressToken("tok-1")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for i := 1; i <= 3; i++ {
		testkit.Eventually(t, fmt.Sprintf("step-%d reported", i), func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			for _, p := range got {
				if strings.HasSuffix(p.Message, fmt.Sprintf(": step-%d", i)) {
					return true, ""
				}
			}
			return false, fmt.Sprint(len(got), " notifications")
		})
		if err := os.WriteFile(fmt.Sprintf("%s/seen-%d", dir, i), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	res := <-done
	if res == nil || seenByModel(res) != "step-1\nstep-2\nstep-3\nfinished\n" {
		t.Fatalf("result %v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, p := range got {
		if p.ProgressToken != "tok-1" || !strings.HasPrefix(p.Message, "running for ") || i > 0 && p.Progress < got[i-1].Progress {
			t.Errorf("notification %d: %+v", i, p)
		}
	}
}
