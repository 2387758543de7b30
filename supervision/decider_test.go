package supervision_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/dsh-actors/dsh-actors/supervision"
)

// timeoutError stands for a typed failure, such as a shell timeout.
type timeoutError struct{ after string }

func (e *timeoutError) Error() string { return "timed out after " + e.after }

var errDied = errors.New("shell died")

func runtimeError() (err runtime.Error) {
	defer func() { err = recover().(runtime.Error) }()
	var m map[string]int
	m["x"] = 1 // assignment to entry in nil map
	return nil
}

func TestDecide(t *testing.T) {
	decide := supervision.Decide(
		supervision.On[*timeoutError](actor.RestartDirective),
		supervision.Is(errDied, actor.StopDirective),
		supervision.On[*fs.PathError](actor.EscalateDirective),
		supervision.On[runtime.Error](actor.StopDirective),
		supervision.OnValue[string](actor.ResumeDirective),
	)
	for _, tc := range []struct {
		name   string
		reason any
		want   actor.Directive
	}{
		{"typed error", &timeoutError{"1s"}, actor.RestartDirective},
		{"wrapped typed error", fmt.Errorf("run: %w", &timeoutError{"1s"}), actor.RestartDirective},
		{"sentinel", errDied, actor.StopDirective},
		{"wrapped sentinel", fmt.Errorf("read: %w", errDied), actor.StopDirective},
		{"joined", errors.Join(errors.New("a"), errDied), actor.StopDirective},
		{"standard library error", fmt.Errorf("load: %w", &fs.PathError{Op: "open", Path: "x", Err: os.ErrNotExist}), actor.EscalateDirective},
		{"runtime error", runtimeError(), actor.StopDirective},
		{"string", "boom", actor.ResumeDirective},
		{"no rule: other error", errors.New("other"), actor.RestartDirective},
		{"no rule: other value", 42, actor.RestartDirective},
	} {
		if got := decide(tc.reason); got != tc.want {
			t.Errorf("%s: %v gives %v, want %v", tc.name, tc.reason, got, tc.want)
		}
	}
}

func TestDecideFirstMatchWins(t *testing.T) {
	decide := supervision.Decide(
		supervision.OnValue[string](actor.StopDirective),
		supervision.OnValue[string](actor.ResumeDirective),
		supervision.Default(actor.EscalateDirective),
	)
	if got := decide("boom"); got != actor.StopDirective {
		t.Errorf("string: got %v, want the first rule's %v", got, actor.StopDirective)
	}
	if got := decide(1); got != actor.EscalateDirective {
		t.Errorf("int: got %v, want Default's %v", got, actor.EscalateDirective)
	}
	if got := supervision.Decide()(errDied); got != actor.RestartDirective {
		t.Errorf("no rules: got %v, want %v", got, actor.RestartDirective)
	}
}

// A decider in a policy is applied to real panics: a wrapped typed error
// restarts, a string resumes (the child keeps its state and carries on
// without Restarting or Started), a runtime error restarts, and anything
// else stops.
func TestDeciderOnLiveChildren(t *testing.T) {
	h := newHarness(t, supervision.Policy{
		MaxRestarts: 10,
		Decider: supervision.Decide(
			supervision.On[*timeoutError](actor.RestartDirective),
			supervision.OnValue[string](actor.ResumeDirective),
			supervision.On[runtime.Error](actor.RestartDirective),
			supervision.Default(actor.StopDirective),
		),
	})
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, fmt.Errorf("step: %w", &timeoutError{"5s"}), actor.RestartDirective)
	h.expectRestart(pid)

	h.failAndExpect(pid, "just a string", actor.ResumeDirective)
	h.expectAlive(pid, 1) // a pong, not Restarting, comes next

	h.failAndExpect(pid, runtimeError(), actor.RestartDirective)
	h.expectRestart(pid)

	h.failAndExpect(pid, errDied, actor.StopDirective)
	h.expectTerminated(pid, false)
}
