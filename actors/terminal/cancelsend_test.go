package terminal_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// A terminal_send cancelled while it waits is Ctrl-C: the foreground
// program gets SIGINT, the terminal and its shell stay, and what the
// program printed comes with the next result, which says what happened.
func TestACancelledSendInterruptsItsProgram(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	want(t, f.send(id, "export MARK=kept", "Enter"), "prompt")
	sleep := fmt.Sprintf("sleep %d.5", 100000+rand.IntN(800000))
	f.cancelWhen("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":%q,"keys":["Enter"],"wait_ms":60000}`, id, "echo before-cancel; "+sleep), running(sleep))
	testkit.Eventually(t, "the interrupted program gone", func() (bool, string) {
		left := testkit.CommandsRunning(sleep)
		return len(left) == 0, strings.Join(left, ", ")
	})
	r := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":5000}`, id))
	for _, s := range []string{"cancelled by its caller while it waited: sent SIGINT", "before-cancel"} {
		if !strings.Contains(r.text, s) {
			t.Errorf("the read after a cancelled send lacks %q: %s", s, r.text)
		}
	}
	want(t, f.send(id, `echo "[$MARK]"`, "Enter"), "prompt", "[kept]")
}
