// Package mcpserve serves a host's tools over the Model Context Protocol
// (the official Go SDK, github.com/modelcontextprotocol/go-sdk): every tool
// with its schema and description, and the terminal guidance as the
// server's instructions. Each MCP session is one agent; when the session
// ends, its agent is stopped and every process it started is gone.
//
// Transports: ServeStdio (one session on a reader and a writer) and Handler
// (streamable HTTP, many sessions). Around the SDK it adds what a server
// of agents' shells needs and the SDK (v1.8.0) does not do:
//   - a shutdown that loses no answer: Drain refuses new calls, lets those
//     in flight finish until its context ends, cancels the rest, and waits
//     until every answer is written; only then may the sessions close (the
//     SDK writes nothing once a session starts to close);
//   - a session ended by its client (DELETE) stops its calls first, since
//     the SDK's close waits for them however long they run;
//   - over stdio, a filter answers the lines the SDK would end the session
//     for (stdio.go);
//   - over HTTP, a call is its POST's: the client closing the connection
//     cancels it, and an answer that could not be written on it is
//     withdrawn, so that its output comes again (post.go; the SDK ties a
//     call to its POST only under the 2026-07-28 protocol, and drops an
//     answer it cannot write);
//   - over HTTP, a session its client holds nothing of (no request, no
//     stream, no call in flight) ends: after mcp.detachedSessionMs, or 30 s
//     after the stream it held closed (detached.go). Hosts that exit
//     without a DELETE leave nothing running;
//   - bounds: mcp.maxSessions, mcp.maxRequestBytes, a bearer token,
//     loopback-only host names;
//   - the pre-step listeners' context, once per turn, turns being runs of
//     calls between pauses (mcp.turnIdleMs).
//
// # Goroutines
//
// One per session, started at its first request, that waits for the
// session's end and stops its agent. Over HTTP, a timer per session whose
// client holds nothing of it, that closes the session when it fires. ServeStdio runs one that waits for its
// session. Close cancels the calls in flight, ends the sessions still open
// and waits for them, for at most closeWait: a session whose client stopped
// reading cannot close, and is left to the host's stop.
package mcpserve
