package metrics_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/metrics"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// scrape reads the registry as Prometheus would.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// value is the sample of the series named exactly (name and labels as
// exposed, e.g. `x_total{tool="bash"}`); -1 when absent.
func value(text, series string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// What a host does shows in the metrics: calls by tool and outcome,
// latency, readiness reasons, clipped bytes, resets by cause, reservation
// conflicts, what runs, session-log appends, and protoactor's instruments;
// the exposition passes Prometheus's own lint (what promtool check metrics
// runs).
// metricsMade counts the Metrics this test process made.
var metricsMade atomic.Int32

func TestAHostsWorkShowsInTheMetrics(t *testing.T) {
	m, err := metrics.New()
	if err != nil {
		t.Fatal(err)
	}
	firstMetrics := metricsMade.Add(1) == 1
	log, err := sessionlog.Open(filepath.Join(t.TempDir(), "s.db"), sessionlog.Options{OnAppend: m.Append})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	h := hosttest.Start(t, nil, host.Options{Metrics: m, SessionLog: log})
	ctx := hosttest.Context(t)
	call := func(tool string, args any) (string, bool) {
		t.Helper()
		raw, _ := json.Marshal(args)
		r, err := h.Call(ctx, "a", tool, raw)
		if err != nil {
			t.Fatal(err)
		}
		return r.Text, r.IsError
	}
	call("bash", map[string]any{"command": "echo one"})
	call("bash", map[string]any{"command": "echo two"})
	call("bash", map[string]any{"command": "head -c 40000 /dev/zero | tr '\\0' x"}) // past maxOutputChars
	call("bash", map[string]any{"command": "sleep 30.5", "timeout_ms": 50})         // a reset by timeout
	call("bash", map[string]any{"command": 5})                                      // bad arguments
	if text, isErr := call("terminal_open", map[string]any{}); isErr {
		t.Fatal(text)
	}
	call("terminal_send", map[string]any{"terminal_id": "t1", "text": "sleep 60.25\n", "run_in_background": true})
	if text, isErr := call("terminal_send", map[string]any{"terminal_id": "t1", "text": "echo x\n"}); !isErr || !strings.Contains(text, "busy") {
		t.Fatalf("a send to a terminal a task holds: %q", text)
	}
	call("nope", map[string]any{})
	if _, err := h.BeginTurn(ctx, "a", "hello"); err != nil {
		t.Fatal(err)
	}

	text := scrape(t, m)
	for series, want := range map[string]float64{
		`dsh_actors_tool_calls_total{outcome="ok",tool="bash"}`:                  3,
		`dsh_actors_tool_calls_total{outcome="tool_error",tool="bash"}`:          2,
		`dsh_actors_tool_calls_total{outcome="tool_error",tool="terminal_send"}`: 1,
		`dsh_actors_tool_calls_total{outcome="tool_error",tool="other"}`:         1,
		`dsh_actors_tool_call_duration_seconds_count{tool="bash"}`:               5,
		`dsh_actors_shell_resets_total{cause="timeout"}`:                         1,
		`dsh_actors_reservation_conflicts_total`:                                 1,
		`dsh_actors_running{kind="agents"}`:                                      1,
		`dsh_actors_running{kind="terminals"}`:                                   1,
		`dsh_actors_running{kind="tasks"}`:                                       1,
		`dsh_actors_limit{kind="agents"}`:                                        4096,
		`dsh_actors_session_log_appends_total{outcome="ok"}`:                     1,
	} {
		if got := value(text, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := value(text, `dsh_actors_output_clipped_bytes_total{tool="bash"}`); got <= 0 {
		t.Errorf("clipped bytes %v, want > 0", got)
	}
	if got := value(text, `dsh_actors_terminal_readiness_total{reason="prompt",tool="terminal_open"}`); got != 1 {
		t.Errorf("terminal_open's readiness: %v\n%s", got, grep(text, "readiness"))
	}
	// protoactor's instruments come through OpenTelemetry's meter provider,
	// which is the process's: only its first Metrics has them (a second run
	// of this test in one process, -count=2, has none).
	if firstMetrics && (value(text, `protoactor_actor_restarted_count_total{actortype="shell.Actor",address="nonhost"}`) != 1 ||
		!strings.Contains(text, `protoactor_actor_message_receive_duration_seconds_bucket{actortype="shell.Actor",address="nonhost",messagetype="*actor.MessageEnvelope",le="0.0001"}`)) {
		t.Errorf("no protoactor instruments:\n%s", grep(text, "protoactor"))
	}
	// No series is labelled with an id.
	if strings.Contains(text, `"a"`) || strings.Contains(text, "t1") || strings.Contains(text, "task-1") {
		t.Errorf("an id in a label:\n%s", text)
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "dsh_actors_") || strings.HasPrefix(p.Metric, "protoactor_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	// promtool itself.
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testkit.Missing(t, "promtool", "promtool is not installed: apt-get install prometheus (Debian's package; .ci/run installs it)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func grep(text, what string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, what) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
