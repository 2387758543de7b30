package config

import (
	"errors"
	"fmt"
	"time"
)

// MCP configures `dsh-actors serve` (the "mcp" section).
type MCP struct {
	// SessionTimeoutMs ends an HTTP session with no request this long (a
	// stream open or not), and stops its agent with every process it
	// started.
	SessionTimeoutMs int64 `yaml:"sessionTimeoutMs"`
	// MaxRequestBytes bounds a request: the body of an HTTP request, a line
	// over stdio (a tool call's arguments with it).
	MaxRequestBytes int64 `yaml:"maxRequestBytes"`
	// TurnIdleMs: MCP has no turns, so a session's calls are grouped into
	// turns by their pauses. A call after this long without one begins a
	// new turn (so does a session's first call); the pre-step listeners
	// (the tmux location) run before it, and what they inject comes back
	// with that call's result.
	TurnIdleMs int64 `yaml:"turnIdleMs"`
	// MaxSessions bounds the HTTP sessions open at once: one that only
	// initialized holds memory until it times out, and has no agent for
	// limits.agents to count.
	MaxSessions int `yaml:"maxSessions"`
	// DetachedSessionMs ends an HTTP session its client holds nothing of
	// for this long: no request being served, no stream open (the standing
	// GET every host holds while it runs) and no call in flight. A host
	// that exits without ending its session (no DELETE) is noticed so. A
	// session whose client held a stream ends sooner: 30 s after it closed
	// (or this, if shorter), as a live client opens it again at once.
	DetachedSessionMs int64 `yaml:"detachedSessionMs"`
	// ProgressIntervalMs: a call whose client gave a progress token gets a
	// progress notification this often while it runs (the time so far and
	// the last line it printed), so that a client that renews its own
	// timeout on progress keeps waiting, and its user sees work going on.
	ProgressIntervalMs int64 `yaml:"progressIntervalMs"`
}

// DefaultMCP: a session idle for 30 minutes ends, one its client holds
// nothing of for 2 minutes too; requests up to 4 MiB; a pause of 30 s
// begins a turn.
func DefaultMCP() MCP {
	return MCP{SessionTimeoutMs: 30 * 60 * 1000, MaxRequestBytes: 4 << 20, TurnIdleMs: 30000, MaxSessions: 4096,
		DetachedSessionMs: 2 * 60 * 1000, ProgressIntervalMs: 5000}
}

// Validate names the key, the value and the rule of each error.
func (m MCP) Validate() error {
	var errs []error
	if m.SessionTimeoutMs < 1000 || m.SessionTimeoutMs > 7*24*3600*1000 {
		errs = append(errs, fmt.Errorf("mcp.sessionTimeoutMs: %d is out of range (must be between 1000 and %d milliseconds)", m.SessionTimeoutMs, int64(7*24*3600*1000)))
	}
	if m.MaxRequestBytes < 4096 || m.MaxRequestBytes > 1<<30 {
		errs = append(errs, fmt.Errorf("mcp.maxRequestBytes: %d is out of range (must be between 4096 and %d bytes)", m.MaxRequestBytes, 1<<30))
	}
	if m.TurnIdleMs < 0 || m.TurnIdleMs > 24*3600*1000 {
		errs = append(errs, fmt.Errorf("mcp.turnIdleMs: %d is out of range (must be between 0, every call a turn, and %d milliseconds)", m.TurnIdleMs, 24*3600*1000))
	}
	if m.MaxSessions < 1 || m.MaxSessions > maxLimit {
		errs = append(errs, fmt.Errorf("mcp.maxSessions: %d is out of range (must be between 1 and %d)", m.MaxSessions, maxLimit))
	}
	if m.DetachedSessionMs < 100 || m.DetachedSessionMs > 7*24*3600*1000 {
		errs = append(errs, fmt.Errorf("mcp.detachedSessionMs: %d is out of range (must be between 100 and %d milliseconds)", m.DetachedSessionMs, int64(7*24*3600*1000)))
	}
	if m.ProgressIntervalMs < 100 || m.ProgressIntervalMs > 3600*1000 {
		errs = append(errs, fmt.Errorf("mcp.progressIntervalMs: %d is out of range (must be between 100 and %d milliseconds)", m.ProgressIntervalMs, 3600*1000))
	}
	return errors.Join(errs...)
}

// ProgressInterval is ProgressIntervalMs as a duration.
func (m MCP) ProgressInterval() time.Duration {
	return time.Duration(m.ProgressIntervalMs) * time.Millisecond
}

// SessionTimeout is SessionTimeoutMs as a duration.
func (m MCP) SessionTimeout() time.Duration {
	return time.Duration(m.SessionTimeoutMs) * time.Millisecond
}

// TurnIdle is TurnIdleMs as a duration.
func (m MCP) TurnIdle() time.Duration { return time.Duration(m.TurnIdleMs) * time.Millisecond }

// DetachedSession is DetachedSessionMs as a duration.
func (m MCP) DetachedSession() time.Duration {
	return time.Duration(m.DetachedSessionMs) * time.Millisecond
}
