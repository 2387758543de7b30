package mcpserve

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/messages"
)

// Server is a host's tools as an MCP server.
type Server struct {
	*mcp.Server
	h    *host.Host
	log  *slog.Logger
	wg   sync.WaitGroup
	next atomic.Uint64
	// prefix makes the agents' ids unique to this server: a session of a
	// later server must not continue the session log of an earlier one's.
	prefix string
	// agents maps live sessions to their agents' ids.
	agents sync.Map // *mcp.ServerSession -> *session
	// live counts the sessions that initialized and have not ended.
	live atomic.Int64
	// byID maps the ids of live HTTP sessions to their entries.
	byID  sync.Map // string -> *session
	calls drainer
	// answers are the requests whose answers are not written yet.
	answers answers
	// posts are the HTTP POSTs of sessions being served, by their keys
	// (post.go); nextPost makes the keys.
	posts    sync.Map // string -> *post
	nextPost atomic.Uint64
	// detached: when HTTP sessions their clients hold nothing of end
	// (detached.go); set by Handler.
	detached detachedRules
	// withdrawn counts the answers taken back for not reaching their
	// clients.
	withdrawn atomic.Int64
	// answeredHook, for tests, runs as a call answered on a POST returns.
	answeredHook func(tool string, p *post)
}

// Version is what the server says it is.
const Version = "0.1.0"

// New makes the server of h's tools. log gets its warnings; nil discards.
func New(h *host.Host, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{h: h, log: log, prefix: "mcp-" + rand.Text()[:8]}
	s.Server = mcp.NewServer(&mcp.Implementation{Name: "dsh-actors", Version: Version}, &mcp.ServerOptions{
		Instructions: h.Guidance(),
		Capabilities: &mcp.ServerCapabilities{},
	})
	// Every request names its session: the first one starts the watch
	// that stops the session's agent when the session ends.
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			// A client's server/discover may come on a session of its own
			// that ends at once (the Go SDK's client does this before it
			// initializes): not one to count or give an agent.
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok && method != "server/discover" {
				e := s.watch(ss)
				if method == "initialize" && !s.countSession(e) {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf(
						"dsh-actors: %d sessions are open, the limit (mcp.maxSessions); end one, or raise the limit", s.h.Config().MCP.MaxSessions)}
				}
			}
			return next(ctx, method, req)
		}
	})
	for _, t := range h.Tools() {
		name := t.Name
		s.AddTool(&mcp.Tool{Name: name, Description: t.Description, InputSchema: t.InputSchema},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return s.call(ctx, req, name)
			})
	}
	return s
}

// session is what the server keeps of a live MCP session.
type session struct {
	agent string
	once  sync.Once
	// turns groups the session's calls into turns, for the listeners.
	turns sync.Mutex
	turn  uint32
	last  time.Time
	// stopped is closed once the session's agent is stopped, with every
	// process it started.
	stopped chan struct{}
	// counted: the session initialized, and counts against mcp.maxSessions.
	counted atomic.Bool
	// calls are the session's calls in flight: ending the session over
	// HTTP (DELETE) cancels them, since the SDK's close of a session waits
	// for them however long they run.
	calls drainer
	// presence is what the client holds of an HTTP session.
	presence presence
}

// sessionOf is the session's entry, made at its first request.
func (s *Server) sessionOf(ss *mcp.ServerSession) *session {
	if e, ok := s.agents.Load(ss); ok {
		return e.(*session)
	}
	e, _ := s.agents.LoadOrStore(ss, &session{agent: fmt.Sprintf("%s-%d", s.prefix, s.next.Add(1)), stopped: make(chan struct{})})
	return e.(*session)
}

// watch stops the session's agent, and every process it started, when the
// session ends (closed, or timed out).
func (s *Server) watch(ss *mcp.ServerSession) *session {
	e := s.sessionOf(ss)
	e.once.Do(func() {
		e.presence.mu.Lock()
		e.presence.ss = ss
		e.presence.mu.Unlock()
		if id := ss.ID(); id != "" {
			s.byID.Store(id, e)
		}
		s.wg.Go(func() {
			_ = ss.Wait()
			e.presence.stopClock()
			if e.counted.Load() {
				s.h.Metrics().SessionEnded()
				s.live.Add(-1)
			}
			s.agents.Delete(ss)
			if id := ss.ID(); id != "" {
				s.byID.CompareAndDelete(id, e)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.h.StopAgent(ctx, e.agent); err != nil && !errors.Is(err, host.ErrStopped) {
				s.log.Warn("mcpserve: stopping the agent of an ended session", "agent", e.agent, "err", err)
			}
			close(e.stopped)
		})
	})
	return e
}

// countSession counts a session that initializes against mcp.maxSessions;
// false when it is one too many.
func (s *Server) countSession(e *session) bool {
	if !e.counted.CompareAndSwap(false, true) {
		return true // initialized before: the SDK answers that
	}
	if s.live.Add(1) > int64(s.h.Config().MCP.MaxSessions) {
		s.live.Add(-1)
		e.counted.Store(false)
		return false
	}
	s.h.Metrics().SessionStarted()
	return true
}

func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, tool string) (*mcp.CallToolResult, error) {
	ctx, leave, ok := s.calls.enter(ctx)
	if !ok {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
			Text: tool + ": not run: the server is shutting down"}}, IsError: true}, nil
	}
	defer leave()
	e := s.sessionOf(req.Session)
	ctx, leaveSession, ok := e.calls.enter(ctx)
	if !ok {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
			Text: tool + ": not run: the session is ending"}}, IsError: true}, nil
	}
	defer leaveSession()
	// Over HTTP the call is its POST's: the client closing the connection
	// cancels it, and an answer that could not be written is withdrawn.
	var p *post
	if req.Extra != nil {
		p = s.postOf(req.Extra.Header)
	}
	if p != nil {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(p.ctx, func() { cancel(errClientGone) })
		defer stop()
	}
	args := json.RawMessage(req.Params.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	injected := s.beginTurnIfDue(ctx, e)
	var r *messages.ToolResult
	var err error
	if token := req.Params.GetProgressToken(); token != nil {
		r, err = s.h.CallWithProgress(ctx, e.agent, tool, args, s.h.Config().MCP.ProgressInterval(), progressReporter(ctx, req.Session, token))
	} else {
		r, err = s.h.Call(ctx, e.agent, tool, args)
	}
	if cause := context.Cause(ctx); err != nil && (errors.Is(cause, errShuttingDown) || errors.Is(cause, errSessionEnding) ||
		errors.Is(cause, errClientGone) || errors.Is(cause, errDetached)) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{
			Text: tool + ": stopped before it finished: " + cause.Error()}}, IsError: true}, nil
	}
	var limit *limits.Error
	if errors.As(err, &limit) {
		// The session's agent could not start: the model should see why.
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool + ": " + limit.Error()}}, IsError: true}, nil
	}
	if err != nil {
		return nil, err
	}
	if p != nil {
		if s.answeredHook != nil {
			s.answeredHook(tool, p)
		}
		p.answer(e.agent, r.CallId)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}, IsError: r.IsError}
	if injected != "" {
		res.Content = append([]mcp.Content{&mcp.TextContent{Text: injected}}, res.Content...)
	}
	if len(r.Data) > 0 {
		res.Meta = mcp.Meta{DataKey: json.RawMessage(r.Data)}
	}
	return res, nil
}

// DataKey is the key of a tool result's _meta under which a result's
// metadata (exit_code, terminal_id, ready_reason, ...) travels, for
// harnesses. It is not structuredContent: Claude Code and Codex hand the
// model a result's structuredContent instead of its content when it has
// one, and the model must see the output text, which carries the status
// and every notice too.
const DataKey = "dsh-actors/data"

// OpenSessions is how many sessions are open (counted against
// mcp.maxSessions).
func (s *Server) OpenSessions() int { return int(s.live.Load()) }

// Drain refuses tool calls from now on (they are answered with an error
// saying the server is shutting down) and waits until the calls in flight
// are answered. When ctx ends first, it cancels those still running, waits
// up to 5 s more for their answers, and returns ctx's error.
func (s *Server) Drain(ctx context.Context) error {
	err := s.calls.drain(ctx)
	answered, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err != nil {
		s.calls.cancelAll(errShuttingDown)
		_ = s.calls.drain(answered)
	}
	// The handlers have returned; their answers are written after.
	_ = s.answers.wait(answered)
	return err
}

// ServeStdio serves one session on r and w until the client ends it or
// serving ends (then after Drain, so that the answers it let through are
// written: mcp.Server.Run would write nothing more once its context ends).
func (s *Server) ServeStdio(serving context.Context, r io.Reader, w io.Writer) error {
	out := &stdioOut{w: w, a: &s.answers}
	in := newStdioIn(r, out, &s.answers, int(s.h.Config().MCP.MaxRequestBytes))
	// The SDK's own cap on a line is set above the filter's, which
	// answers a longer one itself.
	ss, err := s.Connect(context.Background(), &mcp.IOTransport{Reader: io.NopCloser(in), Writer: out, MaxLineLength: in.maxBytes + 64<<10}, nil)
	if err != nil {
		return fmt.Errorf("mcpserve: %w", err)
	}
	ended := make(chan error, 1)
	go func() { ended <- ss.Wait() }()
	abandoned := errors.New("mcpserve: the client stopped reading the server's output; its session is abandoned")
	select {
	case err = <-ended:
	case <-in.ended:
		// The input is over; the session ends once its answers are
		// written, which a client that stopped reading never lets happen.
		select {
		case err = <-ended:
		case <-time.After(closeWait):
			return abandoned
		}
	case <-serving.Done():
		go ss.Close()
		select {
		case err = <-ended:
		case <-time.After(closeWait):
			return abandoned
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

// Close cancels the calls in flight, ends every session still open and
// waits until their agents are stopped.
//
// A session whose client stopped reading cannot close (its write blocks);
// Close gives up on it after closeWait and says so in the log, and the
// host's Stop then ends its agent.
func (s *Server) Close() {
	s.calls.cancelAll(errShuttingDown)
	s.byID.Range(func(_, e any) bool {
		e.(*session).presence.stopClock()
		return true
	})
	done := make(chan struct{})
	go func() {
		var closing sync.WaitGroup
		for ss := range s.Sessions() {
			closing.Go(func() { _ = ss.Close() })
		}
		closing.Wait()
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
		s.log.Warn("mcpserve: sessions still closing after " + closeWait.String() + " (a client that stopped reading?); left to the host's stop")
	}
}

// closeWait bounds the wait for sessions to close.
const closeWait = 2 * time.Second

// beginTurnIfDue begins a turn of the session's agent when this call is
// its session's first or comes after mcp.turnIdleMs without calls, runs the
// pre-step listeners for its first step, and returns what they injected
// (one text, blank-line separated). A host without listeners does none of
// this. A failure of the session log costs the context, not the call: it is
// logged and the call runs.
func (s *Server) beginTurnIfDue(ctx context.Context, e *session) string {
	if !s.h.HasListeners() {
		return ""
	}
	e.turns.Lock()
	defer e.turns.Unlock()
	now := time.Now()
	due := e.turn == 0 || now.Sub(e.last) >= s.h.Config().MCP.TurnIdle()
	e.last = now
	if !due {
		return ""
	}
	turn, err := s.h.BeginTurn(ctx, e.agent, "[MCP: tool calls after a pause; the client's own messages are not seen here]")
	if err != nil {
		s.log.Warn("mcpserve: beginning a turn for the listeners", "agent", e.agent, "err", err)
		return ""
	}
	e.turn = turn
	prep, err := s.h.PrepareStep(ctx, e.agent, turn, 1)
	if err != nil {
		s.log.Warn("mcpserve: running the pre-step listeners", "agent", e.agent, "err", err)
		return ""
	}
	var texts []string
	for _, rec := range prep.Injected {
		if u := rec.Event.GetUser(); u != nil && u.Text != "" {
			texts = append(texts, u.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}
