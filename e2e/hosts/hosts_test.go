package hosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/e2ekit"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const (
	// hostRunTimeout bounds one run of a host, start-up included (opencode
	// takes 10 to 45 s to start on 2 cores, depending on what else runs).
	hostRunTimeout = 150 * time.Second
	// hostTimeout is the per-call limit given to the hosts that have one
	// (Codex tool_timeout_sec, opencode's per-server timeout); sleepSeconds
	// is how long the call that runs past it would take.
	hostTimeout  = 5 * time.Second
	sleepSeconds = 30
	// abandoned bounds how long the processes of an HTTP session whose
	// host exited without ending it may live, with the server's defaults:
	// the session ends 30 s after the standing stream its host held
	// closed (see the README, "When an HTTP client goes away"). Only Codex
	// ends its session (DELETE) at exit.
	abandoned = 30 * time.Second
	// grace is the --grace of every server.
	grace = time.Second
)

// env is what every run shares.
type env struct {
	dir  string // e2e/hosts, where node_modules is
	bin  string // the dsh-actors binary built for the test
	race string // GORACE log_path prefix of the servers
	log  string // HOSTS_LOG: where the model servers write their exchanges
}

// hostSpec is one agent host: its npm package, its model API, and how it is
// configured and started.
type hostSpec struct {
	name string
	pkg  string // the npm package
	bin  string // its command in node_modules/.bin
	api  dialect
	opts scriptOptions
	// start writes the host's configuration for r and returns its
	// arguments and environment.
	start func(r *run) (args []string, environ []string)
}

var hosts = []hostSpec{
	{name: "claude", pkg: "@anthropic-ai/claude-code", bin: "claude", api: anthropic{}, start: startClaude},
	{name: "codex", pkg: "@openai/codex", bin: "codex", api: responses{}, opts: scriptOptions{hostTimeout: true}, start: startCodex},
	{name: "gemini", pkg: "@google/gemini-cli", bin: "gemini", api: gemini{}, opts: scriptOptions{waitForPrevious: true}, start: startGemini},
	{name: "opencode", pkg: "opencode-ai", bin: "opencode", api: chat{}, opts: scriptOptions{hostTimeout: true}, start: startOpencode},
}

// TestHosts runs every host over both transports against a scripted model,
// and checks what the model was given and what is left running after.
func TestHosts(t *testing.T) {
	e := setup(t)
	for _, h := range hosts {
		for _, transport := range []string{"stdio", "http"} {
			t.Run(h.name+"/"+transport, func(t *testing.T) {
				t.Parallel()
				runHost(t, e, h, transport)
			})
		}
	}
}

// setup checks that the hosts are installed as package.json pins them,
// and builds the server.
func setup(t *testing.T) *env {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		testkit.Missing(t, "hosts", fmt.Sprintf(format, args...))
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing("e2e/hosts: node is not installed (the hosts need Node 20 or later; then run npm ci --prefix e2e/hosts)")
	}
	pinned, err := e2ekit.PinnedVersions(filepath.Join(dir, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		want, ok := pinned[h.pkg]
		if !ok {
			t.Fatalf("e2e/hosts: package.json does not pin %s", h.pkg)
		}
		got, err := e2ekit.InstalledVersion(filepath.Join(dir, "node_modules", h.pkg, "package.json"))
		if errors.Is(err, os.ErrNotExist) {
			missing("e2e/hosts: e2e/hosts/node_modules has no %s: run npm ci --prefix e2e/hosts", h.pkg)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			missing("e2e/hosts: e2e/hosts/node_modules has %s %s, package.json pins %s: run npm ci --prefix e2e/hosts", h.pkg, got, want)
		}
	}

	root := filepath.Dir(filepath.Dir(dir))
	e2ekit.CheckModuleRoot(t, "e2e/hosts", root)
	tmp := t.TempDir()
	bin := os.Getenv("HOSTS_DSH_ACTORS")
	if bin == "" {
		bin = filepath.Join(tmp, "dsh-actors")
		e2ekit.Build(t, "e2e/hosts", root, bin)
	} else if !filepath.IsAbs(bin) {
		t.Fatalf("e2e/hosts: HOSTS_DSH_ACTORS must be an absolute path, not %q", bin)
	}
	e := &env{dir: dir, bin: bin, race: filepath.Join(tmp, "race"), log: os.Getenv("HOSTS_LOG")}
	t.Cleanup(func() { e2ekit.CheckRaces(t, "e2e/hosts", e.race) })
	return e
}

// run is one host over one transport.
type run struct {
	t         *testing.T
	e         *env
	h         hostSpec
	transport string
	home      string // the host's HOME, fresh
	work      string // its working directory, fresh
	model     *model
	prompt    string

	hostMark   string // DSH_TEST_MARK=… of the host and what it starts
	serverMark string // DSH_TEST_MARK=… of the server and what it starts
	// stdio: the server command the host starts, and its environment.
	serverArgs []string
	serverEnv  map[string]string
	// http: the server the test started.
	url, token string
	srv        *e2ekit.HTTPServer

	mu        sync.Mutex
	atTheEnd  []string // the server's processes while the model gave its final answer
	serverPID int      // http
}

func runHost(t *testing.T, e *env, h hostSpec, transport string) {
	tmp := t.TempDir()
	r := &run{t: t, e: e, h: h, transport: transport,
		home: filepath.Join(tmp, "home"), work: filepath.Join(tmp, "work"),
		prompt: "Run the steps of the test script with the dsh-actors tools."}
	for _, d := range []string{r.home, r.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	opts := h.opts
	opts.python3 = testkit.Python3(t)
	opts.sleep, opts.sleepFor = "sleep "+strconv.Itoa(sleepSeconds), sleepSeconds*time.Second
	steps := script(opts)
	logDir := ""
	if e.log != "" {
		logDir = filepath.Join(e.log, h.name+"-"+transport)
	}
	// The marks first: their checks then run after every other cleanup.
	r.hostMark = e2ekit.Mark(t)
	r.serverMark = e2ekit.Mark(t)
	r.model = startModel(t, h.api, steps, logDir, r.lookAtTheEnd)
	serverConfig := filepath.Join(tmp, "dsh-actors.yaml")
	// The defaults, as a user gets them (the session rules under test are
	// those a host meets), but for progress notifications: opencode renews
	// its own time limit at each one (a 30 s call outlived its 5 s limit
	// with the default 5 s interval), and the step past a host's limit is
	// about what happens when that limit ends a call.
	if err := os.WriteFile(serverConfig, []byte("mcp:\n  progressIntervalMs: 3600000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serverEnv := []string{r.serverMark, e2ekit.GORACE(e.race)}
	if transport == "stdio" {
		r.serverArgs = []string{"serve", "--config", serverConfig, "--grace", grace.String()}
		r.serverEnv = map[string]string{}
		for _, kv := range serverEnv {
			k, v, _ := strings.Cut(kv, "=")
			r.serverEnv[k] = v
		}
	} else {
		r.token = e2ekit.RandomToken(t)
		r.srv = e2ekit.StartHTTP(t, e2ekit.HTTPOptions{Suite: "e2e/hosts", Bin: e.bin,
			Env: append(os.Environ(), serverEnv...), Dir: tmp, Config: serverConfig, Token: r.token, Grace: grace})
		r.url = r.srv.URL
		if logDir != "" {
			r.url = startTracer(t, r.srv.URL, filepath.Join(logDir, "mcp-trace"))
		}
		r.serverPID = r.srv.PID()
	}

	args, environ := h.start(r)
	res := r.runHostCommand(args, environ)

	// What the model saw, step by step.
	o := r.model.outcome()
	seen := o.seen
	for i, s := range steps {
		t.Run("model-saw/"+s.name, func(t *testing.T) {
			if i >= len(seen) {
				t.Errorf("%s %s: the host never gave the model the result of step %d (%s %s); the model saw %d result(s)",
					h.name, transport, i+1, s.tool, showArgs(s, seen), len(seen))
				return
			}
			for _, c := range s.checks {
				if !c.ok(seen[i]) {
					t.Errorf("%s %s, step %d (%s %s), %s: the model should see %s; it saw:\n%s",
						h.name, transport, i+1, s.tool, showArgs(s, seen), c.name, c.want, indent(seen[i]))
				}
			}
			if s.within > 0 && o.took[i] > s.within {
				t.Errorf("%s %s, step %d (%s %s): the result came %v after the call, not within %v: the host's own time limit did not end the call; the model saw:\n%s",
					h.name, transport, i+1, s.tool, showArgs(s, seen), o.took[i].Round(time.Millisecond), s.within, indent(seen[i]))
			}
			if !t.Failed() { // a failure has shown the text already
				t.Logf("step %d (%s %s), %v after the call, the model saw:\n%s", i+1, s.tool, showArgs(s, seen), o.took[i].Round(time.Millisecond), indent(seen[i]))
			}
		})
	}
	t.Run("host-finished", func(t *testing.T) {
		if res.err != nil {
			t.Errorf("%s %s: the host: %v; its output:\n%s", h.name, transport, res.err, indent(tail(res.out, 6000)))
		}
		if !o.final {
			t.Errorf("%s %s: the model never gave its final answer (the script did not finish)", h.name, transport)
		}
		for _, p := range o.problems {
			t.Errorf("%s %s: the model: %s", h.name, transport, p)
		}
		for _, s := range o.resends {
			t.Logf("%s %s: the host changed a result it had already sent: %s", h.name, transport, s)
		}
	})
	t.Run("nothing-left-running", func(t *testing.T) {
		r.checkLeftovers(t)
	})
}

func showArgs(s step, seen []string) string {
	b, _ := json.Marshal(s.args(seen))
	return string(b)
}

func indent(s string) string {
	if s == "" {
		return "    (empty)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[…]" + s[len(s)-n:]
}

// lookAtTheEnd records the server's processes as the model gives its
// final answer: the host is still running then, and so is its session.
func (r *run) lookAtTheEnd() {
	procs := testkit.MarkedProcesses(r.serverMark)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.atTheEnd = procs
}

// checkLeftovers: once the host has exited, whatever the server started
// for it must be gone. Over stdio that is the server itself and all under
// it; over HTTP the server runs on, and the session's processes must go
// when the session ends (at the host's DELETE, or once the host holds nothing
// of it: abandoned).
func (r *run) checkLeftovers(t *testing.T) {
	r.mu.Lock()
	atTheEnd := r.atTheEnd
	r.mu.Unlock()
	if len(atTheEnd) == 0 {
		t.Errorf("%s %s: no process of the server's was running when the model gave its final answer: the check below would prove nothing", r.h.name, r.transport)
	} else {
		t.Logf("the server's processes at the model's final answer: %s", strings.Join(atTheEnd, "; "))
	}
	bound := testkit.Timeout
	if r.transport == "http" {
		bound += abandoned
	}
	start := time.Now()
	left := waitFor(bound, func() []string {
		var left []string
		for _, p := range testkit.MarkedProcesses(r.serverMark) {
			if pid, _ := strconv.Atoi(strings.Fields(p)[0]); pid != r.serverPID {
				left = append(left, p)
			}
		}
		return left
	})
	if len(left) > 0 {
		what := "the server it started and everything under it"
		if r.transport == "http" {
			what = "the processes of its session (ended 30 s after its client's stream closed, by the default rule)"
		}
		t.Errorf("%s %s: %v after the host exited, %s should be gone; still running: %s",
			r.h.name, r.transport, bound, what, strings.Join(left, "; "))
	} else {
		t.Logf("the server's processes were gone %v after the host exited", time.Since(start).Round(time.Millisecond))
	}
	if left := waitFor(testkit.Timeout, func() []string { return testkit.MarkedProcesses(r.hostMark) }); len(left) > 0 {
		t.Errorf("%s %s: processes of the host's own still running after it exited: %s", r.h.name, r.transport, strings.Join(left, "; "))
	}
}

// waitFor polls list (every 10 ms: a process leaving /proc gives no event)
// until it returns nothing or bound has passed, and returns what it last
// returned.
func waitFor(bound time.Duration, list func() []string) []string {
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		left := list()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		<-tick.C
	}
}

type hostResult struct {
	out string
	err error
}

// runHostCommand runs the host in a process group of its own, with a
// deadline; at the deadline, or when the test ends, the group is killed.
func (r *run) runHostCommand(args, environ []string) hostResult {
	t := r.t
	ctx, cancel := context.WithTimeout(context.Background(), hostRunTimeout)
	defer cancel()
	bin := filepath.Join(r.e.dir, "node_modules", ".bin", r.h.bin)
	argv := append([]string{bin}, args...)
	if wrap := os.Getenv("HOSTS_WRAP"); wrap != "" {
		// A command to run each host under, for a look at what it does
		// ("strace -f -e trace=connect -o /tmp/connects"); NAME in it
		// becomes the host and transport.
		argv = append(strings.Fields(strings.ReplaceAll(wrap, "NAME", r.h.name+"-"+r.transport)), argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = r.work
	cmd.Env = environ
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out testkit.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if f, err := os.Open(os.DevNull); err == nil {
		cmd.Stdin = f
		defer f.Close()
	}
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("did not finish within %v (killed): %v", hostRunTimeout, err)
	}
	t.Logf("%s %s: %v, %v", r.h.bin, strings.Join(redactArgs(args), " "), time.Since(start).Round(time.Millisecond), err)
	if r.e.log != "" {
		os.WriteFile(filepath.Join(r.e.log, r.h.name+"-"+r.transport, "host-output"), out.Bytes(), 0o644)
	}
	return hostResult{out: out.String(), err: err}
}

func redactArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if len(a) > 120 {
			out[i] = a[:120] + "…"
		}
	}
	return out
}

// deadProxy is a proxy address where nothing listens (port 9, discard).
const deadProxy = "http://127.0.0.1:9"

// hostEnv is the environment every host gets: a fresh HOME and XDG
// directories, the host's mark, and a dead proxy for anything that is not
// on loopback.
func (r *run) hostEnv(extra ...string) []string {
	keep := []string{"PATH", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "LOGNAME", "SHELL"}
	var environ []string
	for _, k := range keep {
		if v, ok := os.LookupEnv(k); ok {
			environ = append(environ, k+"="+v)
		}
	}
	environ = append(environ,
		"HOME="+r.home,
		"XDG_CONFIG_HOME="+filepath.Join(r.home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(r.home, ".local", "share"),
		"XDG_CACHE_HOME="+filepath.Join(r.home, ".cache"),
		"XDG_STATE_HOME="+filepath.Join(r.home, ".local", "state"),
		"NO_COLOR=1",
		// Whatever honours a proxy and is not going to loopback goes to
		// a port where nothing listens, and fails at once.
		"HTTP_PROXY="+deadProxy, "HTTPS_PROXY="+deadProxy, "http_proxy="+deadProxy, "https_proxy="+deadProxy,
		"ALL_PROXY="+deadProxy, "all_proxy="+deadProxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
		r.hostMark,
	)
	return append(environ, extra...)
}

// metrics returns the /metrics lines of the server s that start with
// prefix.
func metrics(s *e2ekit.HTTPServer, prefix string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(s.URL, "/mcp")+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	var b strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, prefix) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
