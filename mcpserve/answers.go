package mcpserve

import (
	"context"
	"encoding/json"
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
	idle    chan struct{} // closed when nothing is pending
}

func (a *answers) change(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f()
	if len(a.pending) == 0 && a.posts == 0 && a.idle != nil {
		close(a.idle)
		a.idle = nil
	}
}

// wait returns when nothing is pending, or ctx ends.
func (a *answers) wait(ctx context.Context) error {
	a.mu.Lock()
	if len(a.pending) == 0 && a.posts == 0 {
		a.mu.Unlock()
		return nil
	}
	if a.idle == nil {
		a.idle = make(chan struct{})
	}
	idle := a.idle
	a.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// canonicalID is the id as the SDK answers it: a string as JSON decodes it
// (invalid UTF-8 replaced), a number as the integer it truncates to. ok is
// false for an id the SDK cannot take (an object, an array, a boolean) and
// for null or no id.
func canonicalID(raw json.RawMessage) (id string, ok bool) {
	if len(raw) == 0 {
		return "", false
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return "s" + v, true
	case float64:
		return "n" + strconv.FormatInt(int64(v), 10), true
	}
	return "", false
}

// countPosts counts the POSTs being served by next.
func (a *answers) countPosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		a.change(func() { a.posts++ })
		defer a.change(func() { a.posts-- })
		next.ServeHTTP(w, r)
	})
}
