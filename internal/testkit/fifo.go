package testkit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Gate makes a named pipe that a command under test blocks reading (`read
// line < PATH`), and returns its path and a function that writes one line
// into it, releasing the command. open fails the test if nobody reads the
// pipe within Timeout.
func Gate(t testing.TB) (path string, open func(line string)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "gate")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func(line string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0) // blocks until the reader opens
			if err == nil {
				_, err = f.WriteString(line + "\n")
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(Timeout):
			t.Fatalf("testkit: nobody opened %s for reading within %v", path, Timeout)
		}
	}
}

// Signal makes a named pipe that a command under test writes into (`echo >
// PATH`) to say it got somewhere, and returns its path and a function that
// waits, up to Timeout, until something was written. The read side is opened
// without blocking, so the wait is a poll(2) with a deadline.
func Signal(t testing.TB) (path string, wait func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "signal")
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
		deadline := time.Now().Add(Timeout)
		for {
			ms := int(time.Until(deadline) / time.Millisecond)
			if ms <= 0 {
				t.Fatalf("testkit: nothing was written to %s within %v", path, Timeout)
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
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
			if n > 0 && fds[0].Revents&unix.POLLHUP != 0 {
				// A writer came and went: look for its data, else wait on.
				var b [1]byte
				if k, _ := unix.Read(fd, b[:]); k > 0 {
					return
				}
			}
		}
	}
}
