package mcpserve

import (
	"crypto/subtle"
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
}

// Handler serves the MCP streamable HTTP transport (mount it at /mcp).
// Requests from a browser page of another origin are refused (Go's
// http.CrossOriginProtection), as are requests that reach a loopback
// address under another host name (DNS rebinding; the SDK's own check).
func (s *Server) Handler(opts HTTPOptions) http.Handler {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = s.h.Config().MCP.SessionTimeout()
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = s.h.Config().MCP.MaxRequestBytes
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.Server }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      opts.SessionTimeout,
		MaxRequestBodyBytes: opts.MaxRequestBytes,
	})
	return RequireToken(opts.Token, http.NewCrossOriginProtection().Handler(s.answers.countPosts(s.cancelOnDelete(h))))
}

// RequireToken refuses requests without "Authorization: Bearer TOKEN"
// (401, compared in constant time); an empty token lets every request
// through.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
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
		if r.Method == http.MethodDelete {
			if e, ok := s.byID.Load(r.Header.Get("Mcp-Session-Id")); ok {
				e.(*session).calls.cancelAll()
			}
		}
		next.ServeHTTP(w, r)
	})
}
