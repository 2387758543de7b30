package mcpserve

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// A subscriptions/listen POST is told apart from the others, and every
// body reaches the SDK whole.
func TestIsListenGivesTheBodyBack(t *testing.T) {
	var a answers
	for _, c := range []struct {
		body string
		want bool
	}{
		{`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{}}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"echo \"subscriptions/listen\""}}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("y", 100<<10) + `"}}`, false},
		{`not json "subscriptions/listen"`, false},
	} {
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader(c.body))
		if got := a.isListen(r); got != c.want {
			t.Errorf("%.60q: %v, want %v", c.body, got, c.want)
		}
		b, err := io.ReadAll(r.Body)
		if err != nil || string(b) != c.body {
			t.Errorf("%.60q: the body given back is %d bytes (%v), want %d", c.body, len(b), err, len(c.body))
		}
	}
}
