package mcpserve

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure Handler.
type HTTPOptions struct {
	// Token, when set, is required as "Authorization: Bearer TOKEN" on
	// every request (compared in constant time).
	Token string
	// SessionTimeout ends a session idle this long, and stops its agent; 0
	// means the configuration's mcp.sessionTimeoutMs.
	SessionTimeout time.Duration
	// MaxRequestBytes bounds a request body; 0 means mcp.maxRequestBytes.
	MaxRequestBytes int64
	// DetachedTimeout ends a session its client holds nothing of (no
	// request being served, no stream open, no call in flight) for this
	// long; 0 means mcp.detachedSessionMs, negative never.
	DetachedTimeout time.Duration
	// StreamGrace replaces DetachedTimeout, when shorter, for a session
	// whose client held a stream (the standing GET) until it closed; 0
	// means 30 s.
	StreamGrace time.Duration
}

// Handler serves the MCP streamable HTTP transport (mount it at /mcp).
// Requests from a browser page of another origin are refused (Go's
// http.CrossOriginProtection), as are requests that reach a loopback
// address under another host name (DNS rebinding; the SDK's own check).
// A client that closes a call's connection cancels the call (post.go); a
// session its client holds nothing of ends (detached.go). Call Handler
// once per Server.
func (s *Server) Handler(opts HTTPOptions) http.Handler {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = s.h.Config().MCP.SessionTimeout()
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = s.h.Config().MCP.MaxRequestBytes
	}
	if opts.DetachedTimeout == 0 {
		opts.DetachedTimeout = s.h.Config().MCP.DetachedSession()
	}
	if opts.StreamGrace <= 0 {
		opts.StreamGrace = maxStreamGrace
	}
	s.detached = detachedRules{idle: opts.DetachedTimeout, afterStream: opts.StreamGrace}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.Server }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      opts.SessionTimeout,
		MaxRequestBodyBytes: opts.MaxRequestBytes,
		// The SDK ties a call to its POST only on its stateless path
		// under the 2026-07-28 protocol, which a stateful server like this
		// one refuses: servePost (post.go) does it for every call.
		PropagateRequestCancellation: true,
	})
	return RequireToken(opts.Token, http.NewCrossOriginProtection().Handler(s.answers.countPosts(s.cancelOnDelete(s.boundSessions(s.trackPresence(h))))))
}

// RequireToken refuses requests without "Authorization: Bearer TOKEN"
// (401, compared in constant time); an empty token lets every request
// through.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive (RFC 9110); the token is not.
		scheme, got, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="dsh-actors"`)
			http.Error(w, "dsh-actors: a bearer token is required (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// cancelOnDelete cancels the calls in flight of a session its client ends
// (DELETE with the session's id) before the SDK closes it: the SDK's close
// waits for them, and would keep the DELETE, the agent and its processes
// until they end by themselves.
func (s *Server) cancelOnDelete(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			next.ServeHTTP(w, r)
			return
		}
		e, ok := s.byID.Load(r.Header.Get("Mcp-Session-Id"))
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		e.(*session).calls.cancelAll(errSessionEnding)
		// Their answers go out before the SDK closes the session (it
		// writes nothing more then).
		answered, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		_ = s.answers.waitSession(answered, r.Header.Get("Mcp-Session-Id"))
		cancel()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status >= 400 {
			// The SDK refused to end the session (a bad header): it lives
			// on, and takes calls again.
			e.(*session).calls.reopen()
			return
		}
		// Answered once the agent and its processes are gone: what they
		// held (limits.agents among them) is free when the client hears.
		select {
		case <-e.(*session).stopped:
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
}

// CheckToken says what is wrong with a token, if anything: it is sent in a
// header, so it must be printable ASCII with no space.
func CheckToken(token string) error {
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("the token has %q at byte %d: use printable ASCII characters without spaces", rune(c), i)
		}
	}
	return nil
}

// statusWriter keeps the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// LoopbackHostOnly refuses a request whose Host is not a loopback name or
// address, when the server listens on loopback only: a page of another
// site that a DNS rebinding pointed at 127.0.0.1 reaches it under its own
// name (the SDK checks this for /mcp; this is for the other endpoints).
func LoopbackHostOnly(listening string, next http.Handler) http.Handler {
	if h, _, err := net.SplitHostPort(listening); err != nil || !isLoopback(h) {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			h = r.Host
		}
		if !isLoopback(h) {
			http.Error(w, "dsh-actors: this server answers loopback host names only", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func isLoopback(host string) bool {
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// boundSessions refuses a request that would open a session (a POST with
// no session id) while mcp.maxSessions are open: 503, before the SDK makes
// the session.
func (s *Server) boundSessions(next http.Handler) http.Handler {
	max := int64(s.h.Config().MCP.MaxSessions)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		if s.calls.isDraining() {
			http.Error(w, "dsh-actors: the server is shutting down", http.StatusServiceUnavailable)
			return
		}
		// A first look; sessions opened at once are held to the limit
		// when they initialize (Server.countSession).
		if s.live.Load() >= max {
			w.Header().Set("Retry-After", "10")
			http.Error(w, fmt.Sprintf("dsh-actors: %d sessions are open, the limit (mcp.maxSessions); end one, or raise the limit", max), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}
