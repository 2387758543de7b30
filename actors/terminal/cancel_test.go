package terminal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// cancelWhen runs a tool call, cancels its context once ready() holds, and
// checks that the call returns the context's error.
func (f *fixture) cancelWhen(tool, args string, ready func() (bool, string)) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := f.h.Call(ctx, "a", tool, json.RawMessage(args))
		errc <- err
	}()
	testkit.Eventually(f.t, tool+" under way", ready)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		f.t.Fatalf("%s cancelled: got %v, want context.Canceled", tool, err)
	}
}

func running(cmd string) func() (bool, string) {
	return func() (bool, string) {
		left := testkit.CommandsRunning(cmd)
		return len(left) > 0, "not yet"
	}
}

// One rule for every tool: a cancelled call returns the context's error
// and holds nothing afterwards.
func TestCancelledCallsHoldNothing(t *testing.T) {
	f := newFixture(t, nil)
	n := 100000 + rand.IntN(800000)
	sleep := func(i int) string { return fmt.Sprintf("sleep %d", n+i) }

	// terminal_open of a program that never gets ready: the terminal nobody
	// saw is closed, and its program ends.
	f.cancelWhen("terminal_open", fmt.Sprintf(`{"command":%q}`, sleep(0)), running(sleep(0)))
	testkit.Eventually(t, "the cancelled open's terminal gone", func() (bool, string) {
		r := f.call("terminal_list", `{}`)
		return strings.Contains(r.text, "no terminals"), r.text
	})
	testkit.Eventually(t, "its program gone", func() (bool, string) {
		return len(testkit.CommandsRunning(sleep(0))) == 0, "still running"
	})

	// terminal_send: the reservation is released at once.
	id, _ := f.open(`{}`)
	f.cancelWhen("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":%q,"keys":["Enter"],"wait_ms":60000}`, id, sleep(1)), running(sleep(1)))
	r := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"keys":["C-c"],"wait_ms":5000}`, id))
	if r.isErr || strings.Contains(r.text, "busy") {
		t.Fatalf("the send after a cancelled one: %+v", r)
	}

	// terminal_read with a wait: nothing is left waiting; reads go on.
	f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":%q,"keys":["Enter"],"wait_ms":0}`, id, sleep(2)))
	f.cancelWhen("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":60000}`, id), running(sleep(2)))
	if r := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":0}`, id)); r.isErr {
		t.Fatalf("read after a cancelled read: %+v", r)
	}
	f.call("terminal_signal", fmt.Sprintf(`{"terminal_id":%q,"signal":"SIGINT"}`, id))
	want(t, f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"wait_ms":5000}`, id)), "prompt")

	// task_output with a wait: withdrawn; the task goes on and can be killed.
	bg := f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":%q,"keys":["Enter"],"run_in_background":true}`, id, sleep(3)))
	task, _ := bg.data["task_id"].(string)
	if task == "" {
		t.Fatalf("%+v", bg)
	}
	testkit.Eventually(t, "the task's command running", running(sleep(3)))
	// Collect the echo of the line (it may come late under load): then the
	// task prints nothing more, and the next task_output must wait.
	var echoed strings.Builder
	testkit.Eventually(t, "the echo of the task's line collected", func() (bool, string) {
		echoed.WriteString(f.call("task_output", fmt.Sprintf(`{"task_id":%q,"wait_ms":0}`, task)).text)
		return strings.Contains(echoed.String(), sleep(3)), echoed.String()
	})
	f.cancelWhen("task_output", fmt.Sprintf(`{"task_id":%q,"wait_ms":60000}`, task), func() (bool, string) { return true, "" })
	if k := f.call("task_kill", fmt.Sprintf(`{"task_id":%q}`, task)); k.isErr || k.data["running"] != false {
		t.Fatalf("kill after a cancelled task_output: %+v", k)
	}
	want(t, f.send(id, "echo free", "Enter"), "prompt", "free")
}

// Every result is within maxResultBytes, data included: listings of long
// commands, errors that echo what they were given, output that grows when
// made safe (each NUL shows as three bytes), and a page with an offset and
// the largest limit.
func TestEveryResultIsWithinTheCap(t *testing.T) {
	const max = 4096
	f := newFixture(t, func(c *config.Config) { c.Terminal.MaxResultBytes = max })
	long := strings.Repeat("x", 100000)
	check := func(what string, r result) {
		t.Helper()
		b, _ := json.Marshal(r.data)
		if r.data == nil {
			b = nil
		}
		if len(r.text)+len(b) > max {
			t.Fatalf("%s: %d bytes of text and %d of data, cap %d", what, len(r.text), len(b), max)
		}
	}
	for range 4 {
		id, _ := f.open(`{}`)
		f.call("terminal_send", fmt.Sprintf(`{"terminal_id":%q,"text":"true %s","keys":["Enter"],"run_in_background":true}`, id, long))
	}
	check("terminal_list", f.call("terminal_list", `{}`))
	check("task_list", f.call("task_list", `{}`))
	check("open with a long cwd", f.call("terminal_open", fmt.Sprintf(`{"cwd":"/%s"}`, long)))
	check("bad key", f.call("terminal_send", fmt.Sprintf(`{"terminal_id":"t1","keys":[%q]}`, long)))
	check("bad signal", f.call("terminal_signal", fmt.Sprintf(`{"terminal_id":"t1","signal":%q}`, long)))

	id, _ := f.open(`{}`)
	r := f.send(id, "head -c 200000 /dev/zero; echo END", "Enter")
	check("NUL output", r)
	if !strings.Contains(r.text, "END") || strings.Contains(r.text, "result cut") || !strings.Contains(r.text, "this result covers") {
		t.Fatalf("NUL output not fitted by the terminal itself, with its metadata: %.300q", r.text)
	}
	// Paging through it always moves on, to the end.
	off, sawEnd := int64(0), false
	for i := 0; i < 2000 && !sawEnd; i++ {
		p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":%d,"limit":9223372036854775807}`, id, off))
		check("page", p)
		to, _ := p.data["output_to"].(float64)
		sawEnd = strings.Contains(p.text, "END")
		if int64(to) <= off && !sawEnd {
			t.Fatalf("paging stuck at %d: %.300q", off, p.text)
		}
		off = int64(to)
	}
	if !sawEnd {
		t.Fatal("paging never reached the end")
	}
	if p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":1,"limit":9223372036854775807}`, id)); p.data["output_to"].(float64) <= 1 {
		t.Fatalf("offset 1 with the largest limit: %+v", p)
	}
}

// A task_kill whose caller gives up goes on, but takes no output with it:
// what the task printed meanwhile comes with the next task_output.
func TestAWithdrawnKillTakesNoOutput(t *testing.T) {
	// The grace is the time the test has to see the program's answer to
	// SIGINT and withdraw the kill before SIGTERM ends the task.
	f := newFixture(t, func(c *config.Config) { c.Terminal.KillGraceMs = 1000 })
	id, _ := f.open(`{}`)
	page := func(want string) func() (bool, string) {
		return func() (bool, string) {
			p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":0}`, id)).text
			return strings.Contains(p, want), p
		}
	}
	// The program waits for SIGINT with sigwait, not a Python handler, and
	// writes each line with one os.write, not print. A handler runs only
	// between bytecodes: a SIGINT that came after the last check and before
	// time.sleep began waited for the sleep to end (the kill's SIGTERM came
	// first, and "<K-int>" never did); and a handler ran inside print's
	// flush, so with PYTHONUNBUFFERED=1 (print writes the text and the
	// "\n" apart) its line came between them: "<K-ready><K-int>\n\n". A
	// page's "\n" after the last output is the page's own, so only the text
	// is waited for; its "\n" came in the same write.
	py := testkit.Python3(t)
	text := py + ` -c 'import os, signal, time; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}); os.write(1, b"<K-" b"ready>\n"); signal.sigwait({signal.SIGINT}); os.write(1, b"<K-" b"int>\n"); time.sleep(600)'`
	b, _ := json.Marshal(map[string]any{"terminal_id": id, "text": text, "keys": []string{"Enter"}, "run_in_background": true})
	task, _ := f.call("terminal_send", string(b)).data["task_id"].(string)
	testkit.Eventually(t, "the program ready", page("<K-ready>"))
	f.cancelWhen("task_kill", fmt.Sprintf(`{"task_id":%q}`, task), page("<K-int>"))
	testkit.Eventually(t, "the kill to end the task", func() (bool, string) {
		l := f.call("task_list", `{}`).text
		return !strings.Contains(l, "running"), l
	})
	var out strings.Builder
	for range 50 {
		o := f.call("task_output", fmt.Sprintf(`{"task_id":%q,"wait_ms":5000}`, task))
		out.WriteString(o.text)
		if o.data["running"] == false {
			break
		}
	}
	if !strings.Contains(out.String(), "<K-int>\n") || !strings.Contains(out.String(), "<K-ready>\n") {
		t.Fatalf("the task's output after a withdrawn kill:\n%s", out.String())
	}
}
