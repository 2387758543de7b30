package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// answers knows which requests still wait for their answer to be written.
// The SDK (v1.8.0) refuses every write once a session starts to close,
// answers included, so a shutdown must not close a session before the
// answers of the calls it let finish are out; a tool handler returning is
// not enough, as the answer is written after it.
//
// Over stdio the input filter tells it each request's id and the output
// each answer's; over HTTP it counts the POSTs being served (each is
// answered before its ServeHTTP returns).
type answers struct {
	mu      sync.Mutex
	pending map[string]bool // canonical ids of requests not answered yet
	posts   int
	idle    idleSignal // nothing is pending
	// sessionPosts counts the POSTs being served by session id;
	// sessionIdle are closed when a session's count drops to 0.
	sessionPosts map[string]int
	sessionIdle  map[string]*idleSignal
}

func (a *answers) change(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f()
	if len(a.pending) == 0 && a.posts == 0 {
		a.idle.reached()
	}
}

// wait returns when nothing is pending, or ctx ends.
func (a *answers) wait(ctx context.Context) error {
	a.mu.Lock()
	if len(a.pending) == 0 && a.posts == 0 {
		a.mu.Unlock()
		return nil
	}
	idle := a.idle.waiting()
	a.mu.Unlock()
	return waitIdle(ctx, idle)
}

// request notes a request with canonical id; false when one with that id
// is still unanswered (the SDK would drop the second silently).
func (a *answers) request(id string) (fresh bool) {
	a.change(func() {
		if a.pending[id] {
			return
		}
		if a.pending == nil {
			a.pending = map[string]bool{}
		}
		a.pending[id], fresh = true, true
	})
	return fresh
}

// answered notes the answer of canonical id.
func (a *answers) answered(id string) { a.change(func() { delete(a.pending, id) }) }

// canonicalID is the key of an id the SDK wrote (an integer or a string),
// as canonical has it for the request's.
func canonicalID(raw json.RawMessage) (id string, ok bool) {
	if len(raw) == 0 {
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return "s" + s, true
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return "", false
	}
	return "n" + strconv.FormatInt(n, 10), true
}

// countPosts counts the POSTs being served by next, but a
// subscriptions/listen: it stays open until the client or the server ends
// it, and the SDK answers it when the session closes.
func (a *answers) countPosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || a.isListen(r) {
			next.ServeHTTP(w, r)
			return
		}
		id := r.Header.Get("Mcp-Session-Id")
		a.change(func() {
			a.posts++
			if a.sessionPosts == nil {
				a.sessionPosts = map[string]int{}
			}
			a.sessionPosts[id]++
		})
		defer a.change(func() {
			a.posts--
			if a.sessionPosts[id]--; a.sessionPosts[id] <= 0 {
				delete(a.sessionPosts, id)
				if i, ok := a.sessionIdle[id]; ok {
					i.reached()
					delete(a.sessionIdle, id)
				}
			}
		})
		next.ServeHTTP(w, r)
	})
}

// waitSession returns when no POST of session id is being served (each
// has written its answer), or ctx ends.
func (a *answers) waitSession(ctx context.Context, id string) error {
	a.mu.Lock()
	if a.sessionPosts[id] == 0 {
		a.mu.Unlock()
		return nil
	}
	if a.sessionIdle == nil {
		a.sessionIdle = map[string]*idleSignal{}
	}
	i, ok := a.sessionIdle[id]
	if !ok {
		i = &idleSignal{}
		a.sessionIdle[id] = i
	}
	idle := i.waiting()
	a.mu.Unlock()
	return waitIdle(ctx, idle)
}

// isListen peeks at a POST's body (up to maxPeek bytes; the body is given
// back whole) for a subscriptions/listen request.
func (a *answers) isListen(r *http.Request) bool {
	head, err := io.ReadAll(io.LimitReader(r.Body, maxPeek))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	if err != nil || !bytes.Contains(head, []byte(`"subscriptions/listen"`)) {
		return false
	}
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(head, &m) == nil && m.Method == "subscriptions/listen"
}

// maxPeek: a listen request is small; a larger body is not one.
const maxPeek = 64 << 10
