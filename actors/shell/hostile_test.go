package shell_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// Commands that change what the old protocol relied on: builtins, functions,
// prompts, options, traps, terminal modes. For each, the state set before
// (a directory and a variable) survives, the next call runs its command and
// reports its own status, and no marker shows.
func TestHostileShellStateKeepsTheProtocol(t *testing.T) {
	h := newHost(t, nil)
	const probe = "echo \"[$MARK]\"; pwd; touch ran-here; (exit 3)"
	cases := []struct {
		name  string
		setup []string
		// probe and want override the default check.
		probe string
		want  func(dir string) string
	}{
		{name: "eval redefined", setup: []string{"eval() { :; }"}},
		{name: "eval disabled", setup: []string{"enable -n eval"}},
		{name: "printf disabled", setup: []string{"enable -n printf"}},
		{name: "builtin disabled", setup: []string{"enable -n builtin"}},
		{name: "builtin redefined", setup: []string{"builtin() { :; }"}},
		{name: "printf redefined", setup: []string{"printf() { :; }"}},
		{name: "shopt and set redefined", setup: []string{"shopt() { :; }; set() { :; }; declare() { :; }"}},
		{name: "readonly PS1", setup: []string{"readonly PS1='$ '"}},
		{name: "readonly PS2", setup: []string{"declare -r PS2='> '"}},
		{name: "readonly PS1 and PS2", setup: []string{"readonly PS1='$ ' PS2='> '"}},
		{name: "FUNCNEST and PS1", setup: []string{"FUNCNEST=1; PS1='x> '"}},
		{name: "PS1 around the marker", setup: []string{`PS1="(venv) $PS1 \$ "`}},
		{name: "PS1 unset under set -u", setup: []string{"set -u", "unset PS1 PS2"}},
		{name: "promptvars off", setup: []string{"shopt -u promptvars"}},
		{name: "posix mode", setup: []string{"set -o posix"}},
		{name: "PROMPT_COMMAND that fails", setup: []string{"PROMPT_COMMAND='(exit 9)'"}},
		{name: "stderr to /dev/null", setup: []string{"exec 2>/dev/null"}},
		{name: "stderr to a file", setup: []string{"exec 2>err.log"}},
		{name: "stdout to /dev/null", setup: []string{"exec 3>&1 >/dev/null"},
			probe: "echo \"[$MARK]\" >&3; pwd >&3; touch ran-here; (exit 3)"},
		{name: "DEBUG trap", setup: []string{"trap 'echo DBG' DEBUG"},
			// Before each simple command of the user's, and nothing else (a
			// subshell's commands do not inherit the trap).
			want: func(dir string) string { return "DBG\n[kept]\nDBG\n" + dir + "\nDBG\n[exit code: 3]" }},
		{name: "ERR trap, errtrace", setup: []string{"set -E; trap 'echo ERR' ERR"},
			want: func(dir string) string { return "[kept]\n" + dir + "\nERR\n[exit code: 3]" }},
		{name: "RETURN trap, functrace", setup: []string{"trap 'echo RET' RETURN; set -o functrace"}},
		{name: "xtrace", setup: []string{"set -x"},
			want: func(dir string) string {
				return "+ echo '[kept]'\n[kept]\n+ pwd\n" + dir + "\n+ touch ran-here\n+ exit 3\n[exit code: 3]"
			}},
		{name: "vi mode", setup: []string{"set -o vi"}},
		{name: "emacs mode", setup: []string{"set -o emacs"}},
		{name: "vi mode and back", setup: []string{"set -o vi", "set +o vi"}},
		{name: "history expansion on", setup: []string{"set -H"}},
		{name: "terminal modes", setup: []string{"stty echo onlcr icanon olcuc -isig"}},
		{name: "every variable unset", setup: []string{"for v in $(compgen -v); do unset $v; done 2>/dev/null; MARK=kept PATH=/usr/bin:/bin"}},
		{name: "IFS and PATH", setup: []string{"IFS=x; PATH=/nonexistent"},
			probe: "echo \"[$MARK]\"; pwd; > ran-here; (exit 3)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			agent := "h-" + strings.NewReplacer(" ", "-", "/", "_", ",", "").Replace(c.name)
			dir := t.TempDir()
			bash(t, h, agent, "cd "+dir+"; MARK=kept")
			sid := shellPID(t, h, agent)
			for _, s := range c.setup {
				res := bash(t, h, agent, s)
				if res.WaitingForInput || res.TimedOut || res.ShellReset || res.ExitCode == nil {
					t.Fatalf("setup %q: %q %+v", s, res.Text, res)
				}
			}
			p := probe
			if c.probe != "" {
				p = c.probe
			}
			want := "[kept]\n" + dir + "\n[exit code: 3]"
			if c.want != nil {
				want = c.want(dir)
			}
			for range 2 { // the state holds on
				os.Remove(filepath.Join(dir, "ran-here"))
				res := bash(t, h, agent, p)
				if res.Text != want || exitCode(res) != "3" || res.FreshShell || res.ShellReset {
					t.Fatalf("probe: got %q %+v, want %q", res.Text, res, want)
				}
				if _, err := os.Stat(filepath.Join(dir, "ran-here")); err != nil {
					t.Fatalf("the probe did not run: %v", err)
				}
				if strings.Contains(res.Text, "DSH") || strings.Contains(res.Text, "\x1e") {
					t.Fatalf("a marker in the result: %q", res.Text)
				}
			}
			// Several lines, control bytes and an incomplete text work too.
			multi := bash(t, h, agent, "x=$'a\\tb\\001'\necho \"${#x}\"")
			if multi.Text != "4\n" && !strings.Contains(c.name, "xtrace") && !strings.Contains(c.name, "DEBUG") && c.probe == "" {
				t.Fatalf("multi-line: %q %+v", multi.Text, multi)
			}
			if got, err := procfs.Session(sid); err != nil || len(got) == 0 {
				t.Fatalf("the shell (session %d) is gone: %v %v", sid, got, err)
			}
		})
	}
}

// When the protocol's fallback needs what a command took away, the shell is
// reset, the call says why, and the next call runs in a fresh shell.
func TestProtocolBrokenBeyondRepairIsAnnounced(t *testing.T) {
	h := newHost(t, nil)
	for _, setup := range []string{
		"enable -n builtin; PS1='x> '",
		"builtin() { :; }; PS1='x> '",
	} {
		agent := fmt.Sprintf("b%d", len(setup))
		bash(t, h, agent, "MARK=old")
		res := bash(t, h, agent, setup)
		if !res.ShellReset || !res.StatusUnknown || !strings.Contains(res.Text, "`builtin`") || !strings.Contains(res.Text, "reset") {
			t.Fatalf("%q: %q %+v", setup, res.Text, res)
		}
		next := bash(t, h, agent, "echo \"[${MARK-}]\"")
		if !next.FreshShell || next.Text != "[]\n" {
			t.Fatalf("next: %q %+v", next.Text, next)
		}
	}
}

// stty olcuc upper-cases output, the marker included: the marker's lead
// and nonce are upper case already, and the next call gets the modes back.
func TestUpperCasingTerminalNeverShowsTheMarker(t *testing.T) {
	h := newHost(t, nil)
	if got := bash(t, h, "a", "stty olcuc; echo hi"); got.Text != "HI\n" || exitCode(got) != "0" {
		t.Fatalf("%q %+v", got.Text, got)
	}
	wantText(t, bash(t, h, "a", "echo next"), "next\n")
}

// Completion cannot be forged: a marker printed by the command or a
// background job neither ends a call early nor sets its status.
func TestCompletionCannotBeForged(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "g", "true")
	// bash expands its own prompt, marker and all, on request.
	// The call does not end at the forged marker; its status is bash's or
	// unknown, never the forger's.
	res := bash(t, h, "g", `printf '%s' "${PS1@P}"; sleep 0.3; echo real-output; (exit 4)`)
	if !strings.HasPrefix(res.Text, "real-output\n") || (!res.StatusUnknown && exitCode(res) != "4") {
		t.Fatalf("forged then slept: %q %+v", res.Text, res)
	}
	// Forged with a made-up command number and status.
	res = bash(t, h, "g", `n=${PS1:4:16}; printf '\036DSH%s:99:42:%d:=\036' "$n" ${#PS1}; echo real`)
	if !regexp.MustCompile(`^real\n\[\d+ bytes were left out`).MatchString(res.Text) || exitCode(res) != "0" {
		t.Fatalf("forged number: %q %+v", res.Text, res)
	}
	wantText(t, bash(t, h, "g", "echo second"), "second\n")
	// Forged right before bash's own: never the forger's status.
	for range 20 {
		res = bash(t, h, "g", `printf '%s' "${PS1@P}"; (exit 5)`)
		if !res.StatusUnknown && exitCode(res) != "5" {
			t.Fatalf("a forged marker set the status: %q %+v", res.Text, res)
		}
	}
	// A background job prints markers of every plausible number while the
	// calls run.
	bash(t, h, "g", `(set +x; while :; do q=${PS1@P}; printf '%s%s%s' "$q" "${q/:[0-9]*:/:$((${q:21:3}+1)):}" "$q"; done) > /dev/tty 2>&1 & disown`)
	for i := range 30 {
		res := bash(t, h, "g", fmt.Sprintf("sleep 0.0%d; (exit 7)", i%3))
		if !res.StatusUnknown && exitCode(res) != "7" {
			t.Fatalf("call %d: a background job's marker set the status: %q %+v", i, res.Text, res)
		}
		if res.WaitingForInput || res.TimedOut {
			t.Fatalf("call %d: %+v", i, res)
		}
	}
}

// Programs that ignore SIGINT and end-of-file (less, vi) are ended as a
// foreground job; the shell and its state stay.
func TestWaitingTUIsEndWithoutAReset(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	bash(t, h, "a", "cd "+dir+"; MARK=kept")
	for _, prog := range []string{"less /etc/passwd", "vi file.txt"} {
		res := bash(t, h, "a", prog)
		if !res.WaitingForInput {
			t.Fatalf("%s: %q %+v", prog, res.Text, res)
		}
		next := bash(t, h, "a", "echo \"[$MARK]\"; pwd")
		if next.FreshShell || next.ShellReset || !strings.HasSuffix(next.Text, "[kept]\n"+dir+"\n") {
			t.Fatalf("after %s: %q %+v", prog, next.Text, next)
		}
	}
}

// Text bash cannot finish reading, when SIGINT cannot cancel it (ignored,
// or trapped, which keeps bash reading): the reset says why.
func TestIncompleteTextSIGINTCannotCancelIsAnnounced(t *testing.T) {
	h := newHost(t, nil)
	for agent, c := range map[string]struct{ trap, why string }{
		"ignored": {"trap '' INT", "ignores SIGINT"},
		"trapped": {`trap "echo INTTRAP" INT`, "trap on INT"},
	} {
		bash(t, h, agent, c.trap)
		res := bash(t, h, agent, `echo "open`)
		if !res.ShellReset || !strings.Contains(res.Text, c.why) {
			t.Fatalf("%s: %q %+v", agent, res.Text, res)
		}
		if next := bash(t, h, agent, "echo ok"); !next.FreshShell || !strings.HasSuffix(next.Text, "ok\n") {
			t.Fatalf("%s: %q %+v", agent, next.Text, next)
		}
	}
}

// Blank text runs as bash runs it: nothing, status 0.
func TestBlankCommandsRun(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "false")
	for _, c := range []string{"", "\n  \n", "# just a comment", "  # one\n# two\n"} {
		if res := bash(t, h, "a", c); res.Text != "" || exitCode(res) != "0" || res.IsError || res.NotRun {
			t.Errorf("%q: %q %+v", c, res.Text, res)
		}
	}
	// A syntax error is bash's, and nothing of it ran.
	res := bash(t, h, "a", "fi")
	if exitCode(res) != "2" || !res.NotRun || !strings.Contains(res.Text, "syntax error") {
		t.Fatalf("%q %+v", res.Text, res)
	}
	// History expansion that fails runs nothing, and does not claim 0.
	bash(t, h, "a", "set -H")
	res = bash(t, h, "a", "echo !nosuchevent")
	if !res.NotRun || exitCode(res) == "0" || !strings.Contains(res.Text, "event not found") {
		t.Fatalf("%q %+v", res.Text, res)
	}
}

// Agent shells and terminals neither read nor write the host user's
// history, unless the configuration says so.
func TestHostHistoryStaysPrivate(t *testing.T) {
	env, histfile := hostHome(t)
	h := hosttest.Start(t, nil, host.Options{Env: env})
	bash(t, h, "a", "echo agent-command-1")
	if res := bash(t, h, "a", "history"); strings.Contains(res.Text, "SECRET") || !strings.Contains(res.Text, "agent-command-1") {
		t.Fatalf("history: %q", res.Text)
	}
	bash(t, h, "a", "exit")
	text, _, _ := call(t, h, "a", "terminal_open", `{}`)
	if !strings.Contains(text, "t1") {
		t.Fatalf("terminal_open: %q", text)
	}
	out, _, _ := call(t, h, "a", "terminal_send", `{"terminal_id":"t1","text":"history; echo terminal-command","keys":["Enter"]}`)
	if !strings.Contains(out, "terminal-command") {
		t.Fatalf("terminal: %q", out)
	}
	out2, _, _ := call(t, h, "a", "terminal_send", `{"terminal_id":"t1","text":"exit","keys":["Enter"]}`)
	if out += out2; strings.Contains(out, "SECRET") {
		t.Fatalf("the terminal's bash read the host history: %q", out)
	}
	if b, err := os.ReadFile(histfile); err != nil || string(b) != "echo SECRET-OF-THE-HOST\n" {
		t.Fatalf("the host history changed: %q %v", b, err)
	}

}

// Allowed by the configuration, the shell sees the host user's history.
func TestHostHistoryWhenAllowed(t *testing.T) {
	env, _ := hostHome(t)
	h := hosttest.Start(t, func(c *config.Config) { c.Bash.HostHistory = true }, host.Options{Env: env})
	if res := bash(t, h, "b", "history"); !strings.Contains(res.Text, "SECRET") || strings.Contains(res.Text, "PS1") {
		t.Fatalf("with hostHistory: %q", res.Text)
	}
}

// hostHome is an environment whose HOME holds a bash history.
func hostHome(t *testing.T) (env []string, histfile string) {
	home := t.TempDir()
	histfile = filepath.Join(home, ".bash_history")
	if err := os.WriteFile(histfile, []byte("echo SECRET-OF-THE-HOST\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env = []string{"HOME=" + home}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return env, histfile
}

// A missing command is an error; the Go API has no "missing", so blank
// Args run.
func TestBlankArgsThroughTheGoAPI(t *testing.T) {
	h := newHost(t, nil)
	wantText(t, bashArgs(t, h, "a", shell.Args{}), "")
}

// A job that leaves the session (setsid forks, the parent exits) as bash
// itself exits is found and killed: the scan of /proc must not miss a child
// forked after /proc was listed by a parent dead before it was read.
func TestSetsidJobOfAnExitingShellIsKilled(t *testing.T) {
	h := newHost(t, nil)
	for i := range 10 {
		res := bash(t, h, "a", fmt.Sprintf("setsid sleep 40%d & exit 0", i))
		if !res.ShellReset {
			t.Fatalf("%q %+v", res.Text, res)
		}
		testkit.Eventually(t, "the setsid job killed", func() (bool, string) {
			// Before it executes sleep, the job is setsid's forked child.
			left := testkit.CommandsRunning(fmt.Sprintf("sleep 40%d", i), fmt.Sprintf("setsid sleep 40%d", i))
			return len(left) == 0, strings.Join(left, ",")
		})
	}
}
