package shell_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestStatePersistsAcrossCalls(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	env := filepath.Join(dir, "activate")
	// An "activated environment": a sourced file that changes PATH and PS1,
	// as virtualenv's activate does.
	if err := os.WriteFile(env, []byte("export VIRTUAL_ENV=/venv\nPATH=/venv/bin:$PATH\nPS1=\"(venv) $PS1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := bash(t, h, "a", "cd "+dir)
	if !first.FreshShell {
		t.Errorf("the first call should say it ran in a fresh shell: %+v", first)
	}
	bash(t, h, "a", "export GREETING=hello; greet() { echo \"$GREETING, $1\"; }; source "+env)
	bash(t, h, "a", "sleep 1000 & echo started")
	res := bash(t, h, "a", "pwd; greet world; echo $VIRTUAL_ENV; jobs | grep -c sleep")
	wantText(t, res, dir+"\nhello, world\n/venv\n1\n")
	if res.FreshShell {
		t.Errorf("a later call must not say fresh shell")
	}
}

func TestAgentsAreIsolated(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "export ONLY_A=1; cd /tmp")
	res := bash(t, h, "b", "echo \"[${ONLY_A-}]\"; pwd")
	if strings.HasPrefix(res.Text, "[1]") || strings.Contains(res.Text, "/tmp\n") && !strings.HasPrefix(wd(t), "/tmp") {
		t.Fatalf("agent b sees agent a's state: %q", res.Text)
	}
	if shellPID(t, h, "a") == shellPID(t, h, "b") {
		t.Fatal("two agents share one shell")
	}
}

func wd(t *testing.T) string {
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestExitStatusTravelsWithTheResult(t *testing.T) {
	h := newHost(t, nil)
	wantText(t, bash(t, h, "a", "true"), "")
	res := bash(t, h, "a", "echo out; echo err >&2; exit_with() { return $1; }; exit_with 7")
	if res.Text != "out\nerr\n[exit code: 7]" || exitCode(res) != "7" || res.IsError {
		t.Fatalf("got %q exit %s", res.Text, exitCode(res))
	}
	res = bash(t, h, "a", "printf 'no newline'; false")
	if res.Text != "no newline\n[exit code: 1]" {
		t.Fatalf("got %q", res.Text)
	}
}

// Command text of any shape runs as one unit with one result.
func TestCommandTextOfAnyShape(t *testing.T) {
	h := newHost(t, nil)
	long := strings.Repeat("x", 10000)
	cases := []struct {
		name, command, want string
		status              int
	}{
		{"lines", "echo one\necho two\n\necho three", "one\ntwo\nthree\n", 0},
		{"heredoc", "cat <<'EOF'\nline $HOME\n  indented\nEOF\necho after", "line $HOME\n  indented\nafter\n", 0},
		{"history expansion", `echo "hi!x" '!!' !$`, "hi!x !! !$\n", 0},
		{"long text", "echo " + long + " | wc -c", "10001\n", 0},
		{"control bytes", "printf '%s' 'a\x01b\x15c\x7fd\x03e\x04f' | od -An -tx1 | tr -s ' '", " 61 01 62 15 63 7f 64 03 65 04 66\n", 0},
		{"quotes and backslashes", `printf '%s\n' "a'b" 'c"d' 'e\f' "g\\h"`, "a'b\nc\"d\ne\\f\ng\\h\n", 0},
		{"crlf", "echo one\r\necho two\r\n", "one\ntwo\n", 0},
		{"utf-8", "echo 'héllo wörld ✓'", "héllo wörld ✓\n", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := bash(t, h, "a", c.command)
			if c.status == 0 {
				wantText(t, res, c.want)
			}
		})
	}
	// Text bash cannot finish reading is cancelled as Ctrl-C would: what it
	// had read of the incomplete command does not run. Lines before it that
	// were whole commands ran, as in a script, and the answer is a script's:
	// bash's syntax error, status 2 (issue 16 §12).
	for _, c := range []struct {
		name, command string
		ran           bool
	}{
		{"unterminated quote", "touch ran; echo 'never closed", false},
		{"unterminated heredoc", "touch ran; cat <<EOF\nbody", false},
		{"unterminated quote over lines", "touch ran\necho 'never\nclosed", true},
		{"unterminated compound", "touch ran\nif true; then\n  echo inside", true},
		{"trailing pipe", "touch ran | ", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bash(t, h, "a", "cd "+dir)
			res := bash(t, h, "a", c.command)
			if exitCode(res) != "2" || res.NotRun == c.ran || !strings.Contains(res.Text, "incomplete") ||
				!strings.Contains(res.Text, "syntax error: unexpected end of file") ||
				strings.Contains(res.Text, "body") || strings.Contains(res.Text, "inside") {
				t.Fatalf("got %q %+v", res.Text, res)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); (err == nil) != c.ran {
				t.Fatalf("the first line ran: %v, want %v", err == nil, c.ran)
			}
		})
	}
	// The shell is still the same one and still works.
	wantText(t, bash(t, h, "a", "echo ok"), "ok\n")
}

// Changing the prompt, PROMPT_COMMAND, set -u, history expansion, traps,
// aliases or xtrace never breaks the next call.
func TestPromptMachineryCannotBeBroken(t *testing.T) {
	h := newHost(t, nil)
	steps := []string{
		"PS1='custom> '; PS2='more> '",
		"PROMPT_COMMAND='echo hijacked; false'",
		"unset PROMPT_COMMAND",
		"set -u",
		"unset PS1 PS2", // under set -u: the prompt function must not expand them bare
		"PS2='more> '",
		"PS1=': \\w; '", // a prompt that starts like the fast path's separator
		"PS1=; PS2=':> '",
		"set -H",
		"echo \"bang!\"",
		"trap 'echo exiting' EXIT; trap '' INT",
		"alias eval='echo nope'; alias builtin='echo nope'; alias printf='echo nope'; shopt -s expand_aliases",
		"set -e; true",
		"set +e",
	}
	for _, s := range steps {
		res := bash(t, h, "a", s)
		if res.ExitCode == nil || res.WaitingForInput || res.TimedOut {
			t.Fatalf("%q broke the call: %+v", s, res)
		}
		want := "ok\n"
		if strings.HasPrefix(s, "PROMPT_COMMAND") {
			// bash runs it before each prompt, as in a terminal; it leaves
			// $? alone.
			want = "ok\nhijacked\n"
		}
		wantText(t, bash(t, h, "a", "echo ok"), want)
	}
	// A long command goes as continuation lines, where bash prints PS2.
	bash(t, h, "a", "PS2=':> '")
	long := "echo " + strings.Repeat("x", 3000) + " | wc -c"
	wantText(t, bash(t, h, "a", long), "3001\n")
	// xtrace: the user's commands are traced, our machinery is not.
	bash(t, h, "a", "set -x")
	for _, cmd := range []string{"echo traced", "PS1='traced> '", "echo traced"} {
		// The prompt after the PS1 change takes the slow path, under -x.
		res := bash(t, h, "a", cmd)
		if strings.Contains(res.Text, "__dsh") || (cmd == "echo traced") != strings.Contains(res.Text, "traced\n") ||
			(cmd == "echo traced" && strings.Contains(res.Text, "PS1")) {
			t.Fatalf("xtrace output of %q: %q", cmd, res.Text)
		}
	}
	bash(t, h, "a", "set +x")
	if got := bash(t, h, "a", "echo $PS1"); strings.Contains(got.Text, "custom") {
		t.Fatalf("PS1 was not re-asserted: %q", got.Text)
	}
}

// Output that looks like markers, for this shell or another, is output.
func TestMarkerLikeOutputIsOutput(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "true")
	cmds := []string{
		`printf '\036DSH0123456789abcdef:1:0\036\n'`,
		`printf '\036DSH\036\036'; printf '\036DSH'; echo`,
		`head -c 3000 /dev/urandom | tr -dc '\036a-z' | wc -c`,
	}
	for _, c := range cmds {
		res := bash(t, h, "a", c)
		if res.ExitCode == nil || *res.ExitCode != 0 {
			t.Fatalf("%q: %+v", c, res)
		}
	}
	res := bash(t, h, "a", `printf 'x\036DSH0123456789abcdef:1:0\036y'`)
	wantText(t, res, "x\x1eDSH0123456789abcdef:1:0\x1ey")
	wantText(t, bash(t, h, "a", "echo next"), "next\n")
}

func TestShellDeathIsReportedAndTheNextCallStartsFresh(t *testing.T) {
	h := newHost(t, nil)
	cases := []struct {
		command, want string
		code          string // the call's exit_code: the shell's
	}{
		{"exit 3", "[shell exited: code 3]", "3"},
		{"exec sh -c 'exit 4'", "[shell exited: code 4]", "4"},
		{"set -e; false", "[shell exited: code 1]", "1"},
		{"kill -9 $$", "[shell killed by signal: SIGKILL]", "137"},
		{"exec true", "[shell exited: code 0]", "0"},
	}
	for _, c := range cases {
		t.Run(c.command, func(t *testing.T) {
			bash(t, h, "a", "export MARK=still-here")
			sid := shellPID(t, h, "a")
			res := bash(t, h, "a", c.command)
			if !strings.Contains(res.Text, c.want) || !res.ShellReset || exitCode(res) != c.code ||
				!strings.Contains(res.Text, "next call starts a fresh shell") {
				t.Fatalf("got %q %+v", res.Text, res)
			}
			testkit.SessionGone(t, sid)
			next := bash(t, h, "a", "echo \"[${MARK-}]\"")
			if !next.FreshShell || !strings.HasSuffix(next.Text, "[]\n") {
				t.Fatalf("next call: %q %+v", next.Text, next)
			}
		})
	}
}

// A command that waits for terminal input returns early, proven by /proc;
// the next call interrupts it first and says so.
func TestWaitingForInputReturnsEarly(t *testing.T) {
	h := newHost(t, nil)
	for _, c := range []struct {
		command, who string
	}{
		{"echo before; read x", "`bash`"},
		{"echo before; cat", "`cat`"},
		{"echo before; python3 -q", "`python3`"},
		{"echo before; head -n 1", "`head`"},
		{"echo before; read x < /dev/tty", "`bash`"},
		{"echo before; python3 -c 'open(\"/dev/tty\").readline()'", "`python3`"},
	} {
		t.Run(c.command, func(t *testing.T) {
			bash(t, h, "a", "cd /tmp")
			res := bash(t, h, "a", c.command)
			if !res.WaitingForInput || !strings.HasPrefix(res.Text, "before\n") ||
				!strings.Contains(res.Text, c.who) || !strings.Contains(res.Text, "terminal_open") || res.ExitCode != nil {
				t.Fatalf("got %q %+v", res.Text, res)
			}
			next := bash(t, h, "a", "pwd")
			if !strings.Contains(next.Text, "SIGINT") || !strings.HasSuffix(next.Text, "/tmp\n") || exitCode(next) != "0" {
				t.Fatalf("next call: %q", next.Text)
			}
			if next.FreshShell {
				t.Fatalf("interrupting %s should not have cost the shell: %q", c.who, next.Text)
			}
		})
	}
}

// After `exec bash` the shell is a new, interactive bash that never prints
// our marker: the call returns early; the next call ends it and runs in a
// fresh shell.
func TestExecBashIsRecovered(t *testing.T) {
	h := newHost(t, nil)
	res := bash(t, h, "a", "exec bash --norc -i")
	if !res.WaitingForInput {
		t.Fatalf("got %q %+v", res.Text, res)
	}
	next := bash(t, h, "a", "echo alive")
	if !strings.HasSuffix(next.Text, "alive\n") || !next.FreshShell {
		t.Fatalf("next call: %q %+v", next.Text, next)
	}
}

// With bash.keepHeadOnly, long output keeps its first maxOutputChars.
func TestLongOutputKeepsItsBeginning(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.MaxOutputChars, c.Bash.KeepHeadOnly = 1000, true })
	res := bash(t, h, "a", "seq 1 100000")
	if !strings.HasPrefix(res.Text, "1\n2\n3\n") || res.ClippedBytes == 0 {
		t.Fatalf("got %.100q... clipped %d", res.Text, res.ClippedBytes)
	}
	full := seqOutput(100000)
	total := len(full)
	kept, _, _ := strings.Cut(res.Text, "[output clipped")
	want := full[:1000]
	if !strings.HasSuffix(want, "\n") {
		want += "\n" // the notice starts on a line of its own
	}
	if kept != want {
		t.Fatalf("kept %q..., want the first 1000 characters", kept[:50])
	}
	if want := int64(total - 1000); res.ClippedBytes != want {
		t.Fatalf("clipped %d bytes, want %d", res.ClippedBytes, want)
	}
	if !strings.Contains(res.Text, fmt.Sprintf("%d more bytes", total-1000)) || exitCode(res) != "0" {
		t.Fatalf("notice: %q", res.Text[len(res.Text)-200:])
	}
}

// By default long output keeps its first and its last half, the notice
// between them (issue 16 §10): a command's verdict is at its end.
func TestLongOutputKeepsItsEnds(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.MaxOutputChars = 1000 })
	res := bash(t, h, "a", "seq 1 100000; echo 'RESULT: 42'")
	full := seqOutput(100000) + "RESULT: 42\n"
	head, rest, ok := strings.Cut(res.Text, "[output clipped: ")
	notice, end, _ := strings.Cut(rest, "]\n")
	if !ok || head != full[:500] && head != full[:500]+"\n" {
		t.Fatalf("head %q", head)
	}
	if !strings.HasSuffix(full, end) || !strings.HasSuffix(end, "99999\n100000\nRESULT: 42\n") || len(end) > 500 || exitCode(res) != "0" {
		t.Fatalf("end %q", end)
	}
	if left := int64(len(full) - 500 - len(end)); res.ClippedBytes != left || !strings.Contains(notice, fmt.Sprintf("%d bytes were left out here", left)) {
		t.Fatalf("clipped %d, notice %q, want %d", res.ClippedBytes, notice, left)
	}
}

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

func TestClippingNeverSplitsACharacter(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.MaxOutputChars, c.Bash.KeepHeadOnly = 7, true })
	// Three-byte characters: a byte-based cut would land inside one.
	res := bash(t, h, "a", "printf '✓%.0s' $(seq 1 20)")
	ends := bash(t, newHost(t, func(c *config.Config) { c.Bash.MaxOutputChars = 7 }), "a", "printf '✓%.0s' $(seq 1 20)")
	head, end, _ := strings.Cut(ends.Text, "\n[output clipped: ")
	_, end, _ = strings.Cut(end, "]\n")
	if head != strings.Repeat("✓", 4) || end != strings.Repeat("✓", 3) || !utf8.ValidString(ends.Text) || ends.ClippedBytes != 13*3 {
		t.Fatalf("head and end: %q (clipped %d)", ends.Text, ends.ClippedBytes)
	}
	kept, _, _ := strings.Cut(res.Text, "\n[output clipped")
	if kept != strings.Repeat("✓", 7) || !utf8.ValidString(res.Text) {
		t.Fatalf("got %q", res.Text)
	}
	if res.ClippedBytes != 13*3 {
		t.Fatalf("clipped %d bytes, want %d", res.ClippedBytes, 13*3)
	}
}

func TestInvalidUTF8AndNULNeverBreakAnything(t *testing.T) {
	h := newHost(t, nil)
	res := bash(t, h, "a", `printf 'a\xffb\x00c\xe2\x9cd'`)
	if !utf8.ValidString(res.Text) || res.Text != "a\uFFFDb\u2400c\uFFFD\uFFFDd" {
		t.Fatalf("got %q", res.Text)
	}
	wantText(t, bash(t, h, "a", "echo fine"), "fine\n")
}

func TestTimeoutKeepsPartialOutputAndResets(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "export MARK=old")
	sid := shellPID(t, h, "a")
	bash(t, h, "a", "nohup sleep 1000 >/dev/null 2>&1 &")
	res := bashArgs(t, h, "a", shell.Args{Command: "echo partial; sleep 1000", TimeoutMs: 300})
	if !res.TimedOut || !res.ShellReset || !res.IsError || !strings.HasPrefix(res.Text, "partial\n") ||
		!strings.Contains(res.Text, "timed out after 300 ms") {
		t.Fatalf("got %q %+v", res.Text, res)
	}
	testkit.SessionGone(t, sid)
	next := bash(t, h, "a", "echo \"[${MARK-}]\"")
	if !next.FreshShell || !strings.HasSuffix(next.Text, "[]\n") {
		t.Fatalf("next call: %q", next.Text)
	}
}

// The call timer outlives its call: a short deadline of a finished call
// never cuts a later call short, whether the timer is re-armed before it
// would fire or fires while the shell is idle.
func TestAFinishedCallsDeadlineNeverHitsTheNext(t *testing.T) {
	h := newHost(t, nil)
	wantText(t, bashArgs(t, h, "a", shell.Args{Command: "echo quick", TimeoutMs: 200}), "quick\n")
	wantText(t, bash(t, h, "a", "sleep 0.4; echo second"), "second\n") // re-armed at once
	wantText(t, bashArgs(t, h, "a", shell.Args{Command: "echo quick", TimeoutMs: 200}), "quick\n")
	// Another agent's call outlasts the 200 ms while a's shell is idle.
	wantText(t, bash(t, h, "b", "sleep 0.4; echo other"), "other\n")
	res := bash(t, h, "a", "sleep 0.3; echo third")
	if res.TimedOut || res.FreshShell || res.Text != "third\n" {
		t.Fatalf("%q %+v", res.Text, res)
	}
}

func TestConfiguredTimeoutCapsTheCallTimeout(t *testing.T) {
	h := newHost(t, func(c *config.Config) { c.Bash.TimeoutMs = 200 })
	res := bashArgs(t, h, "a", shell.Args{Command: "sleep 1000", TimeoutMs: 60000})
	if !res.TimedOut || !strings.Contains(res.Text, "after 200 ms") {
		t.Fatalf("got %q", res.Text)
	}
}

// Closing or resetting a shell leaves no process it started, however it
// tried to escape SIGHUP or the session.
func TestNoProcessSurvivesAReset(t *testing.T) {
	h := newHost(t, nil)
	sid := shellPID(t, h, "a")
	bash(t, h, "a", "nohup sleep 1001 >/dev/null 2>&1 &\nsleep 1002 & disown\n(trap '' HUP; sleep 1003) &\nsetsid -w true\n"+
		"setsid sleep 1007 & (setsid sleep 1008 &)")
	// Both escapees run before the reset: one the shell's child in a session
	// of its own, one handed to init by a double fork.
	testkit.Eventually(t, "the setsid escapees", func() (bool, string) {
		n := len(testkit.CommandsRunning("sleep 1007", "sleep 1008"))
		return n == 2, fmt.Sprintf("%d of 2", n)
	})
	res := bash(t, h, "a", "exit")
	if !res.ShellReset {
		t.Fatalf("%+v", res)
	}
	testkit.SessionGone(t, sid)
	testkit.Eventually(t, "the setsid escapees gone", func() (bool, string) {
		left := testkit.CommandsRunning("sleep 1007", "sleep 1008")
		return len(left) == 0, strings.Join(left, ", ")
	})

	sid = shellPID(t, h, "a")
	bash(t, h, "a", "nohup sleep 1004 >/dev/null 2>&1 & disown")
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	if err := h.StopAgent(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// StopAgent returns only when the processes are gone: look right away.
	if left, err := procfs.Session(sid); err != nil || len(left) > 0 {
		t.Fatalf("after StopAgent: %v", left)
	}
}

// Output printed by background jobs between calls opens the next result.
func TestOutputBetweenCallsOpensTheNextResult(t *testing.T) {
	h := newHost(t, nil)
	gate, openGate := testkit.Gate(t)
	fifo, printed := testkit.Signal(t)
	// The job prints only after the call that started it has returned.
	bash(t, h, "a", "(read go < "+gate+"; echo late news; echo done > "+fifo+") &")
	openGate("go")
	printed()
	res := bash(t, h, "a", "echo now")
	// bash's notice that the job is done comes before the first prompt
	// after the job ended: at the end of this call, or of a later one.
	const want = "[output since the previous call]\nlate news\n[end of output since the previous call]\nnow\n"
	if rest, ok := strings.CutPrefix(res.Text, want); !ok || (rest != "" && !strings.HasPrefix(rest, "[1]+  Done")) {
		t.Fatalf("got %q", res.Text)
	}
}

// The wait proof must not fire on commands that simply run, even with many
// agents competing for two cores.
func TestNoFalseWaitUnderLoad(t *testing.T) {
	h := newHost(t, nil)
	const agents, calls = 40, 25
	atOnce(t, agents, func(i int) error {
		id := fmt.Sprintf("load-%d", i)
		for range calls {
			ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
			res, err := h.Bash(ctx, id, shell.Args{Command: "echo " + id})
			cancel()
			if err != nil || res.Text != id+"\n" {
				return fmt.Errorf("%s: %q %v", id, res.Text, err)
			}
		}
		return nil
	})
}

func TestBadArgumentsAreErrorsNamingTheProblem(t *testing.T) {
	h := newHost(t, nil)
	cases := []struct{ args, want string }{
		{`{}`, `"command" is missing`},
		{`{"timeout_ms": 5}`, `"command" is missing`},
		{`{"command": null}`, `"command" is missing`},
		{`{"command": "ls", "timeout": 5}`, `unknown field "timeout"`},
		{`{"command": 5}`, `"command" must be a string, not number`},
		{`{"command": "ls", "COMMAND": "x"}`, `unknown field "COMMAND" (did you mean "command"?)`},
		{`{"command": "sleep 1", "timeout_ms": 2.5}`, `"timeout_ms" must be a whole number`},
		{`{"command": "ls", "timeout_ms": -1}`, `"timeout_ms" is -1`},
		{`{"command": "ls", "timeout_ms": 1e30}`, `"timeout_ms" is 1e30, which is out of range for it (at most 9223372036854775807)`},
		{`{"command": "ls", "command": "pwd"}`, `field "command" appears twice`},
		{`{"command": "a\u0000b"}`, "NUL byte at offset 1"},
		{`not json`, "invalid arguments"},
		{``, "arguments missing"},
	}
	for _, c := range cases {
		text, isErr, _ := call(t, h, "a", "bash", c.args)
		if !isErr || !strings.Contains(text, c.want) {
			t.Errorf("args %s: got %q (error %v), want it to mention %q", c.args, text, isErr, c.want)
		}
	}
	text, isErr, data := call(t, h, "a", "bash", `{"command":"echo ok"}`)
	if isErr || text != "ok\n" || data["exit_code"] != float64(0) {
		t.Fatalf("good call after bad ones: %q %v %v", text, isErr, data)
	}
}

// Redirecting the shell's own output or changing its terminal modes does not
// cost the marker or echo commands back.
func TestShellOutputRedirectionAndTerminalModes(t *testing.T) {
	h := newHost(t, nil)
	res := bash(t, h, "a", "exec 3>&1 >/dev/null")
	if exitCode(res) != "0" {
		t.Fatalf("%+v", res)
	}
	wantText(t, bash(t, h, "a", "echo hidden; echo shown >&3"), "shown\n")
	bash(t, h, "a", "exec >&3 3>&-")
	wantText(t, bash(t, h, "a", "echo visible again"), "visible again\n")
	bash(t, h, "a", "stty echo onlcr -icanon")
	long := strings.Repeat("y", 3000)
	wantText(t, bash(t, h, "a", "echo one\necho "+long+" | wc -c"), "one\n3001\n")
}

// A program that checks the keyboard between bits of work (a short select
// timeout) is working, not waiting: it is not cut short.
func TestPollingProgramIsNotTakenForWaiting(t *testing.T) {
	h := newHost(t, nil)
	res := bash(t, h, "a", `python3 -c '
import select, sys
for i in range(20):
    select.select([sys.stdin], [], [], 0.02)
print("finished")'`)
	wantText(t, res, "finished\n")
}

// A shell that was already on its way out when a command was written did not
// run it: the command runs in a fresh shell, and the result says so.
func TestCommandWrittenToAnExitingShellRunsInAFreshOne(t *testing.T) {
	h := newHost(t, nil)
	file := filepath.Join(t.TempDir(), "did-run")
	// Closing stdin makes bash exit at its next prompt, after the EXIT
	// trap's pause: the next command is written while it is leaving.
	bash(t, h, "a", "trap 'sleep 0.3' EXIT; exec 0<&-; echo closed")
	res := bash(t, h, "a", "touch "+file+"; echo ran")
	if !strings.HasSuffix(res.Text, "ran\n") || !res.FreshShell || exitCode(res) != "0" {
		t.Fatalf("%q %+v", res.Text, res)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
}
