package terminal_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// issue 16 §13: a background send of thousands of lines, task_kill, then one
// more line: the kill leaves nothing of the killed input behind (no leftover
// glued to the next line, no continuation line, no late KeyboardInterrupt),
// and the next line runs by itself. The kill comes at once after a send of
// quick lines, or after the first output of slow lines (it then meets a
// command at work, or the program between two lines).
func TestTaskKillLeavesNoInputBehind(t *testing.T) {
	trials := 6
	if testing.Short() {
		trials = 2
	}
	py := testkit.Python3(t)
	for _, c := range []struct {
		name, open, setup, line, next string
		slow                          bool
	}{
		{"bash", `{}`, "", "echo line%d", "echo ALIVE$((40+2))", false},
		{"bash-slow", `{}`, "", "sleep 0.1; echo line%d", "echo ALIVE$((40+2))", true},
		{"python3", fmt.Sprintf(`{"command":"%s -q"}`, py), "", "print('line%d')", "print('ALIVE'+str(40+2))", false},
		{"python3-slow", fmt.Sprintf(`{"command":"%s -q"}`, py), "import time", "time.sleep(0.1); print('line%d')", "print('ALIVE'+str(40+2))", true},
		{"python3-in-bash", `{}`, py + " -q", "print('line%d')", "print('ALIVE'+str(40+2))", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil)
			id, _ := f.open(c.open)
			if c.setup != "" {
				want(t, f.send(id, c.setup, "Enter"), "stdin_read")
			}
			for i := range trials {
				text := ""
				var b strings.Builder
				for n := range 3000 {
					fmt.Fprintf(&b, c.line+"\n", n)
				}
				text += b.String()
				args, _ := json.Marshal(map[string]any{"terminal_id": id, "text": text, "run_in_background": true})
				r := f.call("terminal_send", string(args))
				task, _ := r.data["task_id"].(string)
				if task == "" {
					t.Fatalf("trial %d: send: %+v", i, r)
				}
				for seen := "\n"; c.slow && !strings.Contains(seen, "\nline0\n"); {
					o := f.call("task_output", `{"task_id":"`+task+`","wait_ms":10000}`)
					if o.data["running"] != true {
						t.Fatalf("trial %d: no line before the kill: %+v", i, o)
					}
					out, _, _ := strings.Cut(o.text, "[task-") // without the status line
					seen += out
				}
				k := f.call("task_kill", `{"task_id":"`+task+`"}`)
				if k.isErr || k.data["running"] != false {
					t.Fatalf("trial %d: kill: %+v", i, k)
				}
				reason, _ := k.data["ready_reason"].(string)
				if testing.Verbose() {
					t.Logf("trial %d: kill %q", i, k.text)
				}
				if reason != "prompt" && reason != "stdin_read" {
					// An honest "unknown" is allowed, but then the next
					// line is not checked against leftovers.
					t.Logf("trial %d: kill ended %q: %s", i, reason, k.text)
					continue
				}
				next := f.send(id, c.next, "Enter")
				out := next.text
				if next.isErr || next.reason() != reason || !strings.Contains(out, "ALIVE42\n") ||
					strings.Contains(out, "not found") || strings.Contains(out, "Error") ||
					strings.Contains(out, "KeyboardInterrupt") || strings.Contains(out, "... ") || strings.Contains(out, "line") {
					t.Fatalf("trial %d: after a kill that said %q:\n%s\nthe next line gave %q:\n%s", i, reason, k.text, next.reason(), out)
				}
			}
		})
	}
}

// When the proof cannot come, task_kill says that the state is not known: a
// program that takes SIGINT and goes back to reading without a word may not
// have acted on it (unknown); a shell that ignores it keeps its line, and no
// signal brings it back (killed). Either way the answer says that part of
// the task's input may be left.
func TestTaskKillSaysWhenTheStateIsNotKnown(t *testing.T) {
	py := testkit.Python3(t)
	for _, c := range []struct{ name, open, setup, text, reason, says string }{
		{"silent-handler", fmt.Sprintf(`{"command":"%s -q"}`, py), "import signal; signal.signal(signal.SIGINT, lambda *a: None)",
			"print('partial')", "unknown", "printed nothing since"},
		{"ignored", `{}`, "trap '' INT", "echo partial", "killed", "did not bring its terminal back to a proven state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(cfg *config.Config) { cfg.Terminal.KillGraceMs = 200 })
			id, _ := f.open(c.open)
			f.send(id, c.setup, "Enter")
			b, _ := json.Marshal(map[string]any{"terminal_id": id, "text": c.text, "run_in_background": true})
			task, _ := f.call("terminal_send", string(b)).data["task_id"].(string)
			k := f.call("task_kill", `{"task_id":"`+task+`"}`)
			if k.isErr || k.data["running"] != false || k.data["ready_reason"] != c.reason || !strings.Contains(k.text, c.says) ||
				!strings.Contains(k.text, "part of the task's input") {
				t.Fatalf("%+v", k)
			}
		})
	}
}
