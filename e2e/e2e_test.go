package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/e2ekit"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// nodeRunTimeout bounds one run of client.mjs. A healthy run takes a few
// seconds; each scenario has deadlines of its own well under this.
const nodeRunTimeout = 90 * time.Second

// grace is the --grace every server gets: how long calls in flight may
// take to finish after SIGTERM before they are cancelled (10 s by default;
// a short one keeps the test short).
const grace = time.Second

// sdk is the npm package of the client.
const sdk = "@modelcontextprotocol/sdk"

// env is what every subtest shares: the node binary, this directory and the
// dsh-actors binary built for the test.
type env struct {
	node  string // the node executable
	dir   string // e2e/, where client.mjs and node_modules are
	bin   string // the dsh-actors binary
	race  string // GORACE log_path prefix: a race report in any server lands here
	tools string // a file with `dsh-actors tools` output
}

// nodeArgs are the arguments every run of client.mjs gets: the tools to
// expect, and the --grace its stdio servers get.
func (e *env) nodeArgs() []string {
	return []string{"--tools-json", e.tools, "--grace-ms", strconv.FormatInt(grace.Milliseconds(), 10)}
}

// TestTypeScriptClient drives `dsh-actors serve` with the TypeScript MCP
// SDK over stdio and over streamable HTTP (the scenarios are in
// client.mjs).
func TestTypeScriptClient(t *testing.T) {
	e := setup(t)
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		testStdio(t, e)
	})
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		testHTTP(t, e)
	})
	t.Run("http-sigterm-during-a-call", func(t *testing.T) {
		t.Parallel()
		testHTTPSigtermDuringACall(t, e)
	})
}

// setup finds node and the SDK, and builds the binary.
func setup(t *testing.T) *env {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		testkit.Missing(t, "e2e", fmt.Sprintf(format, args...))
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("e2e: node is not installed (the tests need Node 20 or later, and then: run npm ci --prefix e2e)")
	}
	// The SDK installed must be the one package.json pins (npm ci installs
	// the lock file's, which pins the same).
	pinned, err := e2ekit.PinnedVersions(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, ok := pinned[sdk]
	if !ok {
		t.Fatalf("e2e: package.json does not pin %s", sdk)
	}
	got, err := e2ekit.InstalledVersion(filepath.Join(dir, "node_modules", sdk, "package.json"))
	if errors.Is(err, os.ErrNotExist) {
		missing("e2e: e2e/node_modules is missing: run npm ci --prefix e2e")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		missing("e2e: e2e/node_modules has %s %s, package.json pins %s: run npm ci --prefix e2e", sdk, got, want)
	}

	root := filepath.Dir(dir)
	e2ekit.CheckModuleRoot(t, "e2e", root)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "dsh-actors")
	e2ekit.Build(t, "e2e", root, bin)
	e := &env{node: node, dir: dir, bin: bin, race: filepath.Join(tmp, "race"), tools: filepath.Join(tmp, "tools.json")}
	// What the server must list: the tools as `dsh-actors tools` prints them.
	tools, err := exec.Command(bin, "tools").Output()
	if err != nil {
		t.Fatalf("e2e: dsh-actors tools: %v", err)
	}
	if err := os.WriteFile(e.tools, tools, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2ekit.CheckRaces(t, "e2e", e.race) })
	return e
}

// mark gives the subtest a process mark that every process it starts
// inherits (e2ekit.Mark: a marked process still alive at the end of the
// subtest fails it, and is killed), and the environment to start them with
// (e2ekit.GORACE: race reports go to files e2ekit.CheckRaces reads).
func (e *env) mark(t *testing.T) []string {
	t.Helper()
	return append(os.Environ(), e2ekit.Mark(t), e2ekit.GORACE(e.race))
}

// nodeResult is one run of client.mjs.
type nodeResult struct {
	out         string
	err         error
	leftRunning []string // commands a scenario left running on purpose
}

// runNode runs client.mjs with args and returns what it printed. Every
// "FAIL" line is an error of t; on any failure the whole output is shown.
func (e *env) runNode(t *testing.T, environ []string, args ...string) nodeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.node, append([]string{"client.mjs"}, args...)...)
	cmd.Dir = e.dir
	cmd.Env = environ
	cmd.WaitDelay = 5 * time.Second
	var out testkit.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	r := nodeResult{out: out.String(), err: err}
	t.Logf("node client.mjs %s: %v, %v\n%s", redact(args), time.Since(start).Round(time.Millisecond), err, r.out)
	failed := err != nil
	for _, line := range strings.Split(r.out, "\n") {
		if cmdline, ok := strings.CutPrefix(line, "LEFT-RUNNING "); ok {
			r.leftRunning = append(r.leftRunning, cmdline)
		}
		if strings.HasPrefix(line, "FAIL ") {
			t.Error(line)
			failed = true
		}
	}
	if ctx.Err() != nil {
		t.Errorf("e2e: node client.mjs did not finish within %v", nodeRunTimeout)
	}
	if failed && err == nil {
		t.Errorf("e2e: node client.mjs printed FAIL but exited 0")
	}
	if err != nil && !strings.Contains(r.out, "FAIL ") {
		t.Errorf("e2e: node client.mjs: %v (output above)", err)
	}
	return r
}

// redact hides the token in logged arguments.
func redact(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if i > 0 && args[i-1] == "--token" {
			a = "[token]"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// gone fails the test unless none of the command lines is running within
// the deadline.
func gone(t *testing.T, what string, cmdlines []string) {
	t.Helper()
	if len(cmdlines) == 0 {
		return
	}
	testkit.Eventually(t, what, func() (bool, string) {
		left := testkit.CommandsRunning(cmdlines...)
		return len(left) == 0, strings.Join(left, "; ")
	})
}

func testStdio(t *testing.T, e *env) {
	environ := e.mark(t)
	r := e.runNode(t, environ, append([]string{"--stdio", e.bin}, e.nodeArgs()...)...)
	if len(r.leftRunning) == 0 && r.err == nil {
		t.Error("e2e: the abandoned-session scenario left no command running to check")
	}
	// The client exited without closing its last session: the server saw
	// its stdin end, and stopped with its processes.
	gone(t, "the commands of the session the stdio client abandoned gone after it exited", r.leftRunning)
}

func testHTTP(t *testing.T, e *env) {
	environ := e.mark(t)
	token := e2ekit.RandomToken(t)
	srv := e.startHTTP(t, environ, token)
	r := e.runNode(t, environ, append([]string{"--http", srv.URL, "--token", token}, e.nodeArgs()...)...)
	if len(r.leftRunning) == 0 && r.err == nil {
		t.Error("e2e: the abandoned-session scenario left no command running to check")
	}
	// The abandoned session is still open: its command runs until the
	// server stops.
	if left := testkit.CommandsRunning(r.leftRunning...); len(left) != len(r.leftRunning) {
		t.Errorf("e2e: a command of a session still open was gone before the server stopped: running %v of %v", left, r.leftRunning)
	}
	srv.Stop(t)
	gone(t, "the commands of the session the HTTP client abandoned gone after the server stopped", r.leftRunning)
}

// testHTTPSigtermDuringACall: SIGTERM while a bash call of a session is
// still running must stop the server promptly, and the call's processes
// with it.
func testHTTPSigtermDuringACall(t *testing.T, e *env) {
	environ := e.mark(t)
	token := e2ekit.RandomToken(t)
	srv := e.startHTTP(t, environ, token)
	r := e.runNode(t, environ, append([]string{"--http", srv.URL, "--token", token, "--only", "call-left-in-flight"}, e.nodeArgs()...)...)
	if len(r.leftRunning) == 0 {
		t.Fatal("e2e: the call-left-in-flight scenario left no command running")
	}
	srv.Stop(t)
	gone(t, "the command of the call in flight gone after the server stopped", r.leftRunning)
}

// startHTTP starts `dsh-actors serve --http` with the token (e2ekit.StartHTTP).
func (e *env) startHTTP(t *testing.T, environ []string, token string) *e2ekit.HTTPServer {
	t.Helper()
	return e2ekit.StartHTTP(t, e2ekit.HTTPOptions{Suite: "e2e", Bin: e.bin, Env: environ, Token: token, Grace: grace})
}
