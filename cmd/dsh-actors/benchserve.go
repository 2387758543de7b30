package main

import (
	"context"
	"errors"
	"io"
)

// cmdBenchServe measures MCP-over-HTTP sessions next to the Go API.
func cmdBenchServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("bench serve: not built yet")
}
