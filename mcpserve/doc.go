// Package mcpserve serves a host's tools over the Model Context Protocol
// (the official Go SDK, github.com/modelcontextprotocol/go-sdk): every tool
// with its schema and description, and the terminal guidance as the
// server's instructions. Each MCP session is one agent; when the session
// ends, its agent is stopped and every process it started is gone.
//
// # Goroutines
//
// One per session, started at its first request, that waits for the
// session's end and stops its agent. Close ends the sessions still open and
// waits for them.
package mcpserve
