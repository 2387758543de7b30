package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// stdioServe runs serve with args on pipes until signal() (what SIGINT or
// SIGTERM does to its context), and connects a client to it. done reports
// serve's end.
func stdioServe(t *testing.T, args ...string) (cs *mcp.ClientSession, signal func(), done <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errc := make(chan error, 1)
	go func() {
		err := cmdServe(ctx, args, inR, outW, testWriter{t})
		outW.Close()
		errc <- err
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); inW.Close() })
	return cs, cancel, errc
}

func waitServe(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("serve did not end after the signal")
	}
}

// httpServe runs serve --http with args until signal(), and connects a
// client to it.
func httpServe(t *testing.T, args ...string) (cs *mcp.ClientSession, signal func(), done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stderr := &testkit.Buffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- cmdServe(ctx, append([]string{"--http", "127.0.0.1:0"}, args...), nil, io.Discard, stderr)
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: address(t, stderr, "MCP")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, cancel, errc
}

// On a signal, a call in flight is let finish and answered; then serve
// ends.
func TestServeLetsACallInFlightFinishOnASignal(t *testing.T) {
	for name, serve := range map[string]func(*testing.T, ...string) (*mcp.ClientSession, func(), <-chan error){
		"stdio": stdioServe, "http": httpServe,
	} {
		t.Run(name, func(t *testing.T) {
			started, waitStarted := testkit.Signal(t)
			gate, open := testkit.Gate(t)
			cs, signal, done := serve(t)
			answer := make(chan string, 1)
			go func() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
					"command": fmt.Sprintf("echo > %s; read l < %s; echo finished-$l", started, gate)}})
				switch {
				case err != nil:
					answer <- "error: " + err.Error()
				case len(res.Content) == 0:
					answer <- "no content"
				default:
					answer <- res.Content[0].(*mcp.TextContent).Text
				}
			}()
			waitStarted()
			signal()
			open("x")
			select {
			case got := <-answer:
				if got != "finished-x\n" {
					t.Fatalf("the call in flight was answered %q", got)
				}
			case <-time.After(testkit.Timeout):
				t.Fatal("the call in flight was not answered")
			}
			waitServe(t, done)
		})
	}
}

// A call still running when the grace ends is cancelled, serve ends, and
// its process is gone.
func TestServeCancelsWhatOutlastsTheGrace(t *testing.T) {
	started, waitStarted := testkit.Signal(t)
	cs, signal, done := stdioServe(t, "--grace", "100ms")
	answered := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{
			"command": fmt.Sprintf("echo > %s; sleep 1000.777", started)}})
		switch {
		case err != nil:
			answered <- "error: " + err.Error()
		case !res.IsError || len(res.Content) == 0:
			answered <- fmt.Sprintf("not an error result: %+v", res)
		default:
			answered <- res.Content[0].(*mcp.TextContent).Text
		}
	}()
	waitStarted()
	signal()
	waitServe(t, done)
	select {
	case got := <-answered:
		if !strings.Contains(got, "stopped before it finished: the server is shutting down") {
			t.Fatalf("the call that outlasted the grace was answered %q", got)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("the client's call was left waiting")
	}
	if left := testkit.CommandsRunning("sleep 1000.777"); len(left) > 0 {
		t.Fatalf("still running after serve ended: %v", left)
	}
}

// In stdio mode, --metrics serves the metrics; the flags are checked.
func TestServeFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "0", "--metrics", "0"}, "--metrics is for stdio mode"},
		{[]string{"--grace", "-1s"}, "--grace -1s"},
		{[]string{"--metrics", "0.0.0.0:9"}, "--metrics"},
		{[]string{"--http", "abc"}, "the port must be a number"},
		{[]string{"--http", "0", "--token", " sp "}, "printable ASCII characters without spaces"},
	} {
		err := cmdServe(context.Background(), c.args, strings.NewReader(""), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// address waits for serve's line saying where it listens.
func address(t *testing.T, stderr *testkit.Buffer, what string) string {
	t.Helper()
	re := regexp.MustCompile(`serving ` + what + ` at (http://\S+)`)
	var url string
	testkit.Eventually(t, "serve says where it listens", func() (bool, string) {
		m := re.FindStringSubmatch(stderr.String())
		if m != nil {
			url = m[1]
		}
		return m != nil, stderr.String()
	})
	return url
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// With --http, /metrics is on the same listener, behind the same token; in
// stdio mode --metrics serves it.
func TestServeMetrics(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stderr := &testkit.Buffer{}
		done := make(chan error, 1)
		go func() {
			done <- cmdServe(ctx, []string{"--http", "127.0.0.1:0", "--token", "tok"}, nil, io.Discard, stderr)
		}()
		mcpURL := address(t, stderr, "MCP")
		metricsURL := strings.TrimSuffix(mcpURL, "/mcp") + "/metrics"
		if code, _ := get(t, metricsURL, ""); code != http.StatusUnauthorized {
			t.Errorf("/metrics without the token: %d", code)
		}
		// Under another host name (a DNS rebinding): refused, token or not.
		req, _ := http.NewRequest("GET", metricsURL, nil)
		req.Host = "evil.example"
		req.Header.Set("Authorization", "Bearer tok")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("/metrics under another host name: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		// The scheme is case-insensitive.
		req, _ = http.NewRequest("GET", metricsURL, nil)
		req.Header.Set("Authorization", "bearer tok")
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
			t.Errorf("/metrics with a lowercase scheme: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL,
			HTTPClient: &http.Client{Transport: bearerTransport{"tok"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}}); err != nil {
			t.Fatal(err)
		}
		code, body := get(t, metricsURL, "tok")
		if code != 200 || !strings.Contains(body, `dsh_actors_tool_calls_total{outcome="ok",tool="bash"} 1`) ||
			!strings.Contains(body, "dsh_actors_mcp_sessions 1") {
			t.Errorf("/metrics: %d\n%s", code, body)
		}
		cs.Close()
		cancel()
		waitServe(t, done)
	})
	t.Run("stdio", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stderr := &testkit.Buffer{}
		inR, inW := io.Pipe()
		defer inW.Close()
		done := make(chan error, 1)
		go func() { done <- cmdServe(ctx, []string{"--metrics", "127.0.0.1:0"}, inR, io.Discard, stderr) }()
		code, body := get(t, address(t, stderr, "metrics"), "")
		if code != 200 || !strings.Contains(body, "dsh_actors_running") {
			t.Errorf("/metrics: %d\n%s", code, body)
		}
		cancel()
		waitServe(t, done)
	})
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Logf("serve: %s", p); return len(p), nil }
