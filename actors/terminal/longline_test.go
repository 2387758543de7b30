package terminal_test

import (
	"fmt"
	"strings"
	"testing"
)

// issue 16 §16: a line longer than 4,095 bytes typed to a program that reads
// in line mode arrives cut (the terminal drops the rest): the result warns.
// A line editor gets it whole, and no warning.
func TestALongLineToALineModeReaderIsWarnedAbout(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	long := strings.Repeat("a", 5000)
	want(t, f.send(id, "read -r x; echo len=${#x}", "Enter"), "stdin_read")
	r := f.send(id, long, "Enter")
	want(t, r, "prompt", "len=4095\n", "[warning: 1 typed line(s) longer than 4095 bytes (the longest 5000)")
	r = f.send(id, "x="+long+"; echo len=${#x}", "Enter")
	want(t, r, "prompt", "len=5000\n")
	if strings.Contains(r.text, "warning") {
		t.Fatalf("a line editor's line was warned about:\n%s", r.text[len(r.text)-300:])
	}
	// A background send says so in its answer.
	want(t, f.send(id, "read -r x; echo len=${#x}", "Enter"), "stdin_read")
	bg := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"%s\n","run_in_background":true}`, id, long))
	if !strings.Contains(bg.text, "[warning: 1 typed line(s) longer than 4095 bytes") {
		t.Fatalf("%+v", bg)
	}
	task, _ := bg.data["task_id"].(string)
	o := f.call("task_output", fmt.Sprintf(`{"task_id":%q,"wait_ms":10000}`, task))
	for i := 0; o.data["running"] == true; i++ {
		if i > 20 {
			t.Fatalf("the task never finished: %+v", o)
		}
		o = f.call("task_output", fmt.Sprintf(`{"task_id":%q,"wait_ms":10000}`, task))
	}
	want(t, f.send(id, "echo len=${#x}", "Enter"), "prompt", "len=4095\n")
}
