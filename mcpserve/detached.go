package mcpserve

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over streamable HTTP a session is a header, not a connection: a client
// that exits without a DELETE (Claude Code, Gemini CLI and opencode do)
// leaves its session to the SDK's idle timeout, which counts requests only
// (mcp.sessionTimeoutMs, 30 minutes), with its agent's shell, terminals and
// jobs running. What the transport does tell is whether the client holds
// anything of the session: a request being served, or the standing GET
// stream every such host opens after initializing and keeps for its life
// (a TCP connection closing says nothing more: clients pool them and close
// idle ones within seconds). So a session its client holds nothing of ends
// after a while (mcp.detachedSessionMs), sooner when the client held a
// stream, since a live one opens it again within seconds.

// maxStreamGrace bounds how long a session lives once the stream its client
// held is closed with nothing else open: the TypeScript SDK (Claude Code,
// Gemini CLI, opencode) reconnects its stream after 1 s and again after
// 1.5 s; 30 s leaves a live client room for a slow start.
const maxStreamGrace = 30 * time.Second

// errDetached is why a detached session's calls are refused.
var errDetached = errors.New("the client holds nothing of the session any more")

// presence is what the client holds of one HTTP session. The session's
// mutex guards it.
type presence struct {
	mu sync.Mutex
	// ss is the SDK's session, closed when the client is gone.
	ss *mcp.ServerSession
	// open counts the session's requests being served; streams those of
	// them that are standing GET streams.
	open, streams int
	// heldStream: the client held a stream, and has sent no request since
	// without one open (a client that lost its stream and goes on without
	// one is timed as one that never held any).
	heldStream bool
	timer      *time.Timer
	// ending: the session is being closed; its requests get 404.
	ending bool
}

// detachedRules are the two delays of Server.presence.
type detachedRules struct {
	idle, afterStream time.Duration
}

// enter notes a request of the session; false when the session is ending
// (the request is answered 404, as for a session that is gone).
func (p *presence) enter(stream bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ending {
		return false
	}
	if stream {
		p.streams++
		p.heldStream = true
	} else if p.streams == 0 {
		p.heldStream = false
	}
	p.open++
	if p.timer != nil {
		p.timer.Stop()
	}
	return true
}

// leave notes the end of a request, and starts the clock when it was the
// last one open.
func (s *Server) leave(e *session, stream bool) {
	p := &e.presence
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open--
	if stream {
		p.streams--
	}
	s.armLocked(e)
}

// armLocked starts the session's clock if its client holds nothing of it.
func (s *Server) armLocked(e *session) {
	p := &e.presence
	if p.open > 0 || p.ending || s.detached.idle <= 0 {
		return
	}
	d := s.detached.idle
	if p.heldStream {
		d = min(d, s.detached.afterStream)
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(d, func() { s.detach(e) })
		return
	}
	p.timer.Reset(d)
}

// detach ends a session its client has held nothing of for its delay: the
// SDK closes it, and the session's watch stops its agent with every
// process. A call still in flight (its request closed as it was answered)
// puts it off.
func (s *Server) detach(e *session) {
	p := &e.presence
	p.mu.Lock()
	if p.open > 0 || p.ending || p.ss == nil {
		p.mu.Unlock()
		return
	}
	if e.calls.count() > 0 {
		s.armLocked(e)
		p.mu.Unlock()
		return
	}
	p.ending = true
	p.mu.Unlock()
	e.calls.cancelAll(errDetached)
	_ = p.ss.Close()
}

// stopClock stops the session's clock for good (the server is closing).
func (p *presence) stopClock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ending = true
	if p.timer != nil {
		p.timer.Stop()
	}
}

// trackPresence counts each session's requests being served, and ends the
// sessions their clients hold nothing of (see presence). A request to a
// session that is ending gets 404, which tells a client to initialize a
// new session.
func (s *Server) trackPresence(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		if id == "" {
			next.ServeHTTP(w, r)
			// An initialize: the clock of the session it opened starts
			// now (its client may never come back).
			if v, ok := s.byID.Load(w.Header().Get("Mcp-Session-Id")); ok && r.Method == http.MethodPost {
				e := v.(*session)
				e.presence.mu.Lock()
				s.armLocked(e)
				e.presence.mu.Unlock()
			}
			return
		}
		v, ok := s.byID.Load(id)
		if r.Method == http.MethodDelete {
			next.ServeHTTP(w, r)
			return
		}
		if !ok {
			// Gone (or never was): a session is known here from its
			// initialize until it has ended. The SDK may still hold an
			// ended one a moment longer, and would answer a call on it
			// with 200 and nothing.
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		e := v.(*session)
		stream := r.Method == http.MethodGet
		if !e.presence.enter(stream) {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		defer s.leave(e, stream)
		if r.Method == http.MethodPost {
			s.servePost(w, r, e, next)
			return
		}
		next.ServeHTTP(w, r)
	})
}
