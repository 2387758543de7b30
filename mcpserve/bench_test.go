package mcpserve_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/mcpserve"
)

// The same echo through the Go API, over MCP on streamable HTTP and over
// MCP on a pipe (stdio's transport), server and client in this process:
// what the MCP layers cost on top of the call (go test -bench Echo
// ./mcpserve; dsh-actors bench serve measures it across processes).
func BenchmarkEcho(b *testing.B) {
	args := map[string]any{"command": "echo hi"}
	b.Run("go-api", func(b *testing.B) {
		h := hosttest.Start(b, nil, host.Options{})
		raw, _ := json.Marshal(args)
		ctx := context.Background()
		h.Call(ctx, "a", "bash", raw)
		for b.Loop() {
			if _, err := h.Call(ctx, "a", "bash", raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	call := func(b *testing.B, cs *mcp.ClientSession) {
		ctx := context.Background()
		params := &mcp.CallToolParams{Name: "bash", Arguments: args}
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := cs.CallTool(ctx, params); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("mcp-http", func(b *testing.B) {
		h := hosttest.Start(b, nil, host.Options{})
		s := mcpserve.New(h, nil)
		srv := httptest.NewServer(s.Handler(mcpserve.HTTPOptions{}))
		defer srv.Close()
		defer s.Close()
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		call(b, cs)
	})
	b.Run("mcp-stdio", func(b *testing.B) {
		h := hosttest.Start(b, nil, host.Options{})
		s := mcpserve.New(h, nil)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.ServeStdio(ctx, inR, outW); outW.Close() }()
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
		if err != nil {
			b.Fatal(err)
		}
		call(b, cs)
		cs.Close()
		inW.Close()
		cancel()
		<-done
		s.Close()
	})
}
