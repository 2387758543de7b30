package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/limits"
)

// Server is a host's tools as an MCP server.
type Server struct {
	*mcp.Server
	h    *host.Host
	log  *slog.Logger
	wg   sync.WaitGroup
	next atomic.Uint64
	// agents maps live sessions to their agents' ids.
	agents sync.Map // *mcp.ServerSession -> *session
}

// Version is what the server says it is.
const Version = "0.1.0"

// New makes the server of h's tools. log gets its warnings; nil discards.
func New(h *host.Host, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{h: h, log: log}
	s.Server = mcp.NewServer(&mcp.Implementation{Name: "dsh-actors", Version: Version}, &mcp.ServerOptions{
		Instructions: h.Guidance(),
		Capabilities: &mcp.ServerCapabilities{},
	})
	// Every request names its session: the first one starts the watch
	// that stops the session's agent when the session ends.
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				s.watch(ss)
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
}

// sessionOf is the session's entry, made at its first request.
func (s *Server) sessionOf(ss *mcp.ServerSession) *session {
	if e, ok := s.agents.Load(ss); ok {
		return e.(*session)
	}
	e, _ := s.agents.LoadOrStore(ss, &session{agent: fmt.Sprintf("mcp-%d", s.next.Add(1))})
	return e.(*session)
}

func (s *Server) agentOf(ss *mcp.ServerSession) string { return s.sessionOf(ss).agent }

// watch stops the session's agent, and every process it started, when the
// session ends (closed, or timed out).
func (s *Server) watch(ss *mcp.ServerSession) {
	e := s.sessionOf(ss)
	e.once.Do(func() {
		s.wg.Go(func() {
			_ = ss.Wait()
			s.agents.Delete(ss)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.h.StopAgent(ctx, e.agent); err != nil && !errors.Is(err, host.ErrStopped) {
				s.log.Warn("mcpserve: stopping the agent of an ended session", "agent", e.agent, "err", err)
			}
		})
	})
}

func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, tool string) (*mcp.CallToolResult, error) {
	args := json.RawMessage(req.Params.Arguments)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	r, err := s.h.Call(ctx, s.agentOf(req.Session), tool, args)
	var limit *limits.Error
	if errors.As(err, &limit) {
		// The session's agent could not start: the model should see why.
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool + ": " + limit.Error()}}, IsError: true}, nil
	}
	if err != nil {
		return nil, err
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}, IsError: r.IsError}
	if len(r.Data) > 0 {
		res.StructuredContent = json.RawMessage(r.Data)
	}
	return res, nil
}

// Close ends every session still open and waits until their agents are
// stopped.
func (s *Server) Close() {
	for ss := range s.Sessions() {
		_ = ss.Close()
	}
	s.wg.Wait()
}
