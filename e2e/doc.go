// Package e2e tests `dsh-actors serve` end to end with an MCP client written
// in another language: the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json and package-lock.json),
// driven by client.mjs under Node.
//
// The Go test builds the dsh-actors binary, then runs the Node client once
// per transport: over stdio the client starts `dsh-actors serve` itself for
// each session; over streamable HTTP the test starts `dsh-actors serve --http
// 127.0.0.1:0 --token T` and gives the client its URL and token. It stops the
// servers it started with SIGTERM, waits for them, and checks that no process
// started under it (found by an environment mark every child inherits)
// survives.
//
// Run `npm ci --prefix e2e` once first. Without e2e/node_modules the test
// fails, saying so; DSH_TEST_SKIP=e2e skips it instead (except when $CI is
// "true"). To run the client by hand:
//
//	go build -o /tmp/dsh-actors ./cmd/dsh-actors
//	node e2e/client.mjs --stdio /tmp/dsh-actors
//	E2E_VERBOSE=1 node e2e/client.mjs --http http://127.0.0.1:PORT/mcp --token T [--only SCENARIO]
package e2e
