package shell_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// The logging idiom exec > >(tee -a log) 2>&1 sends bash's output, and its
// prompt, through tee, which writes them to the terminal later: each call's
// output stays in its call, no marker of the runtime's shows, and statuses
// are right (issue 16 §4). Before, output came a call late and results held
// expanded markers, nonce included.
func TestOutputThroughAnAsynchronousWriterStaysInItsCall(t *testing.T) {
	log := filepath.Join(t.TempDir(), "session.log")
	for _, setup := range []string{
		"exec > >(tee -a " + log + ") 2>&1",
		"exec > >(tee -a " + log + ")",
		"exec > >(tee -a " + log + " | cat) 2>&1",
	} {
		t.Run(setup, func(t *testing.T) {
			h := newHost(t, nil)
			steps := []struct {
				command, want string
				exit          int
			}{
				{setup, "", 0},
				{"echo one", "one\n", 0},
				{"echo two; ls /nonexistent-dir 2>&1; true", "two\nls: cannot access '/nonexistent-dir': No such file or directory\n", 0},
				{"seq 1 3\nfalse", "1\n2\n3\n", 1},
				{"printf 'no newline'", "no newline", 0},
				{"echo three", "three\n", 0},
			}
			for _, s := range steps {
				res := bashArgs(t, h, "a", shell.Args{Command: s.command})
				text := strings.TrimSuffix(res.Text, "[exit code: 1]")
				if text != s.want || exitCode(res) != strconv.Itoa(s.exit) || strings.Contains(res.Text, "\x1e") || strings.Contains(res.Text, "DSH") {
					t.Fatalf("%q: got %q (exit %s), want %q (exit %d)", s.command, res.Text, exitCode(res), s.want, s.exit)
				}
			}
			wantText(t, bash(t, h, "a", "exec >/dev/tty 2>&1; echo back"), "back\n")
			b, err := os.ReadFile(log)
			if err != nil || !strings.Contains(string(b), "one\n") {
				t.Fatalf("the log: %q, %v", b, err)
			}
			// At most the prompt printed right after the redirecting line
			// reaches the log (found by a hostile pass: one after every
			// line, 12 agents in 16).
			if n := strings.Count(string(b), "\x1eDSH"); strings.Contains(setup, "2>&1") && n > 1 {
				t.Fatalf("%d prompt markers in the log: %q", n, b)
			}
			os.Remove(log)
		})
	}
}

// A writer that takes longer than the wait is named, and what it writes
// later comes in the next result.
func TestASlowWriterIsNamed(t *testing.T) {
	h := newHost(t, nil)
	wantText(t, bash(t, h, "a", `exec > >(while IFS= read -r l; do sleep 3; echo "late: $l"; done)`), "")
	res := bash(t, h, "a", "echo slow")
	if !strings.Contains(res.Text, "goes through a pipe to `bash` (pid") || !strings.Contains(res.Text, "still busy") || strings.Contains(res.Text, "late: slow") || exitCode(res) != "0" {
		t.Fatalf("the call with a slow writer: %+v", res)
	}
	testkit.Eventually(t, "the late output in a later result", func() (bool, string) {
		r := bash(t, h, "a", "true")
		return strings.Contains(r.Text, "late: slow"), r.Text
	})
}

// bash's own read left waiting is interrupted with a SIGINT for bash alone:
// its process group also holds the readers of its process substitutions
// (tee) and, under set +m, its background jobs. Before, the group's SIGINT
// killed tee, and bash died of SIGPIPE at its next write: the shell, its
// directory and variables were lost.
func TestInterruptingBashsReadSparesItsGroup(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, nil)
	wantText(t, bash(t, h, "a", "cd "+dir+" && X=5 && exec > >(tee -a tlog2) 2>&1"), "")
	if res := bash(t, h, "a", "read -p 'name? ' x"); !res.WaitingForInput {
		t.Fatalf("read: %+v", res)
	}
	res := bash(t, h, "a", "echo seven $X; pwd")
	if res.ShellReset || !strings.HasSuffix(res.Text, "seven 5\n"+dir+"\n") || !strings.Contains(res.Text, "sent it SIGINT") {
		t.Fatalf("after the read: %+v", res)
	}
	// A job started under set +m ignores SIGINT, unless it takes it back.
	py := testkit.Python3(t)
	bash(t, h, "b", "set +m; "+py+` -c 'import signal,time; signal.signal(signal.SIGINT, signal.SIG_DFL); time.sleep(300)' & BG=$!`)
	if res := bash(t, h, "b", "read x"); !res.WaitingForInput {
		t.Fatalf("read: %+v", res)
	}
	if res := bash(t, h, "b", `kill -0 $BG && echo alive; kill $BG`); !strings.HasSuffix(res.Text, "alive\n") {
		t.Fatalf("the background job: %+v", res)
	}
}

// While bash's stderr, where it prints its prompt, is not the terminal (a
// file, a pipe), bash prints no prompt: the status query leaves PS1 and PS2
// empty, so the file gets at most the prompt printed right after the line
// that redirected it. A marker of the runtime's that shows up in output
// (cat of that file) is left out with a notice and does not make the status
// unknown. Before, the log held a marker per line, and cat showed them raw,
// nonce and template included, with the status unknown.
func TestAPromptSentElsewhereLeavesNoMarker(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, setup, back string }{
		{"file", "exec 2>>e.log", "exec 2>/dev/tty; cat e.log"},
		{"pipe", "exec 2> >(sed 's/^/E: /')", "exec 2>/dev/tty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHost(t, nil)
			check := func(command, want, exit string) {
				t.Helper()
				res := bash(t, h, "a", command)
				if strings.Contains(res.Text, "\x1e") || strings.Contains(res.Text, "DSH") || res.StatusUnknown ||
					exitCode(res) != exit || !strings.Contains(res.Text, want) {
					t.Fatalf("%q: got %+v, want exit %s, with %q", command, res, exit, want)
				}
			}
			check("cd "+dir+" && rm -f e.log && "+c.setup, "", "0")
			check("echo two; ls /nope", "two\n", "2")
			check("echo three", "three\n", "0")
			check(c.back, "", "0")
			check("echo four", "four\n", "0")
			// Back on the terminal (/dev/tty is its name too), lines go
			// as they are again, not in an eval line of the runtime's.
			check("set -x", "", "0")
			if res := bash(t, h, "a", "echo five"); res.Text != "+ echo five\nfive\n" {
				t.Fatalf("after stderr came back: %+v", res)
			}
			if c.name == "file" {
				b, err := os.ReadFile(filepath.Join(dir, "e.log"))
				if err != nil || strings.Count(string(b), "\x1e") > 2 {
					t.Fatalf("the log holds more than one prompt: %q, %v", b, err)
				}
			}
		})
	}
}

// Under set -x, a shell whose stderr is not the terminal (the logging
// idiom) shows the user's commands traced, not the eval line the runtime
// types them in. Before, every call began with "+ eval -- 'echo five'".
func TestTracingShowsNoEvalOfTheRuntimes(t *testing.T) {
	log := filepath.Join(t.TempDir(), "x.log")
	h := newHost(t, nil)
	wantText(t, bash(t, h, "a", "exec > >(tee -a "+log+") 2>&1"), "")
	bash(t, h, "a", "set -x")
	for _, c := range []struct {
		command string
		evals   int
	}{{"echo five", 0}, {"echo six\necho seven", 0}, {"eval -- 'echo mine'", 1}} {
		res := bash(t, h, "a", c.command)
		if strings.Count(res.Text, "eval -- ") != c.evals || strings.Contains(res.Text, "left out") || exitCode(res) != "0" {
			t.Fatalf("%q: %+v", c.command, res)
		}
	}
}

// Writers in a chain (each exec > >(tee -a log) in a shell whose output
// is a pipe already adds one more): every one of them is waited for,
// however long the chain. Before, readers more than four pipes away were
// not looked at, and a slow one there (a read loop at the end) had its
// output come in a later result.
func TestOutputThroughAChainOfWritersStaysInItsCall(t *testing.T) {
	log := filepath.Join(t.TempDir(), "chain.log")
	h := newHost(t, nil)
	wantText(t, bash(t, h, "a", `exec > >(while IFS= read -r l; do sleep 0.01; printf '%s\n' "$l"; done) 2>&1`), "")
	for i := range 6 {
		res := bash(t, h, "a", "exec > >(tee -a "+log+") 2>&1; echo tok"+strconv.Itoa(i))
		wantText(t, res, "tok"+strconv.Itoa(i)+"\n")
	}
	res := bash(t, h, "a", "seq 30; echo END")
	if !strings.HasSuffix(res.Text, "29\n30\nEND\n") || strings.Count(res.Text, "\n") != 31 {
		t.Fatalf("through the chain: %q", res.Text)
	}
}
