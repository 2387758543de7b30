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
