package supervision_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/supervision"
)

type expectedError struct{}

func (expectedError) Error() string         { return "shell timed out" }
func (expectedError) ExpectedFailure() bool { return true }

// An unexpected panic is logged at Error with the stack from where it
// began, and still reaches supervision.
func TestLogPanicsLogsStack(t *testing.T) {
	var logs testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := newHarness(t, supervision.Policy{}, withChildProps(actor.WithReceiverMiddleware(supervision.LogPanics(logger))))
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, errors.New("kaboom"), actor.RestartDirective)
	h.expectRestart(pid)

	out := logs.String()
	for _, want := range []string{
		"level=ERROR", `msg="actor panicked"`, "reason=kaboom", "message=supervision_test.fail",
		"stack=", "supervision_test.explode", "supervision_test.(*worker).Receive",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// A failure that says it is expected is logged at Info without a stack,
// also when wrapped.
func TestLogPanicsExpectedFailure(t *testing.T) {
	var logs testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := newHarness(t, supervision.Policy{}, withChildProps(actor.WithReceiverMiddleware(supervision.LogPanics(logger))))
	pid := h.spawn("worker", nil)

	h.failAndExpect(pid, fmt.Errorf("bash: %w", expectedError{}), actor.RestartDirective)
	h.expectRestart(pid)

	out := logs.String()
	if !strings.Contains(out, "level=INFO") || !strings.Contains(out, "shell timed out") {
		t.Errorf("want an Info line with the reason:\n%s", out)
	}
	if strings.Contains(out, "stack=") || strings.Contains(out, "level=ERROR") {
		t.Errorf("an expected failure was logged with a stack or at Error:\n%s", out)
	}
}

// Messages that do not panic pass through the middleware untouched.
func TestLogPanicsQuietWithoutPanic(t *testing.T) {
	var logs testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := newHarness(t, supervision.Policy{}, withChildProps(actor.WithReceiverMiddleware(supervision.LogPanics(logger))))
	pid := h.spawn("worker", nil)
	h.expectAlive(pid, 1)
	if out := logs.String(); out != "" {
		t.Errorf("logged without a panic:\n%s", out)
	}
}

// A panic in Stopping is logged and not passed on, so the stop completes
// and the supervisor receives Terminated.
func TestLogPanicsLetsStopComplete(t *testing.T) {
	var logs testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := newHarness(t, supervision.Policy{}, withChildProps(actor.WithReceiverMiddleware(supervision.LogPanics(logger))))
	pid := h.spawn("worker", nil)
	h.system.Root.Send(pid, failWhenStopping{})
	h.expectAlive(pid, 1) // the flag is set: Stop would overtake user messages
	h.system.Root.Send(h.sup, stopChild{pid})
	h.expectTerminated(pid, false)

	out := logs.String()
	for _, want := range []string{"level=ERROR", "while stopping", "message=*actor.Stopping", "supervision_test.explode"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}
