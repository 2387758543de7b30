package host_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
)

// usage is the host's count of kind.
func usage(h *host.Host, kind string) host.Usage {
	for _, u := range h.Usage() {
		if u.Kind == kind {
			return u
		}
	}
	return host.Usage{}
}

// Each host-wide limit refuses the one past it with an error that names the
// key, and gives room again as soon as one of them has ended.
func TestHostLimits(t *testing.T) {
	h := hosttest.Start(t, func(c *config.Config) {
		c.Limits = config.Limits{Agents: 3, Shells: 1, Terminals: 2, Tasks: 1}
	}, host.Options{})
	ctx := hosttest.Context(t)
	call := func(agent, tool string, args any) (string, bool) {
		t.Helper()
		raw, _ := json.Marshal(args)
		r, err := h.Call(ctx, agent, tool, raw)
		if err != nil {
			t.Fatalf("%s %s: %v", agent, tool, err)
		}
		return r.Text, r.IsError
	}
	refused := func(what, text string, isErr bool, key string) {
		t.Helper()
		if !isErr || !strings.Contains(text, "limits."+key) {
			t.Fatalf("%s: want a refusal naming limits.%s, got %q (error %v)", what, key, text, isErr)
		}
	}

	// Shells: one agent has its shell, the next is refused until it ends.
	if text, isErr := call("a", "bash", map[string]any{"command": "echo a"}); isErr || text != "a\n" {
		t.Fatalf("a's bash: %q", text)
	}
	text, isErr := call("b", "bash", map[string]any{"command": "echo b"})
	refused("b's bash", text, isErr, "shells")
	if u := usage(h, "shells"); u.InUse != 1 || u.Max != 1 || u.Refused != 1 {
		t.Errorf("shells usage %+v", u)
	}

	// Terminals: a's and b's; c's refused; after a closes its own, c's opens.
	for _, agent := range []string{"a", "b"} {
		if text, isErr := call(agent, "terminal_open", map[string]any{}); isErr {
			t.Fatalf("%s's terminal_open: %s", agent, text)
		}
	}
	text, isErr = call("c", "terminal_open", map[string]any{})
	refused("c's terminal_open", text, isErr, "terminals")
	if text, isErr := call("a", "terminal_close", map[string]any{"terminal_id": "t1"}); isErr {
		t.Fatalf("a's terminal_close: %s", text)
	}
	if text, isErr := call("c", "terminal_open", map[string]any{}); isErr {
		t.Fatalf("c's terminal_open right after a's close: %s", text)
	}

	// Tasks: b's one background task; c's is refused.
	text, isErr = call("b", "terminal_send", map[string]any{"terminal_id": "t1", "text": "sleep 1234.5\n", "run_in_background": true})
	if isErr {
		t.Fatalf("b's background send: %s", text)
	}
	text, isErr = call("c", "terminal_send", map[string]any{"terminal_id": "t1", "text": "true\n", "run_in_background": true})
	refused("c's background send", text, isErr, "tasks")
	if u := usage(h, "tasks"); u.InUse != 1 || u.Refused != 1 {
		t.Errorf("tasks usage %+v", u)
	}

	// Agents: a, b and c run; a fourth is refused, with the key named; once
	// one stops, it starts.
	_, err := h.Call(ctx, "d", "bash", json.RawMessage(`{"command":"true"}`))
	if err == nil || !strings.Contains(err.Error(), "limits.agents") {
		t.Fatalf("a fourth agent: want an error naming limits.agents, got %v", err)
	}
	if err := h.StopAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if u := usage(h, "shells"); u.InUse != 0 {
		t.Errorf("after a stopped, shells usage %+v", u)
	}
	text, isErr = call("d", "bash", map[string]any{"command": "echo d"})
	if isErr || text != "d\n" {
		t.Fatalf("d's bash once a stopped: %q", text)
	}
	// Everything an agent held is given back when it stops.
	for _, agent := range []string{"b", "c", "d"} {
		if err := h.StopAgent(ctx, agent); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range h.Usage() {
		if u.InUse != 0 {
			t.Errorf("after every agent stopped: %+v", u)
		}
	}
}
