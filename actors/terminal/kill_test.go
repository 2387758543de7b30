package terminal_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// task_kill at once after a background send, hundreds of times, on the
// default shell and on a plain bash: the killed line never runs later, is
// never mangled into another command, and the terminal is ready for the
// next send each time.
func TestTaskKillRightAfterABackgroundSend(t *testing.T) {
	cycles := 150
	if testing.Short() {
		cycles = 30
	}
	for _, open := range []string{`{}`, `{"command":"bash --norc --noprofile"}`} {
		t.Run(open, func(t *testing.T) {
			f := newFixture(t, nil)
			id, _ := f.open(open)
			// Durations no other test or program on the machine uses.
			base := 100000 + rand.IntN(800000)
			for i := range cycles {
				r := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"sleep %d","keys":["Enter"],"run_in_background":true}`, id, base+i%10))
				task, _ := r.data["task_id"].(string)
				if task == "" {
					t.Fatalf("cycle %d: send: %+v", i, r)
				}
				k := f.call("task_kill", `{"task_id":"`+task+`"}`)
				if k.isErr || k.data["running"] != false {
					t.Fatalf("cycle %d: kill: %+v", i, k)
				}
				if !strings.Contains(k.text, "after SIGINT") {
					t.Logf("cycle %d: %q", i, k.text)
				}
				next := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"echo ok$((%d+1))","keys":["Enter"],"wait_ms":3000}`, id, i))
				if next.isErr || next.reason() != "prompt" && next.reason() != "stdin_read" ||
					!strings.Contains(next.text, fmt.Sprintf("ok%d\n", i+1)) || strings.Contains(next.text, "not found") {
					t.Fatalf("cycle %d: next send: %q %+v\nthe background send: %q\nthe kill: %q", i, next.text, next, r.text, k.text)
				}
				if left := testkit.CommandsRunning(fmt.Sprintf("sleep %d", base+i%10)); len(left) > 0 {
					t.Fatalf("cycle %d: the killed command runs: %v", i, left)
				}
			}
		})
	}
}

// task_kill of a command in node's REPL: node takes the SIGINT, prints
// its error and a new prompt, and waits on the terminal and its timers (an
// event loop, not a blocked read). The task ends there, and the REPL, its
// state with it, is kept: it was once taken for a program that ignored the
// SIGINT, and SIGTERM killed node.
func TestTaskKillInNodesREPL(t *testing.T) {
	testkit.Node(t)
	f := newFixture(t, nil)
	id, r := f.open(`{"command":"node"}`)
	want(t, r, "stdin_read", "> ")
	want(t, f.send(id, "globalThis.kept = 41", "Enter"), "stdin_read", "41")
	for _, busy := range []string{`for(;;){}`, `{const e=Date.now()+600000; while(Date.now()<e){}}`} {
		r := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":%q,"keys":["Enter"],"run_in_background":true}`, id, busy))
		task, _ := r.data["task_id"].(string)
		if task == "" {
			t.Fatalf("send: %+v", r)
		}
		k := f.call("task_kill", `{"task_id":"`+task+`"}`)
		if k.isErr || k.data["running"] != false || strings.Contains(k.text, "SIGTERM") || strings.Contains(k.text, "SIGKILL") {
			t.Fatalf("kill of %s: %q %+v", busy, k.text, k)
		}
		next := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"kept + 1","keys":["Enter"],"wait_ms":5000}`, id))
		if next.isErr || !strings.Contains(next.text, "42") {
			t.Fatalf("after the kill of %s, the REPL: %q %+v", busy, next.text, next)
		}
	}
}
