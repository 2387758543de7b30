package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
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

// The token is the server's: an agent's bash and terminals do not inherit
// $DSH_ACTORS_TOKEN, whether the token came from it or from a file, while
// the server requires the token of every request.
func TestServeKeepsItsTokenFromAgents(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("tok-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token string
		args        []string
	}{
		{"from the environment", "tok-from-env", nil},
		{"from a file, the variable set too", "tok-from-file", []string{"--token-file", file}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(ptyproc.TokenVariable, "tok-from-env")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stderr := &testkit.Buffer{}
			done := make(chan error, 1)
			go func() {
				done <- cmdServe(ctx, append([]string{"--http", "127.0.0.1:0"}, c.args...), nil, io.Discard, stderr)
			}()
			url := address(t, stderr, "MCP")
			if code, _ := get(t, strings.TrimSuffix(url, "/mcp")+"/metrics", ""); code != http.StatusUnauthorized {
				t.Fatalf("a request without the token: %d", code)
			}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{c.token}}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			call := func(tool string, args map[string]any) string {
				t.Helper()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
				if err != nil || res.IsError || len(res.Content) == 0 {
					t.Fatalf("%s: %+v %v", tool, res, err)
				}
				return res.Content[0].(*mcp.TextContent).Text
			}
			const probe = "echo token:${DSH_ACTORS_TOKEN-unset}"
			for what, out := range map[string]string{
				"bash":                 call("bash", map[string]any{"command": probe}),
				"a terminal's command": call("terminal_open", map[string]any{"command": probe}),
				"a terminal's bash": func() string {
					call("terminal_open", map[string]any{})
					return call("terminal_send", map[string]any{"terminal_id": "t2", "text": probe, "keys": []string{"Enter"}})
				}(),
			} {
				if !strings.Contains(out, "token:unset") || strings.Contains(out, "tok-from") {
					t.Errorf("%s sees the server's token:\n%s", what, out)
				}
			}
			cs.Close()
			cancel()
			waitServe(t, done)
		})
	}
}

// --token-file: the token alone, a trailing newline trimmed, in a file
// nobody else may read; not together with --token.
func TestServeTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--token-file", write("world", "tok\n", 0o644)}, "mode 0644"},
		{[]string{"--token-file", write("groupw", "tok\n", 0o620)}, "mode 0620"},
		{[]string{"--token-file", write("empty", "\n", 0o600)}, "is empty"},
		{[]string{"--token-file", write("spaces", "to k\n", 0o600)}, "printable ASCII characters without spaces"},
		{[]string{"--token-file", write("big", strings.Repeat("x", 5000), 0o600)}, "larger than 4096 bytes"},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--token-file", write("ok", "tok\n", 0o600), "--token", "tok"}, "give one of them"},
	} {
		err := cmdServe(context.Background(), append([]string{"--http", "0"}, c.args...), strings.NewReader(""), io.Discard, io.Discard)
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error naming %q", c.args, err, c.want)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o640, 0o400} {
		p := write(fmt.Sprintf("ok%o", mode), "tok\r\n", mode)
		if got, err := readTokenFile(p); got != "tok" || err != nil {
			t.Errorf("mode %04o: %q %v, want tok", mode, got, err)
		}
	}
}
