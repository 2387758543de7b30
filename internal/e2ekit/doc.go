// Package e2ekit holds what the end-to-end suites (e2e, with the TypeScript
// MCP SDK as the client, and e2e/hosts, with real agent hosts) share:
// building the dsh-actors binary (with the race detector when the test runs
// under it) and reading the race reports of the servers it ran, checking the
// npm packages package.json pins against those installed, a process mark
// whose leftovers are killed at the end of the test, a random bearer token,
// and starting `dsh-actors serve --http` on a free loopback port and stopping
// it with SIGTERM.
//
// Every failure message starts with the suite's name ("e2e", "e2e/hosts"),
// which the caller passes.
//
// # Goroutines
//
// [StartHTTP] starts one goroutine, which waits for the server process to
// exit; the server is stopped, and that goroutine ends, by
// [HTTPServer.Stop], which a t.Cleanup registered by StartHTTP calls if the
// test did not. The exec package copies the server's output to the test in
// goroutines of its own, which end with the process. Nothing else here
// starts a goroutine.
package e2ekit
