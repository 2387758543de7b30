// Package hosts tests `dsh-actors serve` with four coding-agent hosts as
// its MCP clients, the programs people actually point at it: Claude Code
// (@anthropic-ai/claude-code), Codex CLI (@openai/codex), Gemini CLI
// (@google/gemini-cli) and opencode (opencode-ai), at the versions
// package.json pins. The package holds only tests.
//
// No model and no network are involved. Each run gets a scripted model of
// its own: an HTTP server on 127.0.0.1 that speaks the host's model API
// (Anthropic Messages for Claude Code, OpenAI Responses for Codex, OpenAI
// Chat Completions for opencode, Gemini streamGenerateContent for Gemini
// CLI, all streamed as server-sent events). It keeps no state between
// requests: a host sends the whole conversation every time, and the number
// of tool results in it says which call of the script comes next, until the
// script is done and the model answers with text. What it does keep is the
// text of each tool result as the host handed it over, so the test judges
// what a model would have read, after each host's own wrapping (Codex puts
// a "Wall time" line first, Gemini CLI wraps the text in
// <untrusted_context>, Claude Code replaces an empty result with a sentence
// of its own).
//
// # What runs
//
// TestHosts runs every host over both transports, eight subtests, in
// parallel up to go test's -parallel. Over stdio the host starts
// `dsh-actors serve` itself from its configuration; over HTTP the test
// starts `dsh-actors serve --http 127.0.0.1:0 --token T` and the host
// connects with the bearer token. Every host gets a fresh HOME (and XDG
// directories, CODEX_HOME), settings that turn off telemetry and updates,
// and a proxy address where nothing listens for anything that is not on
// loopback; opencode's background install of its plugin package goes to the
// model server, which refuses it. With this setup none of the four opens a
// connection beyond 127.0.0.1 (checked with strace while writing the test:
// see HOSTS_WRAP below).
//
// The script, and what the model must see in the results:
//
//   - bash "export X=1; cd /tmp", then bash "echo $X $PWD": "1 /tmp", the
//     shell kept its state between calls;
//   - bash "false": "[exit code: 1]";
//   - terminal_open python3 (the interpreter's own path): ">>>" and the
//     terminal id; terminal_send of "6*7\n" to that terminal: "42" on a
//     line of its own;
//   - Gemini CLI only: a bash call with "wait_for_previous": true among its
//     arguments (Gemini CLI adds that parameter to every tool and forwards
//     it) runs;
//   - Codex and opencode only, whose per-call limit can be set (Codex
//     tool_timeout_sec, opencode's per-server "timeout"; both 5 s here):
//     bash "sleep 30", whose result must come back at the host's limit,
//     then bash "echo $X $PWD": "1 /tmp" again, the shell kept its state
//     through the cancelled call. Claude Code and Gemini CLI let long calls
//     finish, so they skip this.
//
// After the host exits, nothing the server started for it may be left: over
// stdio, the server and everything under it must be gone within
// testkit.Timeout; over HTTP the server runs on, and the processes of the
// host's session must be gone within 30 s plus testkit.Timeout with the
// server's default configuration: only Codex ends its session (DELETE) at
// exit, and the server ends a session whose client holds nothing of it 30 s
// after its standing stream closed. Processes are found by two environment
// marks (testkit.ProcessMark), one the host inherits and one the server gets
// (through the host's server configuration over stdio); whatever still
// carries either at the end of the test fails it and is killed.
//
// Each check is a subtest of its own (model-saw/STEP, host-finished,
// nothing-left-running), and a failing one prints the whole text the model
// was given.
//
// # Running it
//
// Node 20 or later and npm are needed, then once:
//
//	npm ci --prefix e2e/hosts
//
// (package-lock.json also lists opencode's platform packages for other
// systems, without integrity: the registry this lock was made against does
// not serve them, and npm skips them on linux-x64.) Without
// e2e/hosts/node_modules, or with other versions in it than package.json
// pins, the test fails with a message saying so; DSH_TEST_SKIP=hosts skips
// it instead (except when $CI is "true"). Then:
//
//	go test -race -count=1 ./e2e/hosts/
//	go test -race -count=1 -v -run 'TestHosts/codex/http' ./e2e/hosts/
//
// The test builds the server (with -race under -race). The whole package
// takes about a minute on two cores, most of it opencode's start-up.
//
// Variables for looking closer:
//
//   - HOSTS_LOG=DIR writes, per run (DIR/HOST-TRANSPORT/), every request the
//     host made of its model and the answer, the host's output, and over HTTP
//     an MCP trace (mcp-trace: every request and streamed answer between host
//     and server, through a logging proxy);
//   - HOSTS_DSH_ACTORS=/abs/path uses that server binary instead of building
//     one (over stdio it may be a wrapper script that logs and execs the
//     real server);
//   - HOSTS_WRAP="strace -f -e trace=connect -o /tmp/NAME" runs each host
//     under a command; NAME becomes the host and transport.
//
// # One host by hand
//
// The quickest look is one subtest with its logs:
//
//	HOSTS_LOG=/tmp/hosts go test -count=1 -v -run 'TestHosts/gemini/stdio' ./e2e/hosts/
//	ls /tmp/hosts/gemini-stdio/
//
// To drive a host yourself, against a model of your choice, configure it
// as configs_test.go does, with your server entry. For example Gemini CLI
// over HTTP, after `go build -o /tmp/dsh-actors ./cmd/dsh-actors` and
// `/tmp/dsh-actors serve --http 127.0.0.1:8080 --token T`:
//
//	mkdir -p /tmp/gh/.gemini
//	echo '{"security":{"auth":{"selectedType":"gemini-api-key"}},
//	  "mcpServers":{"dsh-actors":{"httpUrl":"http://127.0.0.1:8080/mcp",
//	  "headers":{"Authorization":"Bearer T"},"trust":true}}}' > /tmp/gh/.gemini/settings.json
//	HOME=/tmp/gh GEMINI_API_KEY=... GEMINI_CLI_TRUST_WORKSPACE=true \
//	  e2e/hosts/node_modules/.bin/gemini --approval-mode yolo -p "run uname -a with the dsh-actors bash tool"
//
// Claude Code takes the same JSON shape in a file given to --mcp-config
// ("type": "http", "url", "headers"; or "command", "args" for stdio),
// Codex a [mcp_servers.dsh-actors] table in $CODEX_HOME/config.toml (url
// and bearer_token_env_var, or command and args), opencode an "mcp" entry
// in opencode.json ("type": "remote" with "url" and "headers", or "type":
// "local" with "command" as a list).
//
// # What the hosts were seen to do
//
// At the versions pinned, with HOSTS_LOG traces and a logging wrapper in
// place of the stdio server:
//
//   - at exit over stdio, Claude Code sends SIGINT, SIGTERM 0.1 s later and
//     SIGKILL 0.4 s after that, without closing the server's stdin first;
//     Codex closes stdin and sends SIGTERM together, then SIGKILL within
//     about 50 ms; opencode closes stdin, then SIGTERM 2 s later and SIGKILL
//     2 s after that; Gemini CLI sends SIGTERM and closes stdin, and nothing
//     more (a server that ignored both would outlive it). Over HTTP only
//     Codex sends DELETE (without waiting for its answer); the others just
//     go;
//   - at its per-call limit Codex drops the call's POST and then sends
//     notifications/cancelled; opencode sends notifications/cancelled and
//     keeps the POST open for the answer. opencode also sends
//     notifications/cancelled after every answer it has received, and,
//     when its first HTTP session has expired during its slow start-up,
//     it initializes a new one on the 404 and carries on;
//   - the stdio server gets the host's environment: all of it from Claude
//     Code (ANTHROPIC_API_KEY included) and opencode, all but the API key
//     from Gemini CLI, and only a few basic variables (HOME, PATH, LANG,
//     SHELL, TERM, ...) from Codex, each plus the configured env.
//
// # Goroutines
//
// Each run starts the model server's accept loop (and, with HOSTS_LOG over
// HTTP, the tracing proxy's), ended by a t.Cleanup that closes the server
// and waits for the loop; os/exec's copying goroutines end with the
// processes they belong to. testkit.Main checks that none is left.
package hosts
