package terminal_test

import (
	"fmt"
	"strings"
	"testing"
)

// issue 16 §16: a command that prints the default shell's prompt marker
// (eval "$PROMPT_COMMAND") does not make the terminal look ready while it
// runs: a marker that bash is not then proven reading after is no prompt,
// however long the check waited.
func TestASpoofedPromptMarkerIsNotAPrompt(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	r := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"eval \"$PROMPT_COMMAND\"; sleep 2; echo do''ne","keys":["Enter"],"wait_ms":20000}`, id))
	want(t, r, "prompt", "done\n")
	// Nor does a read that waits past the check, or one that waits for
	// nothing.
	f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"eval \"$PROMPT_COMMAND\"; sleep 4; echo over","keys":["Enter"],"wait_ms":0}`, id))
	for _, wait := range []int{1500, 0} {
		r = f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":%d}`, id, wait))
		if r.reason() == "prompt" || strings.Contains(r.text, "\nover\n") {
			t.Fatalf("wait_ms %d: a spoofed marker read as a prompt:\n%s", wait, r.text)
		}
	}
	want(t, f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":20000}`, id)), "prompt", "over\n")
	// A program that reads the terminal after the spoofed marker is not
	// bash at its prompt: the next text would go to it (found by a hostile
	// pass: "py got echo shell-command").
	r = f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"eval \"$PROMPT_COMMAND\"; cat","keys":["Enter"]}`, id))
	want(t, r, "stdin_read", "cat (pid")
}
