package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// rawStdio serves one stdio session to a test that writes raw lines.
type rawStdio struct {
	t       *testing.T
	s       *Server
	in      *io.PipeWriter
	answers chan map[string]any
	done    chan error
}

func newRawStdio(t *testing.T) *rawStdio {
	h := hosttest.Start(t, func(c *config.Config) { c.MCP.MaxRequestBytes = 4096 }, host.Options{})
	s := New(h, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &rawStdio{t: t, s: s, in: inW, answers: make(chan map[string]any, 100), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		r.done <- s.ServeStdio(ctx, inR, outW)
		outW.Close()
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"unparsable": sc.Text()}
			}
			r.answers <- m
		}
		close(r.answers)
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		s.Close()
	})
	r.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
	if a := r.next(); a["id"] != "init" || a["result"] == nil {
		t.Fatalf("initialize: %v", a)
	}
	r.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return r
}

func (r *rawStdio) send(line string) {
	r.t.Helper()
	if _, err := io.WriteString(r.in, line+"\n"); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawStdio) next() map[string]any {
	r.t.Helper()
	select {
	case a, ok := <-r.answers:
		if !ok {
			r.t.Fatal("the server's output ended")
		}
		return a
	case <-time.After(testkit.Timeout):
		r.t.Fatal("no answer")
	}
	return nil
}

func errorOf(a map[string]any) (code float64, message string) {
	e, _ := a["error"].(map[string]any)
	code, _ = e["code"].(float64)
	message, _ = e["message"].(string)
	return code, message
}

// Over stdio, a line the SDK cannot take is answered with an error that
// says why, and the session goes on (the SDK alone would end it, and the
// server with it).
func TestStdioBadLinesAreAnsweredAndTheSessionGoesOn(t *testing.T) {
	r := newRawStdio(t)
	deep := strings.Repeat("[", 1001) + strings.Repeat("]", 1001)
	for _, c := range []struct {
		line string
		code float64
		want string
	}{
		{"garbage", codeParseError, "not one JSON value"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"`, codeParseError, "not one JSON value"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}`, codeParseError, "not one JSON value"},
		{"\ufeff" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`, codeParseError, "not one JSON value"},
		{"[]", codeInvalidRequest, "a batch"},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, codeInvalidRequest, "a batch: this server takes one message a line"},
		{`[{"jsonrpc":"2.0","method":"notifications/a"},{"jsonrpc":"2.0","method":"notifications/b"}]`, codeInvalidRequest, "a batch"},
		{"null", codeInvalidRequest, "this is null"},
		{"42", codeInvalidRequest, "this is a number"},
		{`"str"`, codeInvalidRequest, "this is a string"},
		{"{}", codeInvalidRequest, `version tag ""`},
		{`{"jsonrpc":"2.0"}`, codeInvalidRequest, "not a JSON-RPC 2.0 message"},
		{`{"id":6,"method":"ping"}`, codeInvalidRequest, `version tag ""`},
		{`{"jsonrpc":"1.0","id":6,"method":"ping"}`, codeInvalidRequest, `version tag "1.0"`},
		{`{"JSONRPC":"2.0","id":1,"method":"ping"}`, codeInvalidRequest, `version tag ""`},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, codeInvalidRequest, "invalid ID type"},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, codeInvalidRequest, "invalid ID type"},
		{`{"jsonrpc":"2.0","id":{},"ID":1,"method":"ping"}`, codeInvalidRequest, "invalid ID type"},
		{`{"jsonrpc":"2.0","id":9,"error":"x"}`, codeInvalidRequest, "not a JSON-RPC 2.0 message"},
		{`{"jsonrpc":"2.0","id":9,"error":{"code":1.5}}`, codeInvalidRequest, "not a JSON-RPC 2.0 message"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, codeInvalidRequest, "must be a string or a whole number"},
		{`{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, codeInvalidRequest, "must be a string or a whole number"},
		{`{"jsonrpc":"2.0","id":1.5,"method":"ping","params":{"a":1,"a":2}}`, codeInvalidRequest, "the id 1.5 must be"},
		{`{"jsonrpc":"2.0","id":"x","id":1.5,"method":"ping"}`, codeInvalidRequest, "the id 1.5 must be"},
		{"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\",\"params\":{\"s\":\"\xff\"}}", codeInvalidRequest, "the id 1.5 must be"},
		{deep, codeParseError, "nests 1001 levels deep"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("x", 5000) + `"}}`, codeInvalidRequest, "more than 4096 bytes (mcp.maxRequestBytes)"},
	} {
		r.send(c.line)
		a := r.next()
		if code, msg := errorOf(a); code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("%.60q: answered %v, want code %v naming %q", c.line, a, c.code, c.want)
		}
		r.send(`{"jsonrpc":"2.0","id":"p","method":"ping"}`)
		if a := r.next(); a["id"] != "p" || a["result"] == nil {
			t.Fatalf("after %.60q the session does not answer a ping: %v", c.line, a)
		}
	}
}

// A request reusing the id of one still in flight is refused, not dropped;
// ids are tracked as the SDK answers them, so none is left pending.
func TestStdioIDs(t *testing.T) {
	r := newRawStdio(t)
	gate, open := testkit.Gate(t)
	started, waitStarted := testkit.Signal(t)
	call := func(id, command string) string {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "tools/call",
			"params": map[string]any{"name": "bash", "arguments": map[string]any{"command": command}}})
		return string(b)
	}
	r.send(call("7", fmt.Sprintf("echo > %s; read l < %s; echo got-$l", started, gate)))
	waitStarted()
	r.send(call("7", "echo second"))
	if code, msg := errorOf(r.next()); code != codeInvalidRequest || !strings.Contains(msg, "id 7 is still in flight") {
		t.Fatalf("a second request with id 7: code %v %q", code, msg)
	}
	open("x")
	if a := r.next(); a["id"] != float64(7) || !strings.Contains(fmt.Sprint(a["result"]), "got-x") {
		t.Fatalf("the first request with id 7: %v", a)
	}
	// Whole numbers however written are answered, as the SDK has them.
	for _, id := range []string{"1e3", "100.0", "-0"} {
		r.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`)
		if a := r.next(); a["result"] == nil {
			t.Errorf("ping with id %s: %v", id, a)
		}
	}
	r.send(`{"jsonrpc":"2.0","id":"\u0061","method":"ping"}`)
	r.next()
	// A subscription stays open by design: no answer is waited for.
	r.send(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`)
	testkit.Eventually(t, "no request is left pending", func() (bool, string) {
		r.s.answers.mu.Lock()
		defer r.s.answers.mu.Unlock()
		return len(r.s.answers.pending) == 0, fmt.Sprint(r.s.answers.pending)
	})
}

// A client that writes its requests and closes its input gets every answer
// (the SDK alone cancels what runs when its input ends, and answers
// nothing more).
func TestStdioAnswersComeBeforeTheEndOfInput(t *testing.T) {
	r := newRawStdio(t)
	r.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo hi"}}}`)
	// The last line without its newline.
	if _, err := io.WriteString(r.in, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); err != nil {
		t.Fatal(err)
	}
	r.in.Close()
	got := map[float64]bool{}
	for range 2 {
		a := r.next()
		id, _ := a["id"].(float64)
		got[id] = a["result"] != nil
	}
	if !got[1] || !got[2] {
		t.Fatalf("answers %v", got)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("serve did not end with its input")
	}
}

// An id may be used again as soon as its answer is read.
func TestStdioAnIDIsFreeOnceAnswered(t *testing.T) {
	r := newRawStdio(t)
	for i := range 500 {
		r.send(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if a := r.next(); a["result"] == nil {
			t.Fatalf("ping %d: %v", i, a)
		}
	}
}

// A client that stops reading the server's output cannot keep the server:
// once its input ends, serving gives up on it.
func TestStdioAClientThatStopsReadingIsLetGo(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	s := New(h, nil)
	defer s.Close()
	inR, inW := io.Pipe()
	_, outW := io.Pipe() // nobody reads it: every write blocks
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), inR, outW) }()
	// initialize's answer is the first write that blocks.
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`+"\n")
	inW.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stopped reading") {
			t.Fatalf("serving ended with %v", err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("a client that stopped reading kept the server")
	}
	outW.Close() // lets the blocked write go, so no goroutine is left
}
