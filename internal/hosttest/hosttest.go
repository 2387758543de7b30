package hosttest

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// SandboxVariable, when set, is the sandbox level of every host Start
// starts (before the test's tweak).
const SandboxVariable = "DSH_TEST_SANDBOX"

// Start starts a host with the default configuration changed by tweak (nil:
// no change) and opts (its Config is set here, and a process mark added to
// its Env, the test's environment when nil). t.Cleanup stops it and runs the
// checks.
func Start(t testing.TB, tweak func(*config.Config), opts host.Options) *host.Host {
	t.Helper()
	mark := testkit.ProcessMark(t)
	fds := testkit.TerminalFDs(t)
	t.Cleanup(func() {
		if n := testkit.TerminalFDs(t); n != fds {
			t.Errorf("hosttest: %d terminal descriptors open after the test, %d before", n, fds)
		}
	})
	cfg := config.Default()
	if level := os.Getenv(SandboxVariable); level != "" {
		// The suites that start hosts run at another sandbox level (the
		// matrix of .ci/matrix); a test's tweak may still choose its own.
		cfg.Sandbox.Level = level
		// At level fs the tests' files must be there: the matrix puts
		// TMPDIR outside /tmp (which is private there), writable.
		cfg.Sandbox.Writable = os.TempDir()
	}
	if tweak != nil {
		tweak(&cfg)
	}
	opts.Config = &cfg
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	opts.Env = append(opts.Env[:len(opts.Env):len(opts.Env)], mark)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h, err := host.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
		defer cancel()
		if err := h.Stop(ctx); err != nil {
			t.Errorf("hosttest: stopping the host: %v", err)
		}
	})
	return h
}

// Context returns a context that ends after testkit.Timeout or with the test.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	t.Cleanup(cancel)
	return ctx
}
