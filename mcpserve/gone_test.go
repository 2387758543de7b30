package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// rawClient speaks streamable HTTP with net/http alone, so that a test can
// drop a request's connection (cancel its context) or never end its
// session, as a client that exits does.
type rawClient struct {
	t   *testing.T
	url string
	id  string // the session's
	hc  *http.Client
	seq int
}

// newRawSession serves s over HTTP with opts and opens one session on it,
// initialized.
func newRawSession(t *testing.T, s *Server, opts HTTPOptions) *rawClient {
	t.Helper()
	srv := httptest.NewServer(s.Handler(opts))
	t.Cleanup(srv.Close)
	t.Cleanup(s.Close)
	// Its own transport: the test's end closes its connections.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &rawClient{t: t, url: srv.URL, hc: &http.Client{Transport: tr}}
	resp, err := c.post(context.Background(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	c.id = resp.Header.Get("Mcp-Session-Id")
	if _, err := readAnswer(resp); err != nil || c.id == "" {
		t.Fatalf("initialize: %v (session %q)", err, c.id)
	}
	resp, err = c.post(context.Background(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s", resp.Status)
	}
	return c
}

func (c *rawClient) post(ctx context.Context, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.id != "" {
		req.Header.Set("Mcp-Session-Id", c.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	return c.hc.Do(req)
}

// callBody is a tools/call request.
func (c *rawClient) callBody(tool string, args map[string]any) string {
	c.seq++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.seq, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	return string(b)
}

// call makes a tool call and returns its text and data.
func (c *rawClient) call(tool string, args map[string]any) (string, map[string]any) {
	c.t.Helper()
	text, data, err := c.tryCall(tool, args)
	if err != nil {
		c.t.Fatalf("%s: %v", tool, err)
	}
	return text, data
}

func (c *rawClient) tryCall(tool string, args map[string]any) (string, map[string]any, error) {
	resp, err := c.post(context.Background(), c.callBody(tool, args))
	if err != nil {
		return "", nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return "", nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	a, err := readAnswer(resp)
	if err != nil {
		return "", nil, err
	}
	var res struct {
		Result struct {
			Content []struct{ Text string }
			Meta    map[string]map[string]any `json:"_meta"`
		}
		Error *struct{ Message string }
	}
	if err := json.Unmarshal(a, &res); err != nil {
		return "", nil, err
	}
	if res.Error != nil {
		return "", nil, errors.New(res.Error.Message)
	}
	var text strings.Builder
	for _, c := range res.Result.Content {
		text.WriteString(c.Text)
	}
	return text.String(), res.Result.Meta[DataKey], nil
}

// readAnswer reads the first SSE message of a response.
func readAnswer(resp *http.Response) (json.RawMessage, error) {
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return json.RawMessage(data), nil
		}
	}
	return nil, fmt.Errorf("no answer: %v", sc.Err())
}

// openStream opens the session's standing GET stream, as hosts do; cancel
// closes its connection.
func (c *rawClient) openStream() (closeStream func()) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
		c.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		c.t.Fatalf("GET stream: %s", resp.Status)
	}
	go func() { _, _ = io.Copy(io.Discard, resp.Body) }()
	return func() {
		cancel()
		resp.Body.Close()
	}
}

// inFlight waits until the server serves a call.
func (s *Server) waitCalls(t *testing.T, n int) {
	t.Helper()
	testkit.Eventually(t, "the call in flight", func() (bool, string) {
		s.calls.mu.Lock()
		defer s.calls.mu.Unlock()
		return len(s.calls.inFlight) == n, fmt.Sprint(len(s.calls.inFlight))
	})
}

// A client whose connection closes mid-call (its own timeout, its exit)
// cancels the call: a bash command is stopped at once, and a terminal_send
// waiting for its program lets go of the terminal, instead of holding it
// for the rest of its wait_ms.
func TestADroppedConnectionCancelsTheCall(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := New(h, nil)
	c := newRawSession(t, s, HTTPOptions{})
	n := 100000 + rand.IntN(800000)
	sleep := func(i int) string { return fmt.Sprintf("sleep %d.5", n+i) }
	drop := func(tool string, args map[string]any, cmd string) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			resp, err := c.post(ctx, c.callBody(tool, args))
			if err == nil {
				_, err = readAnswer(resp)
			}
			done <- err
		}()
		testkit.Eventually(t, cmd+" running", func() (bool, string) {
			return len(testkit.CommandsRunning(cmd)) > 0, "not yet"
		})
		start := time.Now()
		cancel()
		if err := <-done; err == nil {
			t.Fatalf("%s: answered after its connection closed", tool)
		}
		// The call is withdrawn: nothing of it is in flight.
		s.waitCalls(t, 0)
		t.Logf("%s: withdrawn %v after the connection closed", tool, time.Since(start))
	}

	drop("bash", map[string]any{"command": sleep(0), "timeout_ms": 600000}, sleep(0))
	testkit.Eventually(t, "the bash command stopped", func() (bool, string) {
		left := testkit.CommandsRunning(sleep(0))
		return len(left) == 0, strings.Join(left, ", ")
	})
	if got, _ := c.call("bash", map[string]any{"command": "echo after"}); !strings.Contains(got, "after") {
		t.Fatalf("bash after a dropped call: %q", got)
	}

	_, data := c.call("terminal_open", map[string]any{})
	id, _ := data["terminal_id"].(string)
	if id == "" {
		t.Fatalf("terminal_open: %v", data)
	}
	drop("terminal_send", map[string]any{"terminal_id": id, "text": sleep(1), "keys": []string{"Enter"}, "wait_ms": 600000}, sleep(1))
	got, data := c.call("terminal_send", map[string]any{"terminal_id": id, "keys": []string{"C-c"}, "wait_ms": 5000})
	if data["busy"] == true || strings.Contains(got, "busy") {
		t.Fatalf("the terminal after a dropped send: %q %v", got, data)
	}
	testkit.Eventually(t, "the program stopped", func() (bool, string) {
		left := testkit.CommandsRunning(sleep(1))
		return len(left) == 0, strings.Join(left, ", ")
	})

	// A terminal_open dropped before its answer leaves no terminal.
	drop("terminal_open", map[string]any{"command": sleep(2)}, sleep(2))
	testkit.Eventually(t, "the dropped open's terminal closed", func() (bool, string) {
		got, _ := c.call("terminal_list", map[string]any{})
		return !strings.Contains(got, sleep(2)) && len(testkit.CommandsRunning(sleep(2))) == 0, got
	})
}

// An answer that could not be written (the connection closed as the call
// finished) is withdrawn: what it carried comes again in the terminal's
// next result.
func TestAnAnswerNotWrittenComesAgain(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := New(h, nil)
	c := newRawSession(t, s, HTTPOptions{})
	_, data := c.call("terminal_open", map[string]any{})
	id, _ := data["terminal_id"].(string)
	if id == "" {
		t.Fatalf("terminal_open: %v", data)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The call is answered; before the SDK writes the answer, the client
	// closes the connection.
	s.answeredHook = func(tool string, p *post) {
		if tool != "terminal_send" {
			return
		}
		cancel()
		select {
		case <-p.ctx.Done():
		case <-time.After(testkit.Timeout):
			t.Error("the POST's context did not end with its connection")
		}
	}
	mark := fmt.Sprintf("mark-%d", rand.IntN(1e9))
	resp, err := c.post(ctx, c.callBody("terminal_send", map[string]any{"terminal_id": id, "text": "echo " + mark, "keys": []string{"Enter"}, "wait_ms": 10000}))
	if err == nil {
		if a, err := readAnswer(resp); err == nil {
			t.Fatalf("the answer reached the client: %s", a)
		}
	}
	s.answeredHook = nil
	testkit.Eventually(t, "the unwritten answer withdrawn", func() (bool, string) {
		return s.withdrawn.Load() == 1, fmt.Sprint(s.withdrawn.Load())
	})
	got, _ := c.call("terminal_read", map[string]any{"terminal_id": id, "wait_ms": 0})
	if !strings.Contains(got, mark) {
		l, _ := c.call("terminal_list", map[string]any{})
		t.Logf("agents %v; list %q", h.Agents(), l)
		t.Fatalf("the next result does not carry the lost answer's output %q: %q", mark, got)
	}
	// An answer written is not withdrawn.
	c.call("terminal_send", map[string]any{"terminal_id": id, "text": "true", "keys": []string{"Enter"}, "wait_ms": 5000})
	if n := s.withdrawn.Load(); n != 1 {
		t.Fatalf("%d answers withdrawn, want 1", n)
	}
}

// startJob starts a job in a terminal of the session's agent, and returns
// its command line.
func startJob(t *testing.T, c *rawClient) string {
	t.Helper()
	cmd := fmt.Sprintf("sleep %d.25", 100000+rand.IntN(800000))
	_, data := c.call("terminal_open", map[string]any{})
	id, _ := data["terminal_id"].(string)
	c.call("terminal_send", map[string]any{"terminal_id": id, "text": cmd, "keys": []string{"Enter"}, "wait_ms": 0})
	testkit.Eventually(t, "the job running", func() (bool, string) {
		return len(testkit.CommandsRunning(cmd)) > 0, "not yet"
	})
	return cmd
}

// sessionEnded waits until the session's agent is stopped with its job,
// and its id is unknown (404: a client initializes a new session).
func sessionEnded(t *testing.T, h *host.Host, c *rawClient, job string) {
	t.Helper()
	testkit.Eventually(t, "the agent stopped and its job gone", func() (bool, string) {
		left := testkit.CommandsRunning(job)
		return len(h.Agents()) == 0 && len(left) == 0, fmt.Sprintf("agents %v, jobs %v", h.Agents(), left)
	})
	if _, _, err := c.tryCall("bash", map[string]any{"command": "true"}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a call on the ended session: %v", err)
	}
}

// A client that never holds a stream and sends nothing more (it exited
// without a DELETE) has its session ended after mcp.detachedSessionMs.
func TestASessionItsClientLeftEnds(t *testing.T) {
	h := hosttest.Start(t, func(c *config.Config) { c.MCP.DetachedSessionMs = 300 }, host.Options{})
	s := New(h, nil)
	c := newRawSession(t, s, HTTPOptions{})
	job := startJob(t, c)
	start := time.Now()
	sessionEnded(t, h, c, job)
	t.Logf("ended %v after its last request", time.Since(start))
}

// A client that held the standing GET stream and closed it (as a host's
// exit does) has its session ended after the stream grace, long before
// the idle timeout.
func TestASessionWhoseStreamClosedEnds(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := New(h, nil)
	c := newRawSession(t, s, HTTPOptions{DetachedTimeout: time.Hour, StreamGrace: 200 * time.Millisecond})
	closeStream := c.openStream()
	job := startJob(t, c)
	start := time.Now()
	closeStream()
	sessionEnded(t, h, c, job)
	t.Logf("ended %v after its stream closed", time.Since(start))
}

// A live client holds its stream between turns: its session lives on past
// the timeouts, and a call in flight keeps a session without one alive.
func TestASessionItsClientHoldsLivesOn(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := New(h, nil)
	const d = 100 * time.Millisecond
	c := newRawSession(t, s, HTTPOptions{DetachedTimeout: d, StreamGrace: d})
	closeStream := c.openStream()
	c.call("bash", map[string]any{"command": "export KEPT=yes"})
	select {
	case <-time.After(10 * d):
	case <-s.agentStopped(t):
		t.Fatal("the session of a client holding its stream ended")
	}
	// Without the stream, a call running past the grace holds the session.
	closeStream()
	if got, _ := c.call("bash", map[string]any{"command": "sleep 0.5; echo $KEPT"}); got != "yes\n" {
		t.Fatalf("the session's shell after a pause: %q", got)
	}
}

// agentStopped is closed when the only session's agent stops.
func (s *Server) agentStopped(t *testing.T) <-chan struct{} {
	t.Helper()
	var ch <-chan struct{}
	s.byID.Range(func(_, e any) bool { ch = e.(*session).stopped; return false })
	if ch == nil {
		t.Fatal("no session")
	}
	return ch
}
