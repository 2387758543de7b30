package tmuxprobe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/agent"
	"github.com/dsh-actors/dsh-actors/actors/tmuxprobe"
	"github.com/dsh-actors/dsh-actors/executor"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

// The test binary runs itself inside a tmux pane as a child: with
// TMUXPROBE_CHILD set it reads its own location, writes it to that file,
// says so on the signal fifo and waits on the gate fifo before it exits (so
// the pane lives while the test looks at it).
func TestMain(m *testing.M) {
	if out := os.Getenv("TMUXPROBE_CHILD"); out != "" {
		child(out)
		return
	}
	if log := os.Getenv("TMUXPROBE_TURNS"); log != "" {
		turns(log)
		return
	}
	testkit.Main(m)
}

type reading struct {
	Loc tmuxprobe.Location
	OK  bool
	Err string
}

func child(out string) {
	loc, ok, err := tmuxprobe.Read(context.Background(), executor.New(nil), os.Getpid())
	r := reading{Loc: loc, OK: ok}
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	os.WriteFile(out, b, 0o600)
	if f, err := os.OpenFile(os.Getenv("TMUXPROBE_SIGNAL"), os.O_WRONLY, 0); err == nil {
		f.WriteString("read\n")
		f.Close()
	}
	if f, err := os.Open(os.Getenv("TMUXPROBE_GATE")); err == nil {
		f.Read(make([]byte, 16))
		f.Close()
	}
}

// server is a tmux server on a private socket, killed when the test ends.
type server struct {
	t      testing.TB
	socket string
	mark   string
}

func startServer(t testing.TB) *server {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		testkit.Missing(t, "tmux", "tmux is not installed: apt-get install tmux (.ci/run installs it)")
	}
	s := &server{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock"), mark: testkit.ProcessMark(t)}
	t.Cleanup(func() { exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	return s
}

func (s *server) tmux(args ...string) string {
	s.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", s.socket, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), s.mark)
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %q: %v: %s", args, err, out)
	}
	return string(out)
}

// readInPane starts a session whose one pane runs the test binary as a
// child, and returns its reading and the pane's id as tmux tells it.
func (s *server) readInPane(session, window string) (reading, string) {
	s.t.Helper()
	out := filepath.Join(s.t.TempDir(), "reading.json")
	sig, read := testkit.Signal(s.t)
	gate, release := testkit.Gate(s.t)
	self, _ := os.Executable()
	s.tmux("new-session", "-d", "-s", session, "-n", window, "-x", "120", "-y", "40",
		"env", "TMUXPROBE_CHILD="+out, "TMUXPROBE_SIGNAL="+sig, "TMUXPROBE_GATE="+gate, self, "-test.run=^$")
	read()
	defer release("done")
	var r reading
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &r) != nil {
		s.t.Fatalf("the child's reading: %v %q", err, b)
	}
	pane := strings.TrimSpace(s.tmux("display-message", "-p", "-t", session+":", "#{pane_id}"))
	return r, pane
}

func TestAPaneReadsItsOwnLocationWhateverItsNames(t *testing.T) {
	s := startServer(t)
	window := "tab\there \"quoted\" \\t literal, é\nsecond line"
	r, pane := s.readInPane("sess one", window)
	if r.Err != "" || !r.OK {
		t.Fatalf("in a pane: %+v", r)
	}
	l := r.Loc
	if l.Session != "sess one" || l.WindowName != window || l.PaneID != pane || l.WindowIndex != 0 || l.PaneIndex != 0 ||
		!l.WindowActive || !l.PaneActive || !strings.Contains(l.Layout, "120x40") {
		t.Fatalf("reading %+v, pane %s", l, pane)
	}
	want := fmt.Sprintf("tmux location (turn 3):\nsession sess one, window 0 %q, pane 0 %s\nwindow active=1, pane active=1, layout %s", window, pane, l.Layout)
	if got := l.Render(3); got != want {
		t.Fatalf("rendered:\n%s\nwant:\n%s", got, want)
	}
}

func TestAnInheritedPaneOrNoneIsNotTmux(t *testing.T) {
	s := startServer(t)
	s.tmux("new-session", "-d", "-s", "other", "sleep 600")
	pane := strings.TrimSpace(s.tmux("display-message", "-p", "-t", "other:", "#{pane_id}"))
	ex := executor.New(nil)
	// This process is not in that pane: $TMUX and $TMUX_PANE as a terminal
	// started from a tmux shell would inherit them.
	t.Setenv("TMUX", s.socket+",1,0")
	t.Setenv("TMUX_PANE", pane)
	if _, ok, err := tmuxprobe.Read(context.Background(), ex, os.Getpid()); ok || err != nil {
		t.Fatalf("an inherited $TMUX_PANE: ok %v, err %v", ok, err)
	}
	// And the listener injects nothing for it.
	l, err := sessionlog.Open(filepath.Join(t.TempDir(), "sessions.db"), sessionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lis := &tmuxprobe.Listener{Executor: ex, PID: os.Getpid()}
	if err := lis.PreStep(context.Background(), &agent.Step{Agent: "a", Turn: 1, Step: 1, Log: l}); err != nil {
		t.Fatal(err)
	}
	if n, _ := countInjections(l); n != 0 {
		t.Fatalf("an inherited $TMUX_PANE injected %d readings", n)
	}
	t.Setenv("TMUX_PANE", "")
	if _, ok, err := tmuxprobe.Read(context.Background(), ex, os.Getpid()); ok || err != nil {
		t.Fatalf("no $TMUX_PANE: ok %v, err %v", ok, err)
	}
	refusing := executor.New(executor.PolicyFunc(func(context.Context, executor.Request) (executor.Request, error) {
		return executor.Request{}, errors.New("no tmux here")
	}))
	var refused *executor.RefusedError
	if _, ok, err := tmuxprobe.Read(context.Background(), refusing, os.Getpid()); ok || !errors.As(err, &refused) {
		t.Fatalf("a refusing policy: ok %v, err %v", ok, err)
	}
}
