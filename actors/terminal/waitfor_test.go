package terminal_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/config"
)

// issue 16 §16: terminal_read with wait_for output returns once the program
// prints something new (a tail -f), not at the end of its wait; readiness
// still ends it, and output nobody read yet is returned at once.
func TestReadCanWaitForNewOutput(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Terminal.IdleSilenceMs = 300 })
	log := filepath.Join(t.TempDir(), "app.log")
	if err := os.WriteFile(log, []byte("start\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, r := f.open(fmt.Sprintf(`{"command":"tail -n +1 -f %s"}`, log))
	want(t, r, "inferred_idle", "start\n")
	for i := range 3 {
		line := fmt.Sprintf("event %d", i)
		done := make(chan result, 1)
		go func() {
			done <- f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":600000,"wait_for":"output"}`, id))
		}()
		// The line is written while the read waits, or before it begins:
		// either way the read returns it, and does not wait ten minutes.
		fh, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(fh, line)
		fh.Close()
		r := <-done
		if r.isErr || r.reason() != "running" || !strings.Contains(r.text, line+"\n") || !strings.Contains(r.text, "new output") {
			t.Fatalf("read %d: %+v", i, r)
		}
	}
	// Ready first: a shell's prompt ends the wait as before.
	sh, _ := f.open(`{}`)
	want(t, f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"sleep 1","keys":["Enter"],"wait_ms":300}`, sh)), "timeout", "sleep 1\n")
	want(t, f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":600000,"wait_for":"output"}`, sh)), "prompt")
	// Bad values are refused with the rule.
	for args, msg := range map[string]string{
		`"wait_for":"forever"`:           `"wait_for" is "forever"`,
		`"wait_for":"output","offset":0`: `"wait_for" goes with reading unread output`,
	} {
		if r := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,%s}`, sh, args)); !r.isErr || !strings.Contains(r.text, msg) {
			t.Fatalf("%s: %+v", args, r)
		}
	}
}
