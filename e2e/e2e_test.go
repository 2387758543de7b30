package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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

// stopTimeout is how long a server may take to stop after SIGTERM, past
// its grace.
const stopTimeout = testkit.Timeout

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
	want, err := pinnedSDK(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := installedSDK(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if errors.Is(err, os.ErrNotExist) {
		missing("e2e: e2e/node_modules is missing: run npm ci --prefix e2e")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		missing("e2e: e2e/node_modules has @modelcontextprotocol/sdk %s, package.json pins %s: run npm ci --prefix e2e", got, want)
	}

	root := filepath.Dir(dir)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("e2e: the module root %s has no go.mod: %v", root, err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "dsh-actors")
	args := []string{"build", "-buildvcs=false", "-o", bin}
	if raceEnabled {
		args = append(args, "-race") // the server runs with the race detector too
	}
	build := exec.Command("go", append(args, "./cmd/dsh-actors")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("e2e: go build ./cmd/dsh-actors: %v\n%s", err, out)
	}
	e := &env{node: node, dir: dir, bin: bin, race: filepath.Join(tmp, "race"), tools: filepath.Join(tmp, "tools.json")}
	// What the server must list: the tools as `dsh-actors tools` prints them.
	tools, err := exec.Command(bin, "tools").Output()
	if err != nil {
		t.Fatalf("e2e: dsh-actors tools: %v", err)
	}
	if err := os.WriteFile(e.tools, tools, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.checkRaces(t) })
	return e
}

func pinnedSDK(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	v := p.Dependencies["@modelcontextprotocol/sdk"]
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		return "", fmt.Errorf("%s: @modelcontextprotocol/sdk must be pinned to an exact version, not %q", path, v)
	}
	return v, nil
}

func installedSDK(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var p struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	return p.Version, nil
}

// checkRaces fails the test with every race report a server wrote.
func (e *env) checkRaces(t *testing.T) {
	files, _ := filepath.Glob(e.race + ".*")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		t.Errorf("e2e: the race detector reported in a dsh-actors server (%s):\n%s", filepath.Base(f), b)
	}
}

// mark gives the subtest a process mark that every process it starts
// inherits, and the environment to start them with (GORACE: race reports go
// to files checkRaces reads, and a server under -race does not sleep a
// second as it exits). At the end of the subtest (after every other cleanup)
// it fails the test if a marked process is still alive, and then kills it,
// so that a failure leaves nothing behind on the machine.
func (e *env) mark(t *testing.T) []string {
	t.Helper()
	var entry string
	// Registered first, so it runs last: after ProcessMark's check.
	t.Cleanup(func() {
		for _, p := range testkit.MarkedProcesses(entry) {
			var pid int
			if _, err := fmt.Sscan(p, &pid); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	entry = testkit.ProcessMark(t)
	return append(os.Environ(), entry, "GORACE=atexit_sleep_ms=0 log_path="+e.race)
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
	token := randomToken(t)
	srv := startHTTP(t, e, environ, token)
	r := e.runNode(t, environ, append([]string{"--http", srv.url, "--token", token}, e.nodeArgs()...)...)
	if len(r.leftRunning) == 0 && r.err == nil {
		t.Error("e2e: the abandoned-session scenario left no command running to check")
	}
	// The abandoned session is still open: its command runs until the
	// server stops.
	if left := testkit.CommandsRunning(r.leftRunning...); len(left) != len(r.leftRunning) {
		t.Errorf("e2e: a command of a session still open was gone before the server stopped: running %v of %v", left, r.leftRunning)
	}
	srv.stop(t)
	gone(t, "the commands of the session the HTTP client abandoned gone after the server stopped", r.leftRunning)
}

// testHTTPSigtermDuringACall: SIGTERM while a bash call of a session is
// still running must stop the server promptly, and the call's processes
// with it.
func testHTTPSigtermDuringACall(t *testing.T, e *env) {
	environ := e.mark(t)
	token := randomToken(t)
	srv := startHTTP(t, e, environ, token)
	r := e.runNode(t, environ, append([]string{"--http", srv.url, "--token", token, "--only", "call-left-in-flight"}, e.nodeArgs()...)...)
	if len(r.leftRunning) == 0 {
		t.Fatal("e2e: the call-left-in-flight scenario left no command running")
	}
	srv.stop(t)
	gone(t, "the command of the call in flight gone after the server stopped", r.leftRunning)
}

func randomToken(t *testing.T) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// httpServer is a `dsh-actors serve --http` the test started.
type httpServer struct {
	url    string
	cmd    *exec.Cmd
	stderr *watcher
	done   chan error // cmd.Wait's result
	once   sync.Once
}

var servingRE = regexp.MustCompile(`dsh-actors: serving MCP at (http://\S+/mcp)\n`)

// startHTTP starts the server on a free loopback port and waits for the
// line that gives its address. t.Cleanup stops it if the test did not.
func startHTTP(t *testing.T, e *env, environ []string, token string) *httpServer {
	t.Helper()
	cmd := exec.Command(e.bin, "serve", "--http", "127.0.0.1:0", "--token", token, "--grace", grace.String())
	cmd.Env = environ
	w := newWatcher(servingRE)
	cmd.Stdout = w
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &httpServer{cmd: cmd, stderr: w, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() { s.stop(t) })
	timer := time.NewTimer(testkit.Timeout)
	defer timer.Stop()
	select {
	case m := <-w.found:
		s.url = m[1]
	case err := <-s.done:
		s.done <- err // for stop
		t.Fatalf("e2e: dsh-actors serve --http exited before serving: %v\n%s", err, w)
	case <-timer.C:
		t.Fatalf("e2e: dsh-actors serve --http printed no address within %v:\n%s", testkit.Timeout, w)
	}
	return s
}

// stop sends SIGTERM and waits for the server to exit; it must exit with
// status 0 within grace and stopTimeout, else it is killed and the test
// fails.
func (s *httpServer) stop(t *testing.T) {
	t.Helper()
	s.once.Do(func() {
		start := time.Now()
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("e2e: SIGTERM to the server: %v", err)
		}
		limit := grace + stopTimeout
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("e2e: dsh-actors serve --http after SIGTERM: %v; its output:\n%s", err, s.stderr)
			}
			t.Logf("the server stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
		case <-timer.C:
			s.cmd.Process.Kill()
			<-s.done
			t.Errorf("e2e: dsh-actors serve --http did not exit within %v of SIGTERM (grace %v; killed); its output:\n%s", limit, grace, s.stderr)
		}
	})
}

// watcher collects a process's output and sends the first match of re on
// found.
type watcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	re    *regexp.Regexp
	found chan []string
	sent  bool
}

func newWatcher(re *regexp.Regexp) *watcher {
	return &watcher{re: re, found: make(chan []string, 1)}
}

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		if m := w.re.FindStringSubmatch(w.buf.String()); m != nil {
			w.sent = true
			w.found <- m
		}
	}
	return len(p), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
