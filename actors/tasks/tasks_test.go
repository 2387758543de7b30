package tasks

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/terminal"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// The task tools run end to end in actors/terminal's tests (they need a
// terminal); here, the parts that stand alone.
func TestMain(m *testing.M) { testkit.Main(m) }

func TestFitTaskKeepsTheEndWithinTheCap(t *testing.T) {
	out := []byte(strings.Repeat("✓ progress\n", 2000) + "done\n")
	text := fitTask([]string{"[note]"}, out, 500, "t1", []string{"[task-1 finished: prompt]"}, 1024)
	if len(text) > 1024 || !utf8.ValidString(text) || !strings.Contains(text, "done\n[task-1 finished: prompt]") ||
		!strings.HasPrefix(text, "[note]\n[") {
		t.Fatalf("%d bytes:\n%s", len(text), text)
	}
	// The notice says how much is not shown and where to page it: with what
	// is shown, that is the whole output.
	var left int
	lines := strings.SplitN(text, "\n", 3)
	if _, err := fmt.Sscanf(lines[1], "[%d earlier bytes of this output not shown: terminal_read on t1 with offset 500 pages them", &left); err != nil {
		t.Fatalf("notice %q: %v", lines[1], err)
	}
	if shown := strings.TrimSuffix(lines[2], "[task-1 finished: prompt]"); left+len(shown) != len(out) || !strings.HasSuffix(string(out), shown) {
		t.Fatalf("%d not shown + %d shown != %d", left, len(shown), len(out))
	}
	if got := fitTask(nil, []byte("x"), 0, "t1", []string{"[t]"}, 1024); got != "x\n[t]" {
		t.Fatalf("%q", got)
	}
}

// fakeTerminal answers every Reserve and counts them.
type fakeTerminal struct {
	reserves *atomic.Int32
	task     chan *actor.PID
}

func (f *fakeTerminal) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*terminal.Reserve); ok {
		if f.reserves.Add(1) == 1 {
			f.task <- ctx.Sender()
		}
		ctx.Respond(&terminal.Reserved{})
	}
}

// A task that fails is stopped, not restarted into typing its input again.
// This one fails answering a Start that came with no sender.
func TestAFailedTaskIsNotRestarted(t *testing.T) {
	system := testkit.NewSystem(t)
	var reserves atomic.Int32
	taskPID := make(chan *actor.PID, 1)
	term := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &fakeTerminal{&reserves, taskPID} }))
	cfg := terminal.DefaultConfig()
	reg := system.Root.Spawn(Props(Options{Terminal: cfg, Logger: slog.New(slog.DiscardHandler)}))
	system.Root.Send(reg, &Start{CallID: "c1", TerminalID: "t1", Terminal: term, Input: []byte("x\n"), Text: "x"})
	task := testkit.Next(t, taskPID, testkit.Timeout)
	// Restarted, it would keep its PID and answer; stopped, it is gone.
	testkit.Eventually(t, "the failed task stopped", func() (bool, string) {
		_, err := system.Root.RequestFuture(task, &Output{CallID: "o"}, 100*time.Millisecond).Result()
		return errors.Is(err, actor.ErrDeadLetter), fmt.Sprint(err)
	})
	if n := reserves.Load(); n != 1 {
		t.Fatalf("the task typed its input %d times", n)
	}
}
