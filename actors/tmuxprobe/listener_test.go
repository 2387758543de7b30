package tmuxprobe_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/actors/agent"
	"github.com/dsh-actors/dsh-actors/actors/tmuxprobe"
	"github.com/dsh-actors/dsh-actors/executor"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

// countInjections counts the tmux injections in agent a's raw log.
func countInjections(l *sessionlog.Log) (n int, last string) {
	l.Scan("a", 1, func(r sessionlog.Record) error {
		if u := r.Event.GetUser(); u.GetSource().GetPlugin() == tmuxprobe.Plugin {
			n, last = n+1, u.GetText()
		}
		return nil
	})
	return n, last
}

// turns is the child that plays an agent host inside a pane: it runs the
// listener for the commands it reads from $TMUXPROBE_CTL and answers each
// with the number of tmux injections in the log, on $TMUXPROBE_RESP.
func turns(path string) {
	ctl, err := os.Open(os.Getenv("TMUXPROBE_CTL"))
	if err != nil {
		os.Exit(2)
	}
	resp, err := os.OpenFile(os.Getenv("TMUXPROBE_RESP"), os.O_WRONLY, 0)
	if err != nil {
		os.Exit(2)
	}
	l, err := sessionlog.Open(path, sessionlog.Options{})
	if err != nil {
		fmt.Fprintf(resp, "error %v\n", err)
		os.Exit(1)
	}
	defer l.Close()
	lis := &tmuxprobe.Listener{Executor: executor.New(nil), PID: os.Getpid()}
	sc := bufio.NewScanner(ctl)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch f[0] {
		case "turn":
			want, _ := strconv.Atoi(f[1])
			turn, _, err := l.BeginTurn("a", &messages.Event{Step: 1, Kind: &messages.Event_User{User: &messages.UserMessage{Text: "go on"}}})
			if err != nil || turn != uint32(want) {
				fmt.Fprintf(resp, "error turn %d, want %d: %v\n", turn, want, err)
				continue
			}
			if err := lis.PreStep(context.Background(), &agent.Step{Agent: "a", Turn: turn, Step: 1, Log: l}); err != nil {
				fmt.Fprintf(resp, "error %v\n", err)
				continue
			}
		case "compact":
			var next uint64
			l.ScanBackward("a", func(r sessionlog.Record) error { next = r.Seq + 1; return errors.New("stop") })
			l.Append("a", &messages.Event{Kind: &messages.Event_Compaction{Compaction: &messages.Compaction{Upto: next, Summary: "earlier"}}})
		case "corrupt":
			l.Append("a", &messages.Event{Kind: &messages.Event_User{User: &messages.UserMessage{Text: "one line only", Source: tmuxprobe.Source()}}})
		case "quit":
			fmt.Fprintln(resp, "bye")
			return
		case "bench-due", "bench-suppressed":
			// n first steps of fresh turns: due ones read tmux (and inject
			// only the first time); suppressed ones stop at the interval.
			n, _ := strconv.Atoi(f[1])
			b := lis
			if f[0] == "bench-suppressed" {
				b = &tmuxprobe.Listener{Executor: lis.Executor, PID: lis.PID, RefreshInterval: time.Hour}
			}
			var spent time.Duration // in the listener only, not in beginning the turns
			for range n {
				turn, _, _ := l.BeginTurn("a", &messages.Event{Step: 1, Kind: &messages.Event_User{User: &messages.UserMessage{Text: "go on"}}})
				start := time.Now()
				b.PreStep(context.Background(), &agent.Step{Agent: "a", Turn: turn, Step: 1, Log: l})
				spent += time.Since(start)
			}
			fmt.Fprintf(resp, "%d\n", spent.Nanoseconds()/int64(n))
			continue
		}
		n, last := countInjections(l)
		fmt.Fprintf(resp, "%d %q\n", n, last)
	}
}

// driver talks to one turns child at a time.
type driver struct {
	t         testing.TB
	ctl, resp string
	w, rf     *os.File
	r         *bufio.Reader
}

func (d *driver) connect() {
	d.t.Helper()
	done := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(d.ctl, os.O_WRONLY, 0)
		if err == nil {
			var r *os.File
			r, err = os.Open(d.resp)
			d.w, d.rf, d.r = w, r, bufio.NewReader(r)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			d.t.Fatal(err)
		}
	case <-time.After(testkit.Timeout):
		d.t.Fatal("the child in the pane did not open its fifos")
	}
}

func (d *driver) do(cmd string) string {
	d.t.Helper()
	fmt.Fprintln(d.w, cmd)
	done := make(chan string, 1)
	go func() { l, _ := d.r.ReadString('\n'); done <- strings.TrimSpace(l) }()
	select {
	case l := <-done:
		return l
	case <-time.After(testkit.Timeout):
		d.t.Fatalf("no answer to %q", cmd)
		return ""
	}
}

// quit ends the child and waits until it has closed its end (it exited),
// so that the next connect meets the next child.
func (d *driver) quit() {
	d.t.Helper()
	if got := d.do("quit"); got != "bye" {
		d.t.Fatalf("quit: %q", got)
	}
	d.w.Close()
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, d.r); close(done) }()
	select {
	case <-done:
	case <-time.After(testkit.Timeout):
		d.t.Fatal("the child did not exit after quit")
	}
	d.rf.Close()
}

func (d *driver) count(cmd string) int {
	d.t.Helper()
	l := d.do(cmd)
	n, err := strconv.Atoi(strings.Fields(l + " x")[0])
	if err != nil {
		d.t.Fatalf("%s: %q", cmd, l)
	}
	return n
}

// startTurns starts a session whose one pane runs the turns child twice
// (the second is the host restarted), and connects to the first.
func startTurns(s *server, session string) *driver {
	t := s.t
	t.Helper()
	dir := t.TempDir()
	d := &driver{t: t, ctl: filepath.Join(dir, "ctl"), resp: filepath.Join(dir, "resp")}
	for _, p := range []string{d.ctl, d.resp} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	self, _ := os.Executable()
	log := filepath.Join(dir, "sessions.db")
	env := fmt.Sprintf("env TMUXPROBE_TURNS=%s TMUXPROBE_CTL=%s TMUXPROBE_RESP=%s %s -test.run=^$", log, d.ctl, d.resp, self)
	s.tmux("new-session", "-d", "-s", session, "-n", "editor", "-x", "120", "-y", "40", env+"; "+env)
	d.connect()
	return d
}

func TestTheLocationIsInjectedOncePerChange(t *testing.T) {
	s := startServer(t)
	d := startTurns(s, "work")
	pane := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "work:", "#{pane_id}"))
	steps := []struct {
		before func()
		cmd    string
		want   int
		why    string
	}{
		{nil, "turn 1", 1, "the first turn"},
		{nil, "turn 2", 1, "an unchanged location"},
		{func() { s.tmux("rename-window", "-t", pane, "renamed") }, "turn 3", 2, "a renamed window"},
		{func() { s.tmux("split-window", "-d", "-t", pane, "sleep 600") }, "turn 4", 3, "a new layout"},
		{func() { s.tmux("break-pane", "-d", "-s", pane) }, "turn 5", 4, "a pane moved to another window"},
		{nil, "compact", 4, "a compaction"},
		{nil, "turn 6", 4, "an unchanged location after a compaction"},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		if got := d.count(st.cmd); got != st.want {
			t.Fatalf("%s: %d injections, want %d", st.why, got, st.want)
		}
	}
	last := d.do("turn 7")
	if !strings.Contains(last, `tmux location (turn 5):`) || !strings.Contains(last, "window 1 ") {
		t.Fatalf("the latest reading: %s", last)
	}
	d.quit()
	d.connect() // the restarted host
	if got := d.count("turn 8"); got != 4 {
		t.Fatalf("after a restart: %d injections, want 4 (no change)", got)
	}
	if got := d.count("corrupt"); got != 5 {
		t.Fatalf("after the corrupt reading: %d", got)
	}
	if got := d.count("turn 9"); got != 6 {
		t.Fatalf("a corrupt earlier reading: %d injections, want 6 (read again)", got)
	}
	d.quit()
}

// BenchmarkListener measures a turn's first step in a real pane: a due
// reading (the tmux query runs; the location is unchanged, so nothing is
// injected) and one suppressed by the refresh interval (the log is scanned,
// tmux is not asked).
func BenchmarkListener(b *testing.B) {
	for _, kind := range []string{"due", "suppressed"} {
		b.Run(kind, func(b *testing.B) {
			d := startTurns(startServer(b), "bench")
			defer d.quit()
			d.count("turn 1") // the first reading, injected
			b.ResetTimer()
			ns, err := strconv.ParseInt(d.do(fmt.Sprintf("bench-%s %d", kind, b.N)), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(ns)/1e6, "ms/turn")
		})
	}
}

func stepIn(t *testing.T, l *sessionlog.Log, turn, step uint32) *agent.Step {
	return &agent.Step{Agent: "a", Turn: turn, Step: step, Log: l}
}

func TestTheNoOpPaths(t *testing.T) {
	l, err := sessionlog.Open(filepath.Join(t.TempDir(), "sessions.db"), sessionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	calls := 0
	counting := executor.New(executor.PolicyFunc(func(_ context.Context, r executor.Request) (executor.Request, error) {
		calls++
		return r, nil
	}))
	refusing := executor.New(executor.PolicyFunc(func(context.Context, executor.Request) (executor.Request, error) {
		calls++
		return executor.Request{}, errors.New("not here")
	}))
	t.Setenv("TMUX_PANE", "")
	for _, c := range []struct {
		name string
		lis  *tmuxprobe.Listener
		step uint32
		ctx  func() context.Context
		runs int
	}{
		{"no executor", &tmuxprobe.Listener{PID: os.Getpid()}, 1, context.Background, 0},
		{"not the first step", &tmuxprobe.Listener{Executor: counting, PID: os.Getpid()}, 2, context.Background, 0},
		{"not in tmux", &tmuxprobe.Listener{Executor: counting, PID: os.Getpid()}, 1, context.Background, 1},
		{"a cancelled turn", &tmuxprobe.Listener{Executor: counting, PID: os.Getpid()}, 1, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, 1},
		{"a refusal", &tmuxprobe.Listener{Executor: refusing, PID: os.Getpid(), Logger: logger}, 1, context.Background, 1},
	} {
		calls = 0
		if err := c.lis.PreStep(c.ctx(), stepIn(t, l, 1, c.step)); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if n, _ := countInjections(l); n != 0 {
			t.Errorf("%s: injected", c.name)
		}
		if calls > c.runs {
			t.Errorf("%s: the executor was asked %d times", c.name, calls)
		}
	}
	if !strings.Contains(logged.String(), "not here") || !strings.Contains(logged.String(), "WARN") {
		t.Errorf("the refusal was not logged as a warning: %q", logged.String())
	}

	// The interval is checked before the query: within it, the executor is
	// never asked.
	now := time.Now()
	l.Append("a", &messages.Event{TimeUnixNano: now.UnixNano(), Kind: &messages.Event_User{User: &messages.UserMessage{
		Text: "tmux location (turn 1):\nsession s, window 0 \"w\", pane 0 %0\nwindow active=1, pane active=1, layout x", Source: tmuxprobe.Source()}}})
	calls = 0
	lis := &tmuxprobe.Listener{Executor: counting, PID: os.Getpid(), RefreshInterval: time.Minute, Now: func() time.Time { return now.Add(59 * time.Second) }}
	lis.PreStep(context.Background(), stepIn(t, l, 2, 1))
	if calls != 0 {
		t.Fatal("the executor was asked within the refresh interval")
	}
	lis.Now = func() time.Time { return now.Add(61 * time.Second) }
	lis.PreStep(context.Background(), stepIn(t, l, 3, 1))
	if calls != 1 {
		t.Fatalf("after the refresh interval the executor was asked %d times, want 1", calls)
	}
}
