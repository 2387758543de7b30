package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// answers knows which requests still wait for their answer to be written.
// The SDK (v1.8.0) refuses every write once a session starts to close,
// answers included, so a shutdown must not close a session before the
// answers of the calls it let finish are out; a tool handler returning is
// not enough, as the answer is written after it.
//
// Over stdio it reads the requests' ids off the input and the answers' off
// the output; over HTTP it counts the POSTs being served (each is answered
// before its ServeHTTP returns).
type answers struct {
	mu      sync.Mutex
	pending map[string]int // request id -> how many wait (ids may repeat)
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

// envelope is what answers reads of a JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// messages reads the envelopes of one line: a message or a batch.
func envelopes(line []byte) []envelope {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if line[0] == '[' {
		var batch []envelope
		_ = json.Unmarshal(line, &batch)
		return batch
	}
	var e envelope
	if json.Unmarshal(line, &e) != nil {
		return nil
	}
	return []envelope{e}
}

func (e envelope) hasID() bool { return len(e.ID) > 0 && string(e.ID) != "null" }

// requested notes the requests of an input line.
func (a *answers) requested(line []byte) {
	for _, e := range envelopes(line) {
		if e.hasID() && e.Method != "" {
			a.change(func() {
				if a.pending == nil {
					a.pending = map[string]int{}
				}
				a.pending[string(e.ID)]++
			})
		}
	}
}

// answered notes the answers of an output line.
func (a *answers) answered(line []byte) {
	for _, e := range envelopes(line) {
		if e.hasID() && e.Method == "" {
			a.change(func() {
				if n := a.pending[string(e.ID)]; n > 1 {
					a.pending[string(e.ID)] = n - 1
				} else {
					delete(a.pending, string(e.ID))
				}
			})
		}
	}
}

// maxTrackedLine: a longer input line is passed on but not read for its id
// (the SDK refuses such a request anyway).
const maxTrackedLine = 16 << 20

// inputTap passes the input on, and gives each complete line to requested.
type inputTap struct {
	r    io.Reader
	a    *answers
	line []byte
	long bool
}

func (t *inputTap) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	chunk := p[:n]
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			t.add(chunk)
			break
		}
		t.add(chunk[:i])
		if !t.long {
			t.a.requested(t.line)
		}
		t.line, t.long = t.line[:0], false
		chunk = chunk[i+1:]
	}
	return n, err
}

func (t *inputTap) add(b []byte) {
	if t.long || len(t.line)+len(b) > maxTrackedLine {
		t.long, t.line = true, t.line[:0]
		return
	}
	t.line = append(t.line, b...)
}

// outputTap passes the output on and gives what was written to answered
// once it is written (the SDK writes one message, or one batch, a Write).
type outputTap struct {
	w io.Writer
	a *answers
}

func (t outputTap) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err == nil {
		for _, line := range bytes.Split(p, []byte{'\n'}) {
			t.a.answered(line)
		}
	}
	return n, err
}

func (outputTap) Close() error { return nil }

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
