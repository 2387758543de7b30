package terminal_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
)

// Output a task collected is the task's: the next read of the terminal does
// not return it again.
func TestTaskOutputIsNotReturnedAgainByARead(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	out := f.runTask(id, "echo task-said-$((6*7))")
	if !strings.Contains(out, "task-said-42") {
		t.Fatalf("task output: %q", out)
	}
	if r := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":0}`, id)); strings.Contains(r.text, "task-said-42") {
		t.Fatalf("the task's output came back in a read: %q", r.text)
	}
}

// A background send refused as busy uses up no task id, and its error has
// data.
func TestRefusedBackgroundSend(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	first := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"sleep 600","keys":["Enter"],"run_in_background":true}`, id))
	if first.data["task_id"] != "task-1" {
		t.Fatalf("%+v", first)
	}
	busy := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"true","keys":["Enter"],"run_in_background":true}`, id))
	if !busy.isErr || !strings.Contains(busy.text, "busy") || busy.data["terminal_id"] != id || busy.data["busy"] != true {
		t.Fatalf("%+v", busy)
	}
	f.call("task_kill", `{"task_id":"task-1"}`)
	next := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"true","keys":["Enter"],"run_in_background":true}`, id))
	if next.data["task_id"] != "task-2" {
		t.Fatalf("the refused send used up an id: %+v", next)
	}
}

// terminal_close right after terminal_open ends the shell with SIGHUP, not
// after the grace with SIGKILL (a SIGHUP that lands before bash's line
// editor starts is only noted by bash; it is sent again).
func TestCloseRightAfterOpen(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Terminal.KillGraceMs = 10000 })
	for i := range 20 {
		id, _ := f.open(`{}`)
		r := f.call("terminal_close", fmt.Sprintf(`{"terminal_id":%q}`, id))
		if r.isErr || strings.Contains(r.text, "SIGKILL") || !strings.Contains(r.text, "SIGHUP") {
			t.Fatalf("close %d: %q", i, r.text)
		}
	}
}

// terminal_list asks every terminal at once and answers even while one is
// closing; the agent owns the listing (no goroutine outlives it).
func TestListWhileClosing(t *testing.T) {
	f := newFixture(t, nil)
	for range 5 {
		f.open(`{}`)
	}
	done := make(chan result, 1)
	go func() { done <- f.call("terminal_close", `{"terminal_id":"t3"}`) }()
	r := f.call("terminal_list", `{}`)
	for _, id := range []string{"t1:", "t2:", "t4:", "t5:"} {
		if !strings.Contains(r.text, id) {
			t.Fatalf("%s missing: %q", id, r.text)
		}
	}
	if c := <-done; c.isErr {
		t.Fatalf("close: %+v", c)
	}
	if r := f.call("terminal_list", `{}`); strings.Contains(r.text, "t3:") || !strings.Contains(r.text, "t5:") {
		t.Fatalf("after the close: %q", r.text)
	}
}

// A send right after open is echoed once: the prompt counts only once bash
// reads the terminal with its line editor (before that the terminal itself
// echoes what is typed, and readline shows it again).
func TestSendRightAfterOpenEchoesOnce(t *testing.T) {
	f := newFixture(t, nil)
	for i := range 15 {
		id, _ := f.open(`{}`)
		r := f.send(id, fmt.Sprintf("echo once-$((%d+1))", i), "Enter")
		if n := strings.Count(r.text, fmt.Sprintf("echo once-$((%d+1))", i)); n != 1 || !strings.Contains(r.text, fmt.Sprintf("once-%d\n", i+1)) {
			t.Fatalf("open %d: the line shows %d times: %q", i, n, r.text)
		}
		f.call("terminal_close", fmt.Sprintf(`{"terminal_id":%q}`, id))
	}
}

// A terminal's bash started for a command does not read the host's
// $BASH_ENV (the host user's start-up file), as the default bash does not
// read ~/.bashrc.
func TestTerminalIgnoresTheHostsBashEnv(t *testing.T) {
	rc := filepath.Join(t.TempDir(), "rc")
	if err := os.WriteFile(rc, []byte("echo FROM-BASH-ENV\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, h: hosttest.Start(t, nil, host.Options{Env: append(os.Environ(), "BASH_ENV="+rc)})}
	_, r := f.open(`{"command":"echo ran; read x"}`)
	if strings.Contains(r.text, "FROM-BASH-ENV") || !strings.Contains(r.text, "ran") {
		t.Fatalf("%q", r.text)
	}
}

// While a background task holds the terminal, what the program prints is
// the task's: a read that would take it is refused and says where it goes;
// a page of the history takes nothing and is served.
func TestAReadDuringATaskIsToldWhereTheOutputGoes(t *testing.T) {
	f := newFixture(t, nil)
	id, _ := f.open(`{}`)
	bg := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"sleep 600","keys":["Enter"],"run_in_background":true}`, id))
	task, _ := bg.data["task_id"].(string)
	r := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":0}`, id))
	if !r.isErr || r.data["busy"] != true || !strings.Contains(r.text, task) || !strings.Contains(r.text, "task_output") {
		t.Fatalf("a read during the task: %+v", r)
	}
	if p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":0}`, id)); p.isErr || p.data["output_from"] != 0.0 {
		t.Fatalf("a page during the task: %+v", p)
	}
	f.call("task_kill", fmt.Sprintf(`{"task_id":%q}`, task))
	if r := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":0}`, id)); r.isErr {
		t.Fatalf("a read after the task: %+v", r)
	}
}

// No result splits a character: not a page whose offset or limit falls
// inside one, not a history whose oldest bytes were dropped mid-character,
// and not a result that comes while a program is halfway through writing
// one (its first byte waits for the next result).
func TestResultsNeverSplitACharacter(t *testing.T) {
	f := newFixture(t, func(c *config.Config) {
		c.Terminal.MaxResultBytes = 4096
		c.Terminal.HistoryBytes = 4096
	})
	id, _ := f.open(`{}`)
	want(t, f.send(id, `printf 'a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n'`, "Enter"), "prompt", "aé€😀")
	end := int64(f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":0}`, id)).data["output_to"].(float64))
	for off := int64(0); off < end; off++ {
		for limit := 1; limit <= 5; limit++ {
			p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":%d,"limit":%d}`, id, off, limit))
			if strings.Contains(p.text, "\uFFFD") || p.isErr {
				t.Fatalf("offset %d limit %d split a character:\n%s", off, limit, p.text)
			}
			if from, to := p.data["output_from"].(float64), p.data["output_to"].(float64); to <= from || int64(from) > off {
				t.Fatalf("offset %d limit %d: a page of %v-%v does not move on", off, limit, from, to)
			}
		}
	}

	// A program that writes the first byte of a character and then waits.
	r := f.send(id, `printf '\xc3'; read -s x; printf '\xa9!\n'`, "Enter")
	want(t, r, "stdin_read")
	if strings.Contains(r.text, "\uFFFD") {
		t.Fatalf("a result ended within a character:\n%s", r.text)
	}
	want(t, f.send(id, "", "Enter"), "prompt", "é!\n")

	// The same in a background task's output, which is collected while the
	// program pauses halfway through the character.
	if out := f.runTask(id, `printf '\xc3'; sleep 0.2; printf '\xa9?\n'`); strings.Contains(out, "\uFFFD") || !strings.Contains(out, "é?\n") {
		t.Fatalf("the task's output split a character:\n%s", out)
	}

	// Fill the history with 3-byte characters, so its oldest bytes are
	// dropped at any byte.
	want(t, f.send(id, `for i in $(seq 1 3000); do printf '€'; done; echo`, "Enter"), "prompt")
	p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":0,"limit":300}`, id))
	if !strings.Contains(p.text, "dropped from the retained history") || strings.Contains(p.text, "\uFFFD") {
		t.Fatalf("a page from the start of a history that dropped bytes:\n%s", p.text)
	}
	// Nor one from where the history says it is retained from.
	var first int64
	if _, err := fmt.Sscanf(p.text[strings.LastIndex(p.text, "history retained from byte "):], "history retained from byte %d]", &first); err != nil {
		t.Fatal(err)
	}
	for off := first; off < first+3; off++ {
		if p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":%d,"limit":12}`, id, off)); strings.Contains(p.text, "\uFFFD") {
			t.Fatalf("a page from offset %d (retained from %d):\n%s", off, first, p.text)
		}
	}

	// A page shows no half of a character still being written.
	half, _ := f.open(`{"command":"printf 'A\\360\\237'; exec sleep 600"}`)
	for _, page := range []string{`"offset":0`, `"offset":1,"limit":2`} {
		if p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,%s}`, half, page)); strings.Contains(p.text, "\uFFFD") || !strings.Contains(p.text, "covers output bytes") {
			t.Fatalf("a page {%s} of a character still being written:\n%s", page, p.text)
		}
	}
}

// runTask sends text with Enter as a background task on terminal id and
// collects its output until it is done.
func (f *fixture) runTask(id, text string) string {
	f.t.Helper()
	b, _ := json.Marshal(map[string]any{"terminal_id": id, "text": text, "keys": []string{"Enter"}, "run_in_background": true})
	bg := f.call("terminal_send", string(b))
	task, _ := bg.data["task_id"].(string)
	if task == "" {
		f.t.Fatalf("no task: %+v", bg)
	}
	var out strings.Builder
	for range 50 {
		o := f.call("task_output", fmt.Sprintf(`{"task_id":%q,"wait_ms":5000}`, task))
		out.WriteString(o.text)
		if o.data["running"] == false {
			return out.String()
		}
	}
	f.t.Fatalf("task %s still running after 50 task_output calls: %s", task, out.String())
	return ""
}
