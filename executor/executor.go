package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Request is a command a plugin asks to run.
type Request struct {
	// Plugin names who asks, for the policy and for messages.
	Plugin string
	// Argv is the program and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Env is added to the host's environment.
	Env []string
	// Timeout bounds the run; 0 means DefaultTimeout.
	Timeout time.Duration
}

// DefaultTimeout bounds a run that gives no timeout.
const DefaultTimeout = 5 * time.Second

// MaxOutput is how much of standard output (and of standard error) a run
// keeps.
const MaxOutput = 64 << 10

// Result is what a run gave.
type Result struct {
	Stdout string
	// Stderr is kept for messages (a plugin logs it when a run fails).
	Stderr string
	// ExitCode is the program's exit status; -1 when a signal ended it.
	ExitCode int
	// TimedOut: the timeout passed and the run was killed.
	TimedOut bool
	// DroppedBytes counts output past MaxOutput.
	DroppedBytes int64
}

// Policy decides whether, and how, a request runs.
type Policy interface {
	// Resolve returns the request to run (req itself, or a rewritten one),
	// or an error that refuses it.
	Resolve(ctx context.Context, req Request) (Request, error)
}

// PolicyFunc makes a function a Policy.
type PolicyFunc func(ctx context.Context, req Request) (Request, error)

// Resolve calls f.
func (f PolicyFunc) Resolve(ctx context.Context, req Request) (Request, error) { return f(ctx, req) }

// AllowAll is the default policy: every request runs as it is.
var AllowAll Policy = PolicyFunc(func(_ context.Context, req Request) (Request, error) { return req, nil })

// RefusedError is a request the policy refused.
type RefusedError struct {
	Plugin string
	Argv0  string
	Err    error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("executor: the policy refused %q for plugin %q: %v", e.Argv0, e.Plugin, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Executor runs plugins' commands under a policy.
type Executor struct {
	policy Policy
}

// New returns an executor with the given policy; nil means AllowAll.
func New(p Policy) *Executor {
	if p == nil {
		p = AllowAll
	}
	return &Executor{policy: p}
}

// Run resolves req with the policy and runs what it returns. A refusal is a
// *RefusedError; a program that cannot be started is an error; a program
// that runs gives a Result whatever its exit status.
func (e *Executor) Run(ctx context.Context, req Request) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	argv0 := ""
	if len(req.Argv) > 0 {
		argv0 = req.Argv[0]
	}
	resolved, err := e.policy.Resolve(ctx, req)
	if err != nil {
		return Result{}, &RefusedError{Plugin: req.Plugin, Argv0: argv0, Err: err}
	}
	if len(resolved.Argv) == 0 || resolved.Argv[0] == "" {
		return Result{}, fmt.Errorf("executor: plugin %q: no program to run", req.Plugin)
	}
	timeout := resolved.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, resolved.Argv[0], resolved.Argv[1:]...)
	cmd.Env = append(os.Environ(), resolved.Env...)
	cmd.Stdin = nil // /dev/null: a plugin's command never reads a terminal
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A group of its own, killed whole: a child it left behind would hold
	// the output pipe open and outlive the run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		// Whatever it left in its group goes too, also after a clean exit.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), DroppedBytes: stdout.dropped + stderr.dropped, ExitCode: -1}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	// Killed by us, or ended by itself: a program that exited on its own
	// just as the deadline passed (a loaded machine) did not time out.
	ended := cmd.ProcessState != nil && cmd.ProcessState.Exited()
	switch {
	case ctx.Err() != nil && !ended:
		return Result{}, ctx.Err()
	case runCtx.Err() != nil && !ended:
		res.TimedOut = true
		return res, nil
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) && !errors.Is(err, exec.ErrWaitDelay) {
		return Result{}, fmt.Errorf("executor: plugin %q: running %q: %w", req.Plugin, resolved.Argv[0], err)
	}
	return res, nil
}

// capped keeps the first MaxOutput bytes written to it and counts the rest.
type capped struct {
	buf     bytes.Buffer
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	room := MaxOutput - c.buf.Len()
	if room < len(p) {
		c.dropped += int64(len(p) - max(room, 0))
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) String() string { return c.buf.String() }
