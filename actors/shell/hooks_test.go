package shell_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// Hooks of the user's that bash runs around every command (a DEBUG trap,
// PROMPT_COMMAND) and how they meet the runtime's own lines (issue 16 §5,
// §11).

// A DEBUG trap under shopt -s extdebug that returns non-zero makes bash
// skip every command, the runtime's status query and `exit` included: each
// later call was answered with status 0 and no output. The call that finds
// it says so, with no status, and the next call runs in a fresh shell
// (issue 16 §5).
func TestASkippingDebugTrapIsSaid(t *testing.T) {
	h := newHost(t, nil)
	for i, setup := range [][]string{
		{"trap false DEBUG; shopt -s extdebug"},
		{"shopt -s extdebug", "trap false DEBUG"},
		{"shopt -s extdebug; set +T +E", "trap 'return 1' DEBUG"},
		{"PS1='$ '; shopt -s extdebug", "trap false DEBUG"},
	} {
		agent := fmt.Sprintf("s%d", i)
		bash(t, h, agent, "X=old")
		var res = bash(t, h, agent, setup[0])
		for _, s := range setup[1:] {
			if res.ShellReset || res.StatusUnknown || exitCode(res) != "0" {
				t.Fatalf("%q: setup %q: %q %+v", setup, s, res.Text, res)
			}
			res = bash(t, h, agent, s)
		}
		if !res.StatusUnknown || res.ExitCode != nil || !res.ShellReset || !strings.Contains(res.Text, "skip") ||
			!strings.Contains(res.Text, "extdebug") {
			t.Fatalf("%q: %q %+v", setup, res.Text, res)
		}
		next := bash(t, h, agent, "echo \"[${X-}]\"; (exit 3)")
		if next.Text != "[]\n[exit code: 3]" || !next.FreshShell || exitCode(next) != "3" {
			t.Fatalf("%q: next: %q %+v", setup, next.Text, next)
		}
		if res := bash(t, h, agent, "exit 4"); res.ShellExited == "" || exitCode(res) != "4" {
			t.Fatalf("%q: exit: %q %+v", setup, res.Text, res)
		}
	}
}

// A DEBUG trap under extdebug that lets commands run (a debugger's, a
// preexec hook's) changes nothing: statuses are bash's and the shell stays.
func TestADebugTrapThatRunsCommandsUnderExtdebug(t *testing.T) {
	h := newHost(t, nil)
	sid := shellPID(t, h, "a")
	bash(t, h, "a", "X=kept; shopt -s extdebug; trap ': $BASH_COMMAND' DEBUG")
	for range 2 {
		if res := bash(t, h, "a", "echo $X; (exit 3)"); res.Text != "kept\n[exit code: 3]" || exitCode(res) != "3" {
			t.Fatalf("%q %+v", res.Text, res)
		}
		wantText(t, bash(t, h, "a", "echo a\necho b"), "a\nb\n")
	}
	bash(t, h, "a", "shopt -u extdebug; trap - DEBUG")
	wantText(t, bash(t, h, "a", "echo $X"), "kept\n")
	if got, _ := procfs.Session(sid); len(got) == 0 {
		t.Fatal("the shell was lost")
	}
}

// A DEBUG trap fires for every simple command bash runs at the top level,
// the runtime's status query too (and, under set -T, for the commands in
// its function): what it printed for those, and the prompt a command set,
// leaked into results. The user's own commands still show it (issue 16
// §11).
func TestADebugTrapShowsForTheUsersCommandsOnly(t *testing.T) {
	for _, verify := range []bool{false, true} {
		h := newHost(t, func(c *config.Config) { c.Bash.VerifyStatus = verify })
		for i, trap := range []string{"set -T; trap 'echo DBG' DEBUG", "trap 'echo DBG' DEBUG"} {
			agent := fmt.Sprintf("d%d", i)
			bash(t, h, agent, trap)
			wantText(t, bash(t, h, agent, "PS1='$ '; echo four"), "DBG\nDBG\nfour\n")
			wantText(t, bash(t, h, agent, "echo five"), "DBG\nfive\n")
			if res := bash(t, h, agent, `PS1="(venv) $PS1"; false`); res.Text != "DBG\nDBG\n[exit code: 1]" || exitCode(res) != "1" {
				t.Fatalf("verify %v, %q: %q %+v", verify, trap, res.Text, res)
			}
			// A trap that writes to the terminal itself sees the
			// runtime's commands (README), but the prompt never shows.
			bash(t, h, agent, "trap 'echo DBG >/dev/tty' DEBUG")
			if res := bash(t, h, agent, `PS1='$ '; echo x`); !strings.HasPrefix(res.Text, "DBG\nDBG\nx\n") || strings.Contains(res.Text, "$") {
				t.Fatalf("verify %v, %q: %q %+v", verify, trap, res.Text, res)
			}
			bash(t, h, agent, "trap 'echo DBG' DEBUG")
			wantText(t, bash(t, h, agent, "echo six\necho seven"), "DBG\nsix\nDBG\nseven\n")
		}
	}
}

// A PROMPT_COMMAND that sets PS1 at every prompt makes the runtime ask
// bash for the status after every line; the prompt after that question is
// the runtime's doing. With a prompt that changes from one prompt to the
// next, every result got a "[N bytes were left out]" notice (issue 16 §11).
func TestAPromptCommandThatSetsAChangingPS1LeavesNoNotice(t *testing.T) {
	h := newHost(t, nil)
	for i, pc := range []string{
		`PROMPT_COMMAND='PS1="$RANDOM \$ "'`,
		`PROMPT_COMMAND='PS1="\# \$ "'`,
		`PROMPT_COMMAND=('PS1="$RANDOM> "' 'PS2="$RANDOM>> "')`,
	} {
		agent := fmt.Sprintf("p%d", i)
		bash(t, h, agent, "X=kept; "+pc)
		for range 3 {
			wantText(t, bash(t, h, agent, "echo one"), "one\n")
			wantText(t, bash(t, h, agent, "echo $X\nfalse\necho two"), "kept\ntwo\n")
			if res := bash(t, h, agent, "(exit 5)"); res.Text != "[exit code: 5]" {
				t.Fatalf("%q: %q %+v", pc, res.Text, res)
			}
		}
		// The user's PROMPT_COMMAND is the user's again between calls.
		res := bash(t, h, agent, `declare -p PROMPT_COMMAND`)
		if !strings.Contains(res.Text, "PS1=") || strings.Contains(res.Text, "__dsh") {
			t.Fatalf("%q: %q", pc, res.Text)
		}
	}
}

// A PROMPT_COMMAND that prints (direnv's hook, a counter) had what it
// printed after the runtime's status query dropped, counted in a notice;
// what it prints for the user's commands shows, once per prompt of theirs
// (issue 16 §11).
func TestAPromptCommandThatPrintsIsShown(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `PROMPT_COMMAND='n=$((n+1)); echo "prompt $n"; PS1="\$ "'`)
	for i := range 3 {
		wantText(t, bash(t, h, "a", "echo one"), fmt.Sprintf("one\nprompt %d\n", i+2))
	}
	bash(t, h, "b", `PROMPT_COMMAND='echo direnv: loading .envrc; PS2="> "'`)
	for range 3 {
		wantText(t, bash(t, h, "b", "echo one"), "one\ndirenv: loading .envrc\n")
	}
	dir := t.TempDir()
	bash(t, h, "c", `h() { if [[ $PWD != "$last" ]]; then last=$PWD; [[ $PWD == */envrc ]] && echo 'direnv: loading .envrc'; fi; PS1="\w \$ "; }; PROMPT_COMMAND=h; mkdir `+dir+`/envrc`)
	wantText(t, bash(t, h, "c", "cd "+dir+"/envrc"), "direnv: loading .envrc\n")
	wantText(t, bash(t, h, "c", "cd ..; echo out"), "out\n")
	wantText(t, bash(t, h, "c", "cd envrc\necho in"), "direnv: loading .envrc\nin\n")
}

// PROMPT_COMMAND is set aside for the prompt after the runtime's status
// query and given back as it was: a sparse array with its attributes too.
func TestPromptCommandIsGivenBackAsItWas(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `PROMPT_COMMAND=([3]='echo three' [7]='PS1="$RANDOM> "'); export PROMPT_COMMAND`)
	for range 2 {
		wantText(t, bash(t, h, "a", "echo one"), "one\nthree\n")
	}
	wantText(t, bash(t, h, "a", "declare -p PROMPT_COMMAND"), `declare -ax PROMPT_COMMAND=([3]="echo three" [7]="PS1=\"\$RANDOM> \"")`+"\nthree\n")
}

// The status query's line is a group, so that a DEBUG trap's output for
// it goes nowhere; an alias of `{` that takes the group apart makes the
// status unknown, never the alias's, and later queries are not grouped.
func TestABraceAliasCannotAnswerForTheQuery(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", "X=kept")
	res := bash(t, h, "a", "shopt -s expand_aliases; alias '{'='true #'; PS1='$ '; (exit 4)")
	if !res.StatusUnknown || res.ExitCode != nil || strings.Contains(res.Text, "$ ") || res.ShellReset {
		t.Fatalf("%q %+v", res.Text, res)
	}
	for range 2 {
		if res := bash(t, h, "a", "echo $X; PS1='x '; false"); res.Text != "kept\n[exit code: 1]" {
			t.Fatalf("%q %+v", res.Text, res)
		}
	}
	bash(t, h, "a", "unalias '{'")
	wantText(t, bash(t, h, "a", "PS1='y '; echo $X"), "kept\n")
}

// A read-only PROMPT_COMMAND cannot be set aside and runs for the status
// query's prompt too: what it prints then shows as output, not in a notice.
func TestAReadOnlyPromptCommandThatPrintsIsShown(t *testing.T) {
	h := newHost(t, nil)
	bash(t, h, "a", `readonly PROMPT_COMMAND='n=$((n+1)); echo "prompt $n"; PS1="\$ "'`)
	for i := range 3 {
		wantText(t, bash(t, h, "a", "echo one"), fmt.Sprintf("one\nprompt %d\nprompt %d\n", 2*i+3, 2*i+4))
	}
}
