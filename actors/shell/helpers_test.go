package shell_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// newHost starts a host for one test; see hosttest.Start for what is
// checked when the test ends.
func newHost(t *testing.T, tweak func(*config.Config)) *host.Host {
	t.Helper()
	return hosttest.Start(t, tweak, host.Options{})
}

// bash runs one command and fails the test if the call itself fails.
func bash(t *testing.T, h *host.Host, agent, command string) shell.Result {
	t.Helper()
	return bashArgs(t, h, agent, shell.Args{Command: command})
}

func bashArgs(t *testing.T, h *host.Host, agent string, args shell.Args) shell.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	res, err := h.Bash(ctx, agent, args)
	if err != nil {
		t.Fatalf("bash %q: %v", args.Command, err)
	}
	return res
}

// wantText fails unless the result is exactly text with exit status 0.
func wantText(t *testing.T, res shell.Result, text string) {
	t.Helper()
	if res.Text != text || res.ExitCode == nil || *res.ExitCode != 0 || res.IsError {
		t.Fatalf("got %q (exit %v, error %v), want %q with exit 0", res.Text, exitCode(res), res.IsError, text)
	}
}

func exitCode(res shell.Result) string {
	if res.ExitCode == nil {
		return "none"
	}
	return strconv.Itoa(*res.ExitCode)
}

// shellPID asks the agent's shell for its pid on the host (in its sandbox
// `echo $$` is another number), which is also its session id.
func shellPID(t *testing.T, h *host.Host, agent string) int {
	t.Helper()
	return testkit.HostPID(t, bash(t, h, agent, testkit.ShellPID).Text)
}

// call runs a generic tool call.
func call(t *testing.T, h *host.Host, agent, tool, args string) (text string, isError bool, data map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	r, err := h.Call(ctx, agent, tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("call %s %s: %v", tool, args, err)
	}
	if len(r.Data) > 0 {
		if err := json.Unmarshal(r.Data, &data); err != nil {
			t.Fatalf("data %q: %v", r.Data, err)
		}
	}
	return r.Text, r.IsError, data
}

// bashWith runs one command with arguments changed by opts.
func bashWith(t *testing.T, h *host.Host, agent, command string, opts ...func(*shell.Args)) shell.Result {
	t.Helper()
	args := shell.Args{Command: command}
	for _, o := range opts {
		o(&args)
	}
	return bashArgs(t, h, agent, args)
}

func timeoutMs(ms int64) func(*shell.Args) { return func(a *shell.Args) { a.TimeoutMs = ms } }

// atOnce runs fn(0) to fn(n-1) concurrently and fails the test with every
// error they return.
func atOnce(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
