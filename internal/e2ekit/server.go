package e2ekit

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// HTTPOptions is how StartHTTP starts `dsh-actors serve --http`.
type HTTPOptions struct {
	Suite  string        // the suite, at the start of every failure message
	Bin    string        // the dsh-actors binary
	Env    []string      // its environment
	Dir    string        // its working directory; "" is the test's
	Config string        // its --config; "" gives none
	Token  string        // its --token
	Grace  time.Duration // its --grace
}

// HTTPServer is a `dsh-actors serve --http` the test started.
type HTTPServer struct {
	URL   string // where it serves MCP: http://127.0.0.1:PORT/mcp
	Token string // its bearer token

	opts   HTTPOptions
	cmd    *exec.Cmd
	output *watcher   // its standard output and error
	done   chan error // cmd.Wait's result
	once   sync.Once
}

var servingRE = regexp.MustCompile(`dsh-actors: serving MCP at (http://\S+/mcp)\n`)

// StartHTTP starts the server on a free loopback port and waits for the
// line that gives its address. t.Cleanup stops it if the test did not.
func StartHTTP(t *testing.T, o HTTPOptions) *HTTPServer {
	t.Helper()
	args := []string{"serve", "--http", "127.0.0.1:0", "--token", o.Token}
	if o.Config != "" {
		args = append(args, "--config", o.Config)
	}
	cmd := exec.Command(o.Bin, append(args, "--grace", o.Grace.String())...)
	cmd.Env = o.Env
	cmd.Dir = o.Dir
	w := newWatcher(servingRE)
	cmd.Stdout = w
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &HTTPServer{Token: o.Token, opts: o, cmd: cmd, output: w, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() { s.Stop(t) })
	timer := time.NewTimer(testkit.Timeout)
	defer timer.Stop()
	select {
	case m := <-w.found:
		s.URL = m[1]
	case err := <-s.done:
		s.done <- err // for Stop
		t.Fatalf("%s: dsh-actors serve --http exited before serving: %v\n%s", o.Suite, err, w)
	case <-timer.C:
		t.Fatalf("%s: dsh-actors serve --http printed no address within %v:\n%s", o.Suite, testkit.Timeout, w)
	}
	return s
}

// PID is the server's process id.
func (s *HTTPServer) PID() int { return s.cmd.Process.Pid }

// Stop sends SIGTERM and waits for the server to exit; it must exit with
// status 0 within its grace and testkit.Timeout, else it is killed and the
// test fails. Only the first call does anything.
func (s *HTTPServer) Stop(t *testing.T) {
	t.Helper()
	s.once.Do(func() {
		suite, grace := s.opts.Suite, s.opts.Grace
		start := time.Now()
		if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("%s: SIGTERM to the server: %v", suite, err)
		}
		limit := grace + testkit.Timeout
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("%s: dsh-actors serve --http after SIGTERM: %v; its output:\n%s", suite, err, s.output)
			}
			t.Logf("the server stopped %v after SIGTERM", time.Since(start).Round(time.Millisecond))
		case <-timer.C:
			s.cmd.Process.Kill()
			<-s.done
			t.Errorf("%s: dsh-actors serve --http did not exit within %v of SIGTERM (grace %v; killed); its output:\n%s", suite, limit, grace, s.output)
		}
	})
}

// watcher collects a process's output and sends the first match of re on
// found.
type watcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	re    *regexp.Regexp
	found chan []string
	sent  bool
}

func newWatcher(re *regexp.Regexp) *watcher {
	return &watcher{re: re, found: make(chan []string, 1)}
}

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		if m := w.re.FindStringSubmatch(w.buf.String()); m != nil {
			w.sent = true
			w.found <- m
		}
	}
	return len(p), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
