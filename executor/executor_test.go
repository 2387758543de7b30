package executor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/executor"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

func run(t *testing.T, e *executor.Executor, req executor.Request) executor.Result {
	t.Helper()
	res, err := e.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Argv, err)
	}
	return res
}

func TestARunGivesOutputAndStatus(t *testing.T) {
	e := executor.New(nil)
	res := run(t, e, executor.Request{Plugin: "p", Argv: []string{"bash", "-c", "echo out; echo err >&2; exit 3"}})
	if res.Stdout != "out\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.TimedOut {
		t.Fatalf("%+v", res)
	}
	res = run(t, e, executor.Request{Argv: []string{"bash", "-c", `printf %s "$X"`}, Env: []string{"X=given"}})
	if res.Stdout != "given" || res.ExitCode != 0 {
		t.Fatalf("env: %+v", res)
	}
	res = run(t, e, executor.Request{Argv: []string{"bash", "-c", "read -r x; echo read=$?"}})
	if res.Stdout != "read=1\n" {
		t.Fatalf("a command that reads its input must get end-of-file at once: %+v", res)
	}
}

func TestATimeoutKillsTheWholeGroup(t *testing.T) {
	e := executor.New(nil)
	mark := testkit.ProcessMark(t)
	res := run(t, e, executor.Request{Argv: []string{"bash", "-c", "sleep 600 & sleep 600"}, Env: []string{mark}, Timeout: 100 * time.Millisecond})
	if !res.TimedOut {
		t.Fatalf("%+v", res)
	}
	testkit.MarkedGone(t, mark, "the timeout")
	// A clean exit that leaves a child behind: the child goes too.
	res = run(t, e, executor.Request{Argv: []string{"bash", "-c", "sleep 600 >/dev/null & echo done"}, Env: []string{mark}})
	if res.Stdout != "done\n" || res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	testkit.MarkedGone(t, mark, "a clean exit that left a child")
}

func TestACancelledRunReturnsTheContextsError(t *testing.T) {
	e := executor.New(nil)
	mark := testkit.ProcessMark(t)
	sig, started := testkit.Signal(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := e.Run(ctx, executor.Request{Argv: []string{"bash", "-c", "echo > " + sig + "; sleep 600"}, Env: []string{mark}})
		errc <- err
	}()
	started()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	testkit.MarkedGone(t, mark, "the cancellation")
}

func TestThePolicyRefusesOrRewrites(t *testing.T) {
	e := executor.New(executor.PolicyFunc(func(_ context.Context, req executor.Request) (executor.Request, error) {
		if req.Argv[0] == "rm" {
			return req, errors.New("no deleting")
		}
		req.Argv = append([]string{"echo", "rewritten"}, req.Argv...)
		return req, nil
	}))
	_, err := e.Run(context.Background(), executor.Request{Plugin: "p", Argv: []string{"rm", "-rf", "/tmp/x"}})
	var refused *executor.RefusedError
	if !errors.As(err, &refused) || refused.Plugin != "p" || !strings.Contains(err.Error(), "no deleting") {
		t.Fatalf("a refusal: %v", err)
	}
	if res := run(t, e, executor.Request{Argv: []string{"true"}}); res.Stdout != "rewritten true\n" {
		t.Fatalf("a rewrite: %+v", res)
	}
}

func TestBadRequestsAndHugeOutput(t *testing.T) {
	e := executor.New(nil)
	if _, err := e.Run(context.Background(), executor.Request{Plugin: "p"}); err == nil || !strings.Contains(err.Error(), "no program") {
		t.Fatalf("no argv: %v", err)
	}
	if _, err := e.Run(context.Background(), executor.Request{Plugin: "p", Argv: []string{"/no/such/program"}}); err == nil || !strings.Contains(err.Error(), "/no/such/program") {
		t.Fatalf("a missing program: %v", err)
	}
	res := run(t, e, executor.Request{Argv: []string{"head", "-c", "100000", "/dev/zero"}})
	if len(res.Stdout) != executor.MaxOutput || res.DroppedBytes != 100000-executor.MaxOutput {
		t.Fatalf("kept %d, dropped %d", len(res.Stdout), res.DroppedBytes)
	}
}
