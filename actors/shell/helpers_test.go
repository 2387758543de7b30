package shell_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, testkit.LeakOptions()...)
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

// shellPID asks the agent's shell for its pid, which is also its session id.
func shellPID(t *testing.T, h *host.Host, agent string) int {
	t.Helper()
	res := bash(t, h, agent, "echo $$")
	pid, err := strconv.Atoi(strings.TrimSpace(res.Text))
	if err != nil {
		t.Fatalf("shell pid: %q", res.Text)
	}
	return pid
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

// newFIFO makes a named pipe for a command to signal through; wait returns
// once something has been written to it, and fails the test after
// testkit.Timeout. Opening the read side without blocking lets the wait be a
// poll(2) with a deadline rather than an open that might never return.
func newFIFO(t *testing.T) (path string, wait func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return path, func() {
		t.Helper()
		deadline := time.Now().Add(testkit.Timeout)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			ms := int(time.Until(deadline) / time.Millisecond)
			if ms <= 0 {
				t.Fatalf("nothing was written to %s within %v", path, testkit.Timeout)
			}
			n, err := unix.Poll(fds, ms)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 && fds[0].Revents&unix.POLLIN != 0 {
				return
			}
			// POLLHUP without data (no writer yet is not a hang-up on Linux,
			// but be safe): keep waiting until the deadline.
			if n > 0 && fds[0].Revents&unix.POLLHUP != 0 {
				var b [1]byte
				if k, _ := unix.Read(fd, b[:]); k > 0 {
					return
				}
			}
		}
	}
}

// openGate writes a line into the named pipe path, which a command is
// blocked reading; it fails the test if nobody reads it within the timeout.
func openGate(t *testing.T, path string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the reader opens
		if err == nil {
			_, err = f.WriteString("go\n")
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testkit.Timeout):
		t.Fatalf("nobody opened %s for reading within %v", path, testkit.Timeout)
	}
}
