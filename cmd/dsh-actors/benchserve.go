package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/dsh-actors/dsh-actors/bench"
)

// cmdBenchServe measures MCP-over-HTTP sessions next to the Go API.
func cmdBenchServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := bench.DefaultServeOptions()
	fs := newFlags("bench serve", "[flags]", "Start `dsh-actors serve --http` as a process of its own and measure the bash tool over N MCP sessions at once, next to the same calls through the Go API of an in-process host, with the server's memory at idle and with the sessions live.", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	sessions := fs.Int("sessions", def.Sessions, "MCP sessions (and Go API agents) driven at once, each with a live shell")
	calls := fs.Int("calls", def.CallsPerSession, "calls each session makes, back to back (without --duration)")
	duration := fs.Duration("duration", 0, "run the load for this long instead of a number of calls")
	rate := fs.Float64("rate", 0, "with --duration: calls per second per session, open loop (0: closed loop)")
	iterations := fs.Int("iterations", def.Iterations, "samples of the single-session figure (sequential echo over MCP and through the Go API)")
	configPath := fs.String("config", "", "YAML configuration `file` of the server and of the in-process host (default: built-in defaults)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *duration < 0 || *rate < 0 || (*rate > 0 && *duration == 0) {
		return usageError{fmt.Errorf("bench serve: --duration %v, --rate %g: both must be positive, and --rate needs --duration", *duration, *rate)}
	}
	for name, v := range map[string]int{"sessions": *sessions, "calls": *calls, "iterations": *iterations} {
		if v < 1 {
			return usageError{fmt.Errorf("bench serve: --%s is %d: it must be at least 1", name, v)}
		}
	}
	h, err := startHost(*configPath, stderr)
	if err != nil {
		return err
	}
	rep, err := bench.RunServe(ctx, h, bench.ServeOptions{
		Config: *configPath, Sessions: *sessions, CallsPerSession: *calls,
		Duration: *duration, Rate: *rate, Iterations: *iterations,
	})
	if stopErr := stopHost(h); err == nil {
		err = stopErr
	}
	if rep.ServerPID == 0 { // no server, no figures
		return err
	}
	var werr error
	if *asJSON {
		werr = json.NewEncoder(stdout).Encode(rep)
	} else {
		werr = rep.WriteTable(stdout)
	}
	if err == nil && rep.Errors > 0 {
		err = fmt.Errorf("bench serve: %d calls failed; first: %s", rep.Errors, firstOf(rep.MCP.FirstError, rep.API.FirstError))
	}
	return errors.Join(err, werr)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
