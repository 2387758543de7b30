package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
)

// A tool call over streamable HTTP is a POST that the SDK (v1.8.0) holds
// open until it writes the answer on it. The SDK gives the tool handler a
// context of the session's, not the POST's (it ties them only under the
// 2026-07-28 protocol, which no host speaks yet), and drops an answer it
// cannot write (with no event store, the released stream refuses it). So
// a client whose own timeout closes the connection would leave its call
// running to the end of its wait_ms, a terminal_open's terminal unknown to
// anyone, and an unwritten answer counted as delivered, its output lost.
//
// servePost ties each call to its POST instead: the POST's context ending
// (the client closed the connection) cancels the call, as the client's
// cancel would; and an answer that was not written on the connection while
// it was open is withdrawn (host.Withdraw), so that what it carried comes
// again in the next result.

// postHeader carries a POST's key to its tool handler, through the
// request's header the SDK hands it (RequestExtra.Header). It is set on
// every POST, over whatever a client sent.
const postHeader = "X-Dsh-Actors-Post"

// errClientGone is why the call of a closed connection is cancelled.
var errClientGone = errors.New("the client closed the connection")

// post is one POST being served.
type post struct {
	ctx context.Context // the request's: ends when the connection closes
	// withdraw takes back an answer that did not go out.
	withdraw func(agent, callID string)

	mu sync.Mutex
	// answered are the calls answered on this POST.
	answered []answeredCall
	// written counts the answers written and flushed while the
	// connection was open; pending those written but not yet flushed.
	written, pending int
	// failed: a write or flush failed, or came after the connection
	// closed.
	failed bool
	// over: the POST has been served; an answer now cannot be written.
	over bool
}

type answeredCall struct{ agent, callID string }

// servePost serves a session's POST, with a post for its calls.
func (s *Server) servePost(w http.ResponseWriter, r *http.Request, e *session, next http.Handler) {
	p := &post{ctx: r.Context(), withdraw: s.withdraw}
	key := strconv.FormatUint(s.nextPost.Add(1), 10)
	r = r.WithContext(r.Context())
	r.Header = r.Header.Clone()
	r.Header.Set(postHeader, key)
	s.posts.Store(key, p)
	defer s.posts.Delete(key)
	next.ServeHTTP(&postWriter{ResponseWriter: w, p: p}, r)
	p.end()
}

// withdraw takes back an answer that did not reach its client.
func (s *Server) withdraw(agent, callID string) {
	s.withdrawn.Add(1)
	s.h.Withdraw(agent, callID)
}

// postOf is the post a tool call came on; nil over stdio.
func (s *Server) postOf(h http.Header) *post {
	if h == nil {
		return nil
	}
	key := h.Get(postHeader)
	if key == "" {
		return nil
	}
	if v, ok := s.posts.Load(key); ok {
		return v.(*post)
	}
	return nil
}

// answer notes a call answered on p; one answered after the POST was
// served is withdrawn at once (it cannot be written).
func (p *post) answer(agent, callID string) {
	p.mu.Lock()
	if !p.over {
		p.answered = append(p.answered, answeredCall{agent, callID})
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.withdraw(agent, callID)
}

// end withdraws the answers of the POST that may not have reached the
// client: all of them unless every write went out while the connection
// was open and there was one for each answer (a batch, 2025-03-26 only,
// whose connection closed midway, gets its delivered answers again too:
// output twice rather than never).
func (p *post) end() {
	p.mu.Lock()
	p.over = true
	var lost []answeredCall
	if p.failed || p.written < len(p.answered) {
		lost = p.answered
	}
	p.answered = nil
	p.mu.Unlock()
	for _, c := range lost {
		p.withdraw(c.agent, c.callID)
	}
}

// postWriter sees the SDK write a POST's answers: each is one SSE event,
// written and then flushed (writeEvent in the SDK's event.go).
type postWriter struct {
	http.ResponseWriter
	p *post
}

func (w *postWriter) Write(b []byte) (int, error) {
	// A connection the client closed may still take a write (the kernel
	// buffers it): its context ended before the write is the sign. (Not
	// after: a client may read the answer and close at once.)
	gone := w.p.ctx.Err() != nil
	n, err := w.ResponseWriter.Write(b)
	answer := isAnswerEvent(b)
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	switch {
	case err != nil || gone:
		w.p.failed = true
	case answer:
		w.p.pending++
	}
	return n, err
}

// FlushError is what http.ResponseController.Flush calls.
func (w *postWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	if err != nil {
		if w.p.pending > 0 {
			w.p.failed = true
		}
	} else {
		w.p.written += w.p.pending
	}
	w.p.pending = 0
	return err
}

func (w *postWriter) Flush() { _ = w.FlushError() }

func (w *postWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// isAnswerEvent tells whether b is an SSE message event carrying a JSON-RPC
// response (a result or an error), not a notification or a request. The
// SDK writes "jsonrpc", "id", then "method" or "result" or "error", so the
// keys up to the first of those three decide.
func isAnswerEvent(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, []byte("event: message\n"))
	if !ok {
		return false
	}
	for {
		line, after, found := bytes.Cut(rest, []byte("\n"))
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			return isResponse(data)
		}
		if !found {
			return false
		}
		rest = after
	}
}

func isResponse(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		switch key {
		case "method":
			return false
		case "result", "error":
			return true
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}
