package tasks

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/terminal"
)

// A task remembers the output of its latest answer only, and of it only what
// the answer showed, so that a caller who withdraws it gets it again: a
// finished task kept for task_output holds at most one result's worth of
// bytes, not answeredKept answers of four results each. What the answer named
// for paging, and the older answers, are named again instead. Every byte is
// still either given again or named.
func TestATaskRemembersOnlyWhatItsLatestAnswerShowed(t *testing.T) {
	const limit = 4096
	tk := &task{id: "task-1", start: &Start{TerminalID: "t1"}, cfg: terminal.Config{MaxResultBytes: limit}, offset: 100}
	big := func(c byte) []byte { return bytes.Repeat([]byte{c, '\n'}, 3*limit) }

	tk.pending = big('a')
	tk.result("c1", ToolOutput, "")
	tk.pending = big('b')
	tk.result("c2", ToolOutput, "")
	var kept int
	for _, a := range tk.answered {
		kept += len(a.out)
	}
	if kept == 0 || kept > limit || tk.answered[0].out != nil {
		t.Fatalf("the task keeps %d bytes of output for its answers (the older's: %d); want some, at most %d, the latest's", kept, len(tk.answered[0].out), limit)
	}
	// Both callers had gone: the latest's shown output comes again, the
	// rest is named.
	shown := tk.answered[1].out
	tk.withdrawAnswered("c2")
	tk.withdrawAnswered("c1")
	end := int64(100 + 2*len(big('a')))
	if !bytes.Equal(tk.pending, shown) || tk.offset+int64(len(tk.pending)) != end {
		t.Fatalf("pending: %d bytes from %d; want the %d bytes shown, up to %d", len(tk.pending), tk.offset, len(shown), end)
	}
	if got, want := tk.lost.Notes("t1"), []string{
		"[output bytes 100-" + strconv.FormatInt(tk.offset, 10) + " went to a call cancelled as it was answered: terminal_read on t1 with offset 100 and limit " + strconv.FormatInt(tk.offset-100, 10) + " pages them]",
	}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("notes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
