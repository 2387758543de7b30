package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

func newHost(t *testing.T) *host.Host {
	t.Helper()
	return hosttest.Start(t, nil, host.Options{})
}

// runLines feeds input to `call` and returns the result lines by input line.
func runLines(t *testing.T, input string) map[int]resultLine {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if err := runCall(ctx, newHost(t), strings.NewReader(input), &out); err != nil {
		t.Fatal(err)
	}
	results := map[int]resultLine{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r resultLine
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		if _, dup := results[r.Line]; dup {
			t.Fatalf("two results for input line %d", r.Line)
		}
		results[r.Line] = r
	}
	return results
}

func TestCallRunsEachLineAndKeepsShellsPerAgent(t *testing.T) {
	in := `{"agent":"a1","tool":"bash","args":{"command":"cd /tmp; X=1"},"id":1}
{"agent":"a2","tool":"bash","args":{"command":"echo \"[${X-}]\"; pwd"},"id":"two"}
{"agent":"a1","tool":"bash","args":{"command":"echo \"[$X]\"; pwd","timeout_ms":5000}}
`
	res := runLines(t, in)
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	if r := res[3]; r.Text != "[1]\n/tmp\n" || r.IsError || r.Agent != "a1" || r.Tool != "bash" || r.ID != nil {
		t.Fatalf("line 3: %+v", r)
	}
	if r := res[2]; strings.HasPrefix(r.Text, "[1]") || string(r.ID) != `"two"` {
		t.Fatalf("line 2 sees a1's shell: %+v", r)
	}
	if r := res[1]; string(r.ID) != "1" || string(r.Data) != `{"exit_code":0,"fresh_shell":true}` {
		t.Fatalf("line 1: %+v %s", r, r.Data)
	}
}

// Bad lines get an error line naming the problem and the run goes on.
func TestCallReportsBadLinesAndGoesOn(t *testing.T) {
	in := strings.Join([]string{
		`{"agent":"a1","tool":"bash","args":{"command":"echo one"}}`,
		`this is not json`,
		`{"agent":"a1","tool":"teleport","args":{}}`,
		`{"tool":"bash","args":{"command":"ls"}}`,
		`{"agent":"a 1","tool":"bash","args":{"command":"ls"}}`,
		`{"agent":"a1","tool":"bash","args":{"command":"ls"},"extra":1}`,
		`{"agent":"a1","tool":"bash","args":{"cmd":"ls"}}`,
		``,
		`{"agent":"a1","agent":"a2","tool":"bash","args":{"command":"ls"}}`,
		`{"agent":"a1","tool":"bash","args":{"command":"ls","command":"pwd"}}`,
		`{"agent":"a1","tool":"bash","args":{"command":"echo last"}}`,
	}, "\n")
	res := runLines(t, in)
	want := map[int]string{
		2: "not a JSON call object",
		3: `unknown tool "teleport"`,
		4: `"agent" is missing`,
		5: "agent id",
		6: `unknown field "extra"`,
		7: `unknown field "cmd"`,
		// Duplicated keys: one rule for the line and for the arguments.
		9:  `field "agent" appears twice`,
		10: `field "command" appears twice`,
	}
	for line, text := range want {
		r, ok := res[line]
		if !ok || !r.IsError || !strings.Contains(r.Text, text) {
			t.Errorf("line %d: %+v, want an error mentioning %q", line, r, text)
		}
	}
	if res[1].Text != "one\n" || res[11].Text != "last\n" || len(res) != 10 {
		t.Fatalf("good lines: %+v / %+v (%d results)", res[1], res[11], len(res))
	}
}

// Calls of one agent run in input order, even when other agents' calls are
// interleaved with them.
func TestCallKeepsTheOrderOfOneAgent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "order")
	var in strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&in, `{"agent":"a1","tool":"bash","args":{"command":"echo %d >> %s"}}`+"\n", i, file)
		fmt.Fprintf(&in, `{"agent":"b%d","tool":"bash","args":{"command":"true"}}`+"\n", i%3)
	}
	res := runLines(t, in.String())
	if len(res) != 60 {
		t.Fatalf("%d results", len(res))
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if string(got) != want.String() {
		t.Fatalf("order:\n%s", got)
	}
}

func TestReadLineBoundsLongLines(t *testing.T) {
	rd := bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", 100)+"\nshort\nlast"), 16)
	line, tooLong, err := readLine(rd, 50)
	if !tooLong || !strings.HasPrefix(strings.Repeat("x", 100), string(line)) || err != nil {
		t.Fatalf("long line: %q %v %v", line, tooLong, err)
	}
	line, tooLong, err = readLine(rd, 50)
	if string(line) != "short" || tooLong || err != nil {
		t.Fatalf("next line: %q %v %v", line, tooLong, err)
	}
	line, _, err = readLine(rd, 50)
	if string(line) != "last" || err != io.EOF {
		t.Fatalf("last line: %q %v", line, err)
	}
}

// The id of a line too long to take is found from its beginning.
func TestIDOfALineTooLong(t *testing.T) {
	for prefix, want := range map[string]string{
		`{"id":7,"agent":"a","args":{"command":"xxxx`:        "7",
		`{"agent":"a","id":"q1","tool":"bash","args":{"comm`: `"q1"`,
		`{"agent":"a","args":{"command":"xxxxxxxxxxxxxxxx`:   "",
		`not json`: "",
	} {
		if got := string(peekID([]byte(prefix))); got != want {
			t.Errorf("%s: got %q, want %q", prefix, got, want)
		}
	}
}

func TestCommandLineErrors(t *testing.T) {
	var stderr bytes.Buffer
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Commands:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"bench"}, 2, `"bench shell"`},
		{[]string{"bench", "shell", "--iterations", "0"}, 2, "--iterations is 0"},
		{[]string{"call", "--config", "/nonexistent.yaml"}, 1, "/nonexistent.yaml"},
		{[]string{"call", "stray"}, 2, `unexpected argument "stray"`},
	}
	for _, c := range cases {
		stderr.Reset()
		if code := run(c.args, strings.NewReader(""), io.Discard, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
	var stdout bytes.Buffer
	if code := run([]string{"help"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "bench shell") {
		t.Fatalf("help: %d %q", code, stdout.String())
	}
}

func TestCallCommandEndToEnd(t *testing.T) {
	in := `{"agent":"a","tool":"bash","args":{"command":"echo hi"},"id":7}` + "\n"
	var out, stderr bytes.Buffer
	if code := run([]string{"call"}, strings.NewReader(in), &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := `{"id":7,"line":1,"agent":"a","tool":"bash","text":"hi\n","isError":false,"data":{"exit_code":0,"fresh_shell":true}}` + "\n"; out.String() != want {
		t.Fatalf("got  %s\nwant %s", out.String(), want)
	}
}

// The benchmark runs end to end and reports every scenario; its figures are
// not judged here (speed is never asserted in a test).
func TestBenchShellJSON(t *testing.T) {
	var out, stderr bytes.Buffer
	code := run([]string{"bench", "shell", "--json", "--iterations", "3", "--spawn-iterations", "2", "--agents", "3", "--calls", "2"}, nil, &out, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Scenarios []struct {
			Name       string  `json:"name"`
			P50        float64 `json:"p50_us"`
			P99        float64 `json:"p99_us"`
			FloorP50   float64 `json:"floor_p50_us"`
			RatioP50   float64 `json:"ratio_p50"`
			SampleSize int     `json:"samples"`
		} `json:"scenarios"`
		Agents      int     `json:"agents"`
		CallsPerSec float64 `json:"calls_per_sec"`
		Errors      int     `json:"errors"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	names := []string{}
	for _, s := range rep.Scenarios {
		names = append(names, s.Name)
		if s.P50 <= 0 || s.FloorP50 <= 0 || s.RatioP50 <= 0 || s.P99 < s.P50 {
			t.Errorf("scenario %+v", s)
		}
	}
	if strings.Join(names, ",") != "spawn_init_echo,echo,pwd" || rep.Agents != 3 || rep.CallsPerSec <= 0 || rep.Errors != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// The terminal tools work through `call` like any other tool.
func TestCallDrivesTerminals(t *testing.T) {
	in := `{"agent":"a","tool":"terminal_open","args":{"command":"python3 -q"}}
{"agent":"a","tool":"terminal_send","args":{"terminal_id":"t1","text":"6*7","keys":["Enter"]}}
{"agent":"a","tool":"terminal_close","args":{"terminal_id":"t1"}}
`
	res := runLines(t, in)
	if r := res[2]; r.IsError || !strings.Contains(r.Text, "42") || !strings.Contains(string(r.Data), `"ready_reason":"stdin_read"`) {
		t.Fatalf("send: %+v %s", r, r.Data)
	}
	if r := res[3]; r.IsError || !strings.Contains(string(r.Data), `"running":false`) {
		t.Fatalf("close: %+v %s", r, r.Data)
	}
}

func TestBenchTerminalJSON(t *testing.T) {
	var out, stderr bytes.Buffer
	if code := run([]string{"bench", "terminal", "--json", "--iterations", "2"}, nil, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Scenarios []struct {
			Name     string  `json:"name"`
			P50      float64 `json:"p50_us"`
			FloorP50 float64 `json:"floor_p50_us"`
		} `json:"scenarios"`
		Reasons map[string]int `json:"ready_reasons"`
		Errors  int            `json:"errors"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// send_node too where node is on PATH (it is in CI).
	if len(rep.Scenarios) < 3 || rep.Scenarios[2].Name != "send_python" || len(rep.Scenarios) == 4 && rep.Scenarios[3].Name != "send_node" || rep.Reasons["stdin_read"] == 0 || rep.Reasons["prompt"] == 0 || rep.Errors != 0 {
		t.Fatalf("%+v", rep)
	}
	for _, s := range rep.Scenarios {
		if s.P50 <= 0 || s.FloorP50 <= 0 {
			t.Errorf("%+v", s)
		}
	}
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// When stdout goes away, the run ends: no further call runs.
func TestCallStopsWhenStdoutBreaks(t *testing.T) {
	flag := filepath.Join(t.TempDir(), "ran")
	in := `{"agent":"a","tool":"bash","args":{"command":"echo one"}}
{"agent":"a","tool":"bash","args":{"command":"touch ` + flag + `"}}
`
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	err := runCall(ctx, newHost(t), strings.NewReader(in), brokenWriter{})
	if err == nil || !strings.Contains(err.Error(), "writing results") {
		t.Fatalf("got %v", err)
	}
	if _, statErr := os.Stat(flag); statErr == nil {
		t.Fatal("a call ran after stdout broke")
	}
}

// `run` catches SIGPIPE rather than ignoring it, so the shells it starts get
// the default: `yes` dies quietly of SIGPIPE when `head` has had enough.
func TestCallShellsGetDefaultSIGPIPE(t *testing.T) {
	var out bytes.Buffer
	// Through run, which sets up the process's signals as the command does.
	code := run([]string{"call"}, strings.NewReader(`{"agent":"a","tool":"bash","args":{"command":"yes | head -1; echo \"[${PIPESTATUS[*]}]\""}}`+"\n"), &out, io.Discard)
	if code != 0 {
		t.Fatalf("exit %d, output %q", code, out.String())
	}
	var r resultLine
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	if r.Text != "y\n[141 0]\n" {
		t.Errorf("text %q, want yes killed by SIGPIPE (141) and no complaint", r.Text)
	}
}

// A signal (the run's context ending) stops `call` while its stdin is open
// and idle: the call under way is withdrawn and answered as such, and the
// run ends with errStopped.
func TestSignalEndsAnIdleCall(t *testing.T) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &testkit.Buffer{}
	done := make(chan error, 1)
	go func() { done <- runCall(ctx, newHost(t), pr, out) }()
	// The call says it is under way itself: another package's test may run
	// a "sleep 100" of its own at the same moment.
	sig, running := testkit.Signal(t)
	line := fmt.Sprintf(`{"agent":"a","tool":"bash","args":{"command":"echo > %s; sleep 100"},"id":9}`, sig)
	if _, err := io.WriteString(pw, line+"\n"); err != nil {
		t.Fatal(err)
	}
	running()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(testkit.Timeout):
		t.Fatal("call did not end after the signal")
	}
	if !errors.Is(err, errStopped) {
		t.Fatalf("got %v, want errStopped", err)
	}
	var r resultLine
	if e := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &r); e != nil || string(r.ID) != "9" || !r.IsError || !strings.Contains(r.Text, "withdrawn") {
		t.Fatalf("result %q (%v)", out.Bytes(), e)
	}
}

// Outside a tmux pane of its own (here, with $TMUX_PANE unset), the command
// prints nothing and exits 1; inside one, see actors/tmuxprobe's tests.
func TestTmuxLocationOutsideTmux(t *testing.T) {
	t.Setenv("TMUX_PANE", "")
	var stdout, stderr strings.Builder
	if code := run([]string{"tmux-location"}, strings.NewReader(""), &stdout, &stderr); code != 1 || stdout.Len() != 0 || stderr.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// A harness in any language drives turns with session lines: begin a turn,
// inject, record the model's message, prepare the next step and see it all.
func TestCallSpeaksTheSessionProtocol(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("session:\n  path: "+filepath.Join(t.TempDir(), "sessions.db")+"\n"), 0o600)
	in := strings.Join([]string{
		`{"agent":"a","tool":"session.begin_turn","args":{"text":"hello"}}`,
		`{"agent":"a","tool":"session.inject","args":{"text":"context","source":{"kind":"plugin","plugin":"mine"}}}`,
		`{"agent":"a","tool":"session.record","args":{"event":{"turn":1,"step":1,"model":{"text":"hi there"}}}}`,
		`{"agent":"a","tool":"session.prepare_step","args":{"turn":1,"step":2,"visible":true}}`,
		`{"agent":"a","tool":"session.record","args":{"event":{"bogus":1}}}`,
		`{"agent":"a","tool":"session.prepare_step","args":{"turn":0,"step":1}}`,
		`{"agent":"a","tool":"session.nope"}`,
	}, "\n") + "\n"
	var out, stderr bytes.Buffer
	if code := run([]string{"call", "--config", cfg}, strings.NewReader(in), &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	for i, want := range []string{`"data":{"turn":1}`, `"data":{"seq":2}`, `"data":{"seq":3}`, `"visible_count":3`,
		`is not a session event`, `turns and steps count from 1`, `unknown session operation`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s, want %s", i+1, lines[i], want)
		}
	}
	if !strings.Contains(lines[3], `"user":{"text":"context","source":{"kind":"plugin","plugin":"mine"}}`) || !strings.Contains(lines[3], `"model":{"text":"hi there"}`) {
		t.Errorf("the visible events: %s", lines[3])
	}
}

// Results are JSON without HTML escaping: a prompt reads ">>> ", not
// "\u003e\u003e\u003e ".
func TestCallWritesJSONWithoutHTMLEscaping(t *testing.T) {
	in := `{"agent":"a","tool":"bash","args":{"command":"printf '>>> <a> & b'"}}` + "\n"
	var out, stderr bytes.Buffer
	if code := run([]string{"call"}, strings.NewReader(in), &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(out.String(), `"text":">>> <a> & b"`) {
		t.Fatalf("%s", out.String())
	}
}

// As with a Go command's flags: every command takes -h (and -help,
// --help), shows its usage on stderr and exits 0; `help COMMAND` shows the
// same on stdout. A bad flag is reported once, on stderr, with exit 2.
// --version, like version, prints the version.
func TestHelpAndBadFlagsFollowGoConventions(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"call", "-h"}, {"bench", "-h"}, {"bench", "shell", "-h"}, {"bench", "terminal", "--help"},
		{"bench", "soak", "-h"}, {"bench", "serve", "-help"}, {"tmux-location", "-h"}, {"serve", "-h"}, {"tools", "-h"},
		{"config", "-h"}, {"config", "check", "-h"}, {"config", "check", "--help"}, {"config", "default", "-h"}, {"version", "-h"}} {
		var out, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &stderr); code != 0 || !strings.Contains(stderr.String(), "Usage") && !strings.Contains(stderr.String(), "Commands:") || out.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), stderr.String())
		}
	}
	for _, args := range [][]string{{"help"}, {"help", "call"}, {"help", "bench", "soak"}, {"help", "config", "check"}, {"help", "version"}} {
		var out, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &stderr); code != 0 || !strings.Contains(out.String(), "Usage") && !strings.Contains(out.String(), "Commands:") || stderr.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), stderr.String())
		}
	}
	var out, stderr bytes.Buffer
	if code := run([]string{"bench", "shell", "-bogus"}, nil, &out, &stderr); code != 2 || strings.Count(stderr.String(), "bogus") != 1 || out.Len() > 0 {
		t.Errorf("a bad flag: exit %d, stdout %q, stderr %q", code, out.String(), stderr.String())
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		out.Reset()
		stderr.Reset()
		if code := run(args, nil, &out, &stderr); code != 0 || !strings.HasPrefix(out.String(), "dsh-actors ") || !strings.Contains(out.String(), "go1.") || stderr.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), stderr.String())
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"version", "x"}, `unexpected argument "x"`},
		{[]string{"config", "check"}, "config check: missing FILE"},
		{[]string{"config", "check", "a.yaml", "b.yaml"}, `unexpected argument "b.yaml"`},
		{[]string{"config", "check", "-x", "a.yaml"}, "flag provided but not defined: -x"},
		{[]string{"config", "default", "x"}, `unexpected argument "x"`},
		{[]string{"config", "show"}, `unknown subcommand "show"`},
	} {
		out.Reset()
		stderr.Reset()
		if code := run(c.args, nil, &out, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) || out.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out.String(), stderr.String(), c.want)
		}
	}
}

func TestConfigCheckAndDefault(t *testing.T) {
	dir := t.TempDir()
	var out, stderr bytes.Buffer
	if code := run([]string{"config", "default"}, nil, &out, &stderr); code != 0 {
		t.Fatalf("config default: exit %d, %s", code, stderr.String())
	}
	def := filepath.Join(dir, "default.yaml")
	os.WriteFile(def, out.Bytes(), 0o600)
	out.Reset()
	if code := run([]string{"config", "check", def}, nil, &out, &stderr); code != 0 || !strings.Contains(out.String(), "no problem") {
		t.Fatalf("config check of the default file: exit %d, %q %q", code, out.String(), stderr.String())
	}
	// Every problem at once, each with its line: unknown keys, wrong
	// types and values out of range.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("bash:\n  timeoutMS: 3\n  timeoutMs: -1\nterminal:\n  maxWaitMs: x\n  killGraceMs: 0\n"), 0o600)
	stderr.Reset()
	code := run([]string{"config", "check", bad}, nil, io.Discard, &stderr)
	for _, want := range []string{"bash.timeoutMS: unknown key (line 2", "bash.timeoutMs: -1 (line 3) is out of range",
		`terminal.maxWaitMs: "x" (line 5) is not a whole number`, "terminal.killGraceMs: 0 (line 6) is out of range"} {
		if code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("config check of a bad file: exit %d, %q; want 1 and %q", code, stderr.String(), want)
		}
	}
}

// serve speaks MCP on its stdin and stdout: a client lists the tools and
// runs bash; when the client goes, serve ends and its processes are gone.
func TestServeOverStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := run([]string{"serve"}, inR, outW, io.Discard)
		outW.Close()
		done <- code
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo over-mcp"}})
	if err != nil || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != "over-mcp\n" {
		t.Fatalf("%+v %v", res, err)
	}
	cs.Close()
	inW.Close()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d", code)
		}
	case <-time.After(testkit.Timeout):
		t.Fatal("serve did not end when its client went")
	}
}

func TestServeHTTPBindsToLoopbackUnlessTold(t *testing.T) {
	for _, c := range []struct{ addr, token, want string }{
		{"8080", "", "127.0.0.1:8080"},
		{":8080", "", "127.0.0.1:8080"},
		{"localhost:8080", "", "localhost:8080"},
		{"[::1]:8080", "", "[::1]:8080"},
		{"0.0.0.0:8080", "t", "0.0.0.0:8080"},
	} {
		if got, err := loopbackUnlessTold("--http", c.addr, c.token); err != nil || got != c.want {
			t.Errorf("%q: %q %v, want %q", c.addr, got, err, c.want)
		}
	}
	for _, addr := range []string{"0.0.0.0:8080", "192.0.2.1:80", "example.com:80"} {
		if _, err := loopbackUnlessTold("--http", addr, ""); err == nil || !strings.Contains(err.Error(), "--token") {
			t.Errorf("%q without a token: %v", addr, err)
		}
	}
}

// `tools` prints every tool with a schema of plain types: no
// ["null","integer"] unions, which some model APIs refuse.
func TestToolsPrintsPlainSchemas(t *testing.T) {
	var out, stderr bytes.Buffer
	if code := run([]string{"tools"}, nil, &out, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var d struct {
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"inputSchema"`
		} `json:"tools"`
		Guidance string `json:"guidance"`
	}
	if err := json.Unmarshal(out.Bytes(), &d); err != nil || len(d.Tools) < 10 || d.Guidance == "" {
		t.Fatalf("%v: %s", err, out.String())
	}
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			if _, union := v["type"].([]any); union {
				t.Errorf("%s: a type union %v", path, v["type"])
			}
			for k, sub := range v {
				walk(sub, path+"."+k)
			}
		case []any:
			for i, sub := range v {
				walk(sub, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	for _, tl := range d.Tools {
		walk(tl.InputSchema, tl.Name)
	}
}
