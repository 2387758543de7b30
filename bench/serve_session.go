package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/dsh-actors/dsh-actors/actors/shell"
)

// bearer adds a token to every request.
type bearer struct {
	value string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.value)
	return b.next.RoundTrip(r)
}

// connect opens one MCP session. Retries are off: a broken stream is an
// error, not a reconnection.
func (r *serveRun) connect(ctx context.Context) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	return r.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url, HTTPClient: r.hc, MaxRetries: -1}, nil)
}

// bash calls the bash tool over a session and returns its text.
func (r *serveRun) bash(ctx context.Context, cs *mcp.ClientSession, args json.RawMessage) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: shell.ToolName, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, nil
}

// notFound is a bare HTTP round trip to the server: a GET of a path beside
// the endpoint, which the server's mux answers (404) without MCP.
func (r *serveRun) notFound(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"-bench-floor", nil)
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("bench serve: the HTTP floor: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// ping is an MCP ping over the session.
func (r *serveRun) ping(ctx context.Context, cs *mcp.ClientSession) error {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	if err := cs.Ping(ctx, nil); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// checkMCP counts a call over MCP that failed or returned unexpected text.
// The text of a command that exits with another status than 0 says so, so
// the exact text is the status too.
func checkMCP(errs *errorCount, text string, isErr bool, err error, want string) {
	switch {
	case err != nil:
		errs.add("%v", err)
	case isErr:
		errs.add("tool error %q", text)
	case want != "" && text != want:
		errs.add("got %q, want %q", text, want)
	}
}

// connectAll opens n sessions, a few dozen at a time, and starts each
// one's shell. On error it returns the sessions it opened, for closeAll.
func (r *serveRun) connectAll(ctx context.Context, n int, errs *errorCount) ([]*mcp.ClientSession, error) {
	sessions := make([]*mcp.ClientSession, n)
	var g errgroup.Group
	g.SetLimit(32)
	for i := range sessions {
		g.Go(func() error {
			cs, err := r.connect(ctx)
			if err != nil {
				return fmt.Errorf("bench serve: connecting session %d of %d: %w", i+1, n, err)
			}
			sessions[i] = cs
			text, isErr, err := r.bash(ctx, cs, trueArgs)
			checkMCP(errs, text, isErr, err, "")
			return nil
		})
	}
	return sessions, g.Wait()
}

// closeAll ends the sessions, a few dozen at a time; the server stops their
// agents.
func (r *serveRun) closeAll(sessions []*mcp.ClientSession, errs *errorCount) {
	var g errgroup.Group
	g.SetLimit(32)
	for _, cs := range sessions {
		if cs != nil {
			g.Go(func() error {
				if err := cs.Close(); err != nil {
					errs.add("closing a session: %v", err)
				}
				return nil
			})
		}
	}
	_ = g.Wait()
}
