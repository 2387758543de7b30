package terminal_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

type result struct {
	text  string
	isErr bool
	data  map[string]any
}

func (r result) reason() string { s, _ := r.data["ready_reason"].(string); return s }

type fixture struct {
	t *testing.T
	h *host.Host
}

func newFixture(t *testing.T, tweak func(*config.Config)) *fixture {
	return &fixture{t: t, h: hosttest.Start(t, tweak, host.Options{})}
}

// call runs a tool of agent "a" with args given as a JSON object literal.
func (f *fixture) call(tool, args string) result { return f.callAs("a", tool, args) }

func (f *fixture) callAs(agent, tool, args string) result {
	f.t.Helper()
	r, err := f.h.Call(hosttest.Context(f.t), agent, tool, json.RawMessage(args))
	if err != nil {
		f.t.Fatalf("%s %s: %v", tool, args, err)
	}
	res := result{text: r.Text, isErr: r.IsError}
	if len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &res.data); err != nil {
			f.t.Fatalf("data %s: %v", r.Data, err)
		}
	}
	return res
}

// open opens a terminal and returns its id; the open must succeed.
func (f *fixture) open(args string) (string, result) {
	f.t.Helper()
	r := f.call("terminal_open", args)
	id, _ := r.data["terminal_id"].(string)
	if r.isErr || id == "" {
		f.t.Fatalf("open %s: %+v", args, r)
	}
	return id, r
}

func (f *fixture) send(id, text string, keys ...string) result {
	f.t.Helper()
	args := map[string]any{"terminal_id": id, "text": text}
	if len(keys) > 0 {
		args["keys"] = keys
	}
	b, _ := json.Marshal(args)
	return f.call("terminal_send", string(b))
}

func want(t *testing.T, r result, reason string, contains ...string) {
	t.Helper()
	if r.isErr || r.reason() != reason {
		t.Fatalf("want ready %q, got %q (error %v):\n%s", reason, r.reason(), r.isErr, r.text)
	}
	for _, c := range contains {
		if !strings.Contains(r.text, c) {
			t.Fatalf("result does not contain %q:\n%s", c, r.text)
		}
	}
}

func TestOpenFindsProgramsReadyByProof(t *testing.T) {
	f := newFixture(t, nil)
	_, r := f.open(`{}`)
	want(t, r, "prompt", "[terminal t1 opened: bash]")
	_, r = f.open(`{"command":"python3 -q"}`)
	want(t, r, "stdin_read", ">>> ", "python3")
	_, r = f.open(`{"command":"cat"}`)
	want(t, r, "stdin_read", "cat")
	if r.data["running"] != true {
		t.Fatalf("%v", r.data)
	}
}

func TestSendReturnsOutputAndReadiness(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	want(t, f.send(id, "echo hello", "Enter"), "prompt", "hello\n")
	want(t, f.send(id, "read x", "Enter"), "stdin_read", "bash")
	want(t, f.send(id, "typed", "Enter"), "prompt")
	want(t, f.send(id, "echo $x", "Enter"), "prompt", "typed\n")
	want(t, f.send(id, "python3 -q", "Enter"), "stdin_read", ">>> ")
	want(t, f.send(id, "1+1", "Enter"), "stdin_read", "2\n>>> ")
	want(t, f.send(id, "", "C-d"), "prompt")
	// Output read by a send is not returned again.
	r := f.call("terminal_read", `{"terminal_id":"`+id+`","wait_ms":0}`)
	if strings.Contains(r.text, "hello") || r.isErr {
		t.Fatalf("read returned old output:\n%s", r.text)
	}
}

func TestSignalInterruptsTheForegroundProgram(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Terminal.DefaultWaitMs = 300 })
	id, _ := f.open(`{}`)
	r := f.send(id, "sleep 100; echo after", "Enter")
	want(t, r, "timeout")
	s := f.call("terminal_signal", `{"terminal_id":"`+id+`","signal":"INT"}`)
	if s.isErr || !strings.Contains(s.text, "SIGINT") || !strings.Contains(s.text, "sleep") {
		t.Fatalf("%+v", s)
	}
	r = f.call("terminal_read", `{"terminal_id":"`+id+`","wait_ms":5000}`)
	want(t, r, "prompt")
	if strings.Contains(r.text, "after") {
		t.Fatalf("the interrupted list went on:\n%s", r.text)
	}
	// TERM and KILL go to the foreground group too (TIOCSIG takes only INT,
	// QUIT and TSTP on a pseudo-terminal).
	want(t, f.send(id, "sleep 100", "Enter"), "timeout")
	if s := f.call("terminal_signal", `{"terminal_id":"`+id+`","signal":"SIGTERM"}`); s.isErr {
		t.Fatal(s.text)
	}
	want(t, f.call("terminal_read", `{"terminal_id":"`+id+`","wait_ms":5000}`), "prompt")
	if s := f.call("terminal_signal", `{"terminal_id":"`+id+`","signal":"USR1"}`); !s.isErr || !strings.Contains(s.text, `"USR1"`) {
		t.Fatalf("%+v", s)
	}
}

// Concurrent sends on one terminal: exactly one gets it, the others are told
// who holds it; keystrokes never mix.
func TestConcurrentSendsExactlyOneWins(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	const n = 8
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = f.send(id, fmt.Sprintf("sleep 0.3; echo sender-%d", i), "Enter")
		}(i)
	}
	wg.Wait()
	wins := 0
	for i, r := range results {
		switch {
		case !r.isErr:
			wins++
			want(t, r, "prompt", fmt.Sprintf("sender-%d", i))
		case !strings.Contains(r.text, "is busy") || !strings.Contains(r.text, "since"):
			t.Fatalf("loser %d: %s", i, r.text)
		}
	}
	if wins != 1 {
		t.Fatalf("%d sends won", wins)
	}
}

func TestBackgroundTaskHoldsTheTerminalUntilDone(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	fifo, release := testkit.Gate(t)
	r := f.call("terminal_send", `{"terminal_id":"`+id+`","text":"read line < `+fifo+`; echo got-$line","keys":["Enter"],"run_in_background":true}`)
	task, _ := r.data["task_id"].(string)
	if r.isErr || task == "" || !strings.Contains(r.text, task) {
		t.Fatalf("%+v", r)
	}
	busy := f.send(id, "echo nope", "Enter")
	if !busy.isErr || !strings.Contains(busy.text, task) {
		t.Fatalf("send during the task: %+v", busy)
	}
	if l := f.call("task_list", `{}`); !strings.Contains(l.text, task+" on "+id+", running") {
		t.Fatalf("task_list: %s", l.text)
	}
	release("ok")
	var out strings.Builder
	for i := 0; ; i++ {
		o := f.call("task_output", `{"task_id":"`+task+`","wait_ms":5000}`)
		out.WriteString(o.text)
		if o.data["running"] == false {
			if o.data["ready_reason"] != "prompt" {
				t.Fatalf("%+v", o)
			}
			break
		}
		if i > 20 {
			t.Fatalf("task never finished: %s", out.String())
		}
	}
	if strings.Count(out.String(), "got-ok") != 1 {
		t.Fatalf("output %q", out.String())
	}
	// Collected output is not returned again; the terminal is free.
	if o := f.call("task_output", `{"task_id":"`+task+`"}`); strings.Contains(o.text, "got-ok") {
		t.Fatalf("output returned twice: %s", o.text)
	}
	want(t, f.send(id, "echo free", "Enter"), "prompt", "free")
}

func TestTaskKillEscalatesWhenSIGINTIsIgnored(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Terminal.KillGraceMs = 200 })
	id, _ := f.open(`{}`)
	r := f.call("terminal_send", `{"terminal_id":"`+id+`","text":"python3 -c 'import signal,time; signal.signal(signal.SIGINT, signal.SIG_IGN); print(\"ignoring\", flush=True); time.sleep(100)'","keys":["Enter"],"run_in_background":true}`)
	task, _ := r.data["task_id"].(string)
	if task == "" {
		t.Fatalf("%+v", r)
	}
	// Wait for the program's own line, not the echo of the command.
	var seen strings.Builder
	for i := 0; !strings.Contains("\n"+seen.String(), "\nignoring\n"); i++ {
		o := f.call("task_output", `{"task_id":"`+task+`","wait_ms":5000}`)
		out, _, _ := strings.Cut(o.text, "[task-") // the output, without the status line
		seen.WriteString(out)
		if o.data["running"] == false || i > 50 {
			t.Fatalf("the task ended on its own or never printed: %s", seen.String())
		}
	}
	k := f.call("task_kill", `{"task_id":"`+task+`"}`)
	if k.isErr || !strings.Contains(k.text, "SIGTERM") || k.data["running"] != false {
		t.Fatalf("%+v", k)
	}
	want(t, f.send(id, "echo free", "Enter"), "prompt", "free")
}

func TestCloseEndsEverythingInTheSession(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	r := f.send(id, "sleep 1000 & nohup sleep 1001 >/dev/null 2>&1 & (trap '' HUP; sleep 1002) & (setsid sleep 1003 &); "+testkit.ShellPID, "Enter")
	sid := shellPID(t, r.text)
	c := f.call("terminal_close", `{"terminal_id":"`+id+`"}`)
	if c.isErr || c.data["running"] != false || !strings.Contains(c.text, "closed") {
		t.Fatalf("%+v", c)
	}
	testkit.SessionGone(t, sid)
	// Even what left the session by a double fork.
	testkit.Eventually(t, "what left the session gone", func() (bool, string) {
		left := testkit.CommandsRunning("sleep 1003")
		return len(left) == 0, strings.Join(left, ", ")
	})
	if r := f.send(id, "echo", "Enter"); !r.isErr || !strings.Contains(r.text, "no such terminal") {
		t.Fatalf("send after close: %+v", r)
	}
}

func TestAnExitedTerminalAnswersWithItsStatus(t *testing.T) {
	f := newFixture(t, nil)
	id, r := f.open(`{"command":"echo bye; exit 3"}`)
	want(t, r, "exited", "bye", "exit code 3")
	s := f.send(id, "more", "Enter")
	if !s.isErr || !strings.Contains(s.text, "has exited") {
		t.Fatalf("%+v", s)
	}
	l := f.call("terminal_list", `{}`)
	if !strings.Contains(l.text, id+": echo bye; exit 3 — exited (exit code 3)") {
		t.Fatalf("%s", l.text)
	}
	if c := f.call("terminal_close", `{"terminal_id":"`+id+`"}`); c.isErr || !strings.Contains(c.text, "exit code 3") {
		t.Fatalf("%+v", c)
	}
}

// Another agent's terminal id gets the same answer as one that never existed.
func TestTerminalsBelongToTheirAgent(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	foreign := f.callAs("b", "terminal_read", `{"terminal_id":"`+id+`"}`)
	missing := f.callAs("b", "terminal_read", `{"terminal_id":"t99"}`)
	if !foreign.isErr || strings.Replace(foreign.text, id, "X", 1) != strings.Replace(missing.text, "t99", "X", 1) {
		t.Fatalf("foreign %q vs missing %q", foreign.text, missing.text)
	}
	if l := f.callAs("b", "terminal_list", `{}`); strings.Contains(l.text, id) {
		t.Fatalf("b lists a's terminal: %s", l.text)
	}
}

func TestFloodIsBoundedAndPaged(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		c.Terminal.MaxResultBytes = 4096
		c.Terminal.HistoryBytes = 64 << 10
	})
	id, _ := f.open(`{}`)
	r := f.send(id, "for i in $(seq 1 20000); do echo \"line $i é\"; done", "Enter")
	want(t, r, "prompt", "line 20000 é", "earlier bytes not shown")
	if len(r.text) > 4096 || !utf8.ValidString(r.text) {
		t.Fatalf("result of %d bytes", len(r.text))
	}
	p := f.call("terminal_read", `{"terminal_id":"`+id+`","offset":0,"limit":100}`)
	if !strings.Contains(p.text, "were dropped from the retained history") || len(p.text) > 4096 {
		t.Fatalf("page:\n%s", p.text)
	}
	end := int64(r.data["output_to"].(float64))
	p = f.call("terminal_read", fmt.Sprintf(`{"terminal_id":"%s","offset":%d,"limit":50}`, id, end-200))
	if strings.Contains(p.text, "dropped") || !strings.Contains(p.text, "line") {
		t.Fatalf("page near the end:\n%s", p.text)
	}
	// The send's result kept the end; what it shows starts where its
	// marker says the rest can be read up to.
	if from := int64(r.data["output_from"].(float64)); !strings.Contains(r.text, fmt.Sprintf("covers output bytes %d-%d", from, end)) {
		t.Fatalf("the send's result says it covers other bytes than its data (%d-%d):\n%s", from, end, r.text)
	}
	// Pages cut by the cap say what they show: paging on from output_to
	// walks the retained history with no gap and no overlap, line by line.
	var first int64
	if _, err := fmt.Sscanf(p.text[strings.LastIndex(p.text, "history retained from byte "):], "history retained from byte %d]", &first); err != nil {
		t.Fatal(err)
	}
	next, lines := first, 0
	for next < end {
		p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":%d}`, id, next))
		from, to := int64(p.data["output_from"].(float64)), int64(p.data["output_to"].(float64))
		if from != next || to <= from || !strings.Contains(p.text, fmt.Sprintf("covers output bytes %d-%d", from, to)) ||
			to < end && !strings.Contains(p.text, fmt.Sprintf("terminal_read with offset %d reads on", to)) {
			t.Fatalf("a page asked from %d shows %d-%d:\n%s", next, from, to, p.text)
		}
		lines += strings.Count(p.text, " é\n")
		next = to
	}
	if int64(lines) < (end-first)/20 { // a line is at most 16 bytes
		t.Fatalf("paging %d bytes of history saw %d lines", end-first, lines)
	}
}

func TestResize(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{"cols":100,"rows":30}`)
	want(t, f.send(id, "stty size", "Enter"), "prompt", "30 100")
	if r := f.call("terminal_resize", `{"terminal_id":"`+id+`","cols":132,"rows":43}`); r.isErr {
		t.Fatal(r.text)
	}
	want(t, f.send(id, "stty size", "Enter"), "prompt", "43 132")
}

func TestBackgroundCanBeTurnedOff(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Terminal.EnableRunInBackground = false })
	for _, tool := range f.h.Tools() {
		if tool.Name == "terminal_send" && strings.Contains(string(tool.InputSchema), "run_in_background") {
			t.Fatalf("schema still offers run_in_background: %s", tool.InputSchema)
		}
		if strings.HasPrefix(tool.Name, "task_") {
			t.Fatalf("task tool %s offered", tool.Name)
		}
	}
	id, _ := f.open(`{}`)
	// The field is not in the schema: false is as forced an argument as true.
	// Nor does it pass inside arguments sent as a JSON string.
	for _, v := range []string{"true", "false"} {
		args := `{"terminal_id":"` + id + `","text":"ls","run_in_background":` + v + `}`
		quoted, _ := json.Marshal(args)
		for _, a := range []string{args, string(quoted)} {
			if r := f.call("terminal_send", a); !r.isErr || !strings.Contains(r.text, "enableRunInBackground") {
				t.Fatalf("%s: %+v", a, r)
			}
		}
	}
}

func TestBadArgumentsNameTheProblem(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct{ tool, args, want string }{
		{"terminal_send", `{"terminal_id":"t1"}`, "nothing to send"},
		{"terminal_send", `{"text":"x"}`, `"terminal_id" is missing`},
		{"terminal_send", `{"terminal_id":"t1","text":"x","keys":["Hyper"]}`, `unknown key "Hyper"`},
		{"terminal_send", `{"terminal_id":"t1","text":"x","wait_ms":-1}`, `"wait_ms" is -1`},
		{"terminal_open", `{"cols":5000,"rows":5}`, "out of range"},
		{"terminal_open", `{"env":{"A=B":"c"}}`, `env entry "A=B"`},
		{"terminal_open", `{"command":"echo a\u0000b"}`, `"command" has a NUL byte at offset 6`},
		{"terminal_read", `{"terminal_id":"t1","limit":5}`, `goes with "offset"`},
		{"terminal_signal", `{"terminal_id":"t1","signal":"STOP"}`, `"STOP" is not one of`},
		{"terminal_open", `{"comand":"ls"}`, `unknown field "comand"`},
		{"task_output", `{}`, `"task_id" is missing`},
		{"task_kill", `{}`, `"task_id" is missing`},
		{"terminal_signal", `{"terminal_id":"t1"}`, `"signal" is missing`},
		{"task_kill", `{"task_id":"task-9"}`, `no such task "task-9"`},
	}
	for _, c := range cases {
		r := f.call(c.tool, c.args)
		if !r.isErr || !strings.Contains(r.text, c.want) {
			t.Errorf("%s %s: %q, want an error with %q", c.tool, c.args, r.text, c.want)
		}
	}
}

func TestTooManyTerminals(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Terminal.MaxTerminals = 2 })
	f.open(`{"command":"cat"}`)
	f.open(`{"command":"cat"}`)
	if r := f.call("terminal_open", `{"command":"cat"}`); !r.isErr || !strings.Contains(r.text, "maxTerminals") {
		t.Fatalf("%+v", r)
	}
}

// An agent that stops with terminals and tasks open leaves nothing behind.
func TestStoppingTheAgentEndsTerminalsAndTasks(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	sid := 0
	r := f.send(id, testkit.ShellPID, "Enter")
	sid = shellPID(t, r.text)
	f.open(`{"command":"python3 -q"}`)
	bg := f.call("terminal_send", `{"terminal_id":"`+id+`","text":"sleep 1000 & sleep 1001","keys":["Enter"],"run_in_background":true}`)
	if bg.isErr || sid == 0 {
		t.Fatalf("%+v / %q", bg, r.text)
	}
	if err := f.h.StopAgent(hosttest.Context(t), "a"); err != nil {
		t.Fatal(err)
	}
	if left, err := procfs.Session(sid); err != nil || len(left) > 0 {
		t.Fatalf("after StopAgent: %v %v", left, err)
	}
	if l := f.call("terminal_list", `{}`); l.text != "[no terminals open]" {
		t.Fatalf("a restarted agent still lists terminals: %s", l.text)
	}
}

// Event loops on the terminal (node's REPL, readline.question) are proven
// waiting as cat is, not inferred after a silence; a timer due soon is
// waited out. A relay (script, as ssh -t and docker exec -it) is no proof:
// its output is waited for until it settles.
func TestEventLoopsAreProvenAndRelaysAreNot(t *testing.T) {
	testkit.Node(t)
	f := newFixture(t, func(c *config.Config) { c.Terminal.IdleSilenceMs = 1500 })
	repl, r := f.open(`{"command":"node"}`)
	want(t, r, "stdin_read", "> ", "node (pid", "epoll_wait")
	want(t, f.send(repl, "6*7", "Enter"), "stdin_read", "42")
	want(t, f.send(repl, "setTimeout(() => console.log('late ' + 2*3), 300)", "Enter"), "stdin_read", "late 6")
	want(t, f.send(repl, "", "C-d"), "exited")

	q, r := f.open(`{"command":"node -e \"require('readline').createInterface({input: process.stdin, output: process.stdout}).question('Ok to proceed? (y) ', a => { console.log('answer:', a); process.exit(0) })\""}`)
	want(t, r, "stdin_read", "Ok to proceed? (y)")
	want(t, f.send(q, "y", "Enter"), "exited", "answer: y")

	relay, r := f.open(`{"command":"script -q -c 'bash --norc --noprofile' /dev/null"}`)
	want(t, r, "inferred_idle", "master side of another terminal")
	r = f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"sleep 0.5; echo relayed-$((6*7))","keys":["Enter"],"wait_ms":8000}`, relay))
	want(t, r, "inferred_idle", "relayed-42", "script (pid", "proves nothing")
}

func TestTasksBelongToTheirAgent(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	r := f.call("terminal_send", `{"terminal_id":"`+id+`","text":"sleep 0.1","keys":["Enter"],"run_in_background":true}`)
	task, _ := r.data["task_id"].(string)
	foreign := f.callAs("b", "task_output", `{"task_id":"`+task+`"}`)
	if !foreign.isErr || !strings.Contains(foreign.text, "no such task") {
		t.Fatalf("%+v", foreign)
	}
	if l := f.callAs("b", "task_list", `{}`); strings.Contains(l.text, task) {
		t.Fatalf("b lists a's task: %s", l.text)
	}
}

// A call that gives no wait of its own returns once the program is quiet
// (no output, no processor time, not reading the terminal): a server
// waiting for connections does not hold terminal_open for the whole default
// wait. A program working silently, and a call that gave wait_ms, are
// waited for.
func TestQuietProgramsSettleWhenTheCallGaveNoWait(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		c.Terminal.IdleSilenceMs = 500
		c.Terminal.DefaultWaitMs = 60000
	})
	py := testkit.Python3(t)
	server, r := f.open(fmt.Sprintf(`{"command":"%s -u -m http.server 0 --bind 127.0.0.1"}`, py))
	want(t, r, "inferred_idle", "Serving HTTP", "python3", "not reading the terminal", "does not prove")
	want(t, f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q}`, server)), "inferred_idle")

	id, _ := f.open(`{}`)
	want(t, f.send(id, "sleep 600", "Enter"), "inferred_idle", "sleep")
	f.call("terminal_signal", fmt.Sprintf(`{"terminal_id":%q,"signal":"INT"}`, id))
	want(t, f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":5000}`, id)), "prompt")

	// A stopped program is said to be stopped.
	_, r = f.open(`{"command":"sh -c 'kill -STOP $$'"}`)
	want(t, r, "inferred_idle", "sh, pid", "is stopped", "CONT")

	// The caller's own wait is kept.
	r = f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"sleep 600","keys":["Enter"],"wait_ms":1500}`, id))
	want(t, r, "timeout")
	f.call("terminal_signal", fmt.Sprintf(`{"terminal_id":%q,"signal":"INT"}`, id))
	want(t, f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":5000}`, id)), "prompt")

	// Busy without a word: still working, so the default wait (2.5 s here,
	// five times the silence) runs out.
	f2 := newFixture(t, func(c *config.Config) {
		c.Terminal.IdleSilenceMs = 500
		c.Terminal.DefaultWaitMs = 2500
	})
	busy, _ := f2.open(`{}`)
	want(t, f2.send(busy, fmt.Sprintf(`%s -c 'while True: pass'`, py), "Enter"), "timeout")
	// So is a program that sleeps while its child works (node running a
	// script, a Python loop around Popen).
	parent, _ := f2.open(`{}`)
	want(t, f2.send(parent, fmt.Sprintf(`%s -c 'import subprocess, sys, time; subprocess.Popen([sys.executable, "-c", "while True: pass"]); time.sleep(600)'`, py), "Enter"), "timeout")
}

// shellPID finds, in a terminal's output, the line testkit.ShellPID printed
// and returns that shell's pid on the host.
func shellPID(t *testing.T, text string) int {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, " pid:[") && !strings.Contains(l, "readlink") {
			return testkit.HostPID(t, strings.TrimSpace(l))
		}
	}
	t.Fatalf("no shell pid in %q", text)
	return 0
}
