package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Outcome is how a tool call ended.
type Outcome string

// The outcomes of a call.
const (
	// OK: the tool answered with a result that is not an error.
	OK Outcome = "ok"
	// ToolError: the tool answered with an error result (bad arguments, a
	// timeout, a busy terminal, a limit).
	ToolError Outcome = "tool_error"
	// Cancelled: the caller withdrew the call.
	Cancelled Outcome = "cancelled"
	// Failed: the call itself failed (a stopped host, a bad agent id).
	Failed Outcome = "failed"
)

// Metrics is the runtime's registry and instruments.
type Metrics struct {
	reg *prometheus.Registry

	calls        *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	readiness    *prometheus.CounterVec
	clipped      *prometheus.CounterVec
	resets       *prometheus.CounterVec
	failures     *prometheus.CounterVec
	conflicts    prometheus.Counter
	appends      *prometheus.CounterVec
	appendTime   prometheus.Histogram
	sessions     prometheus.Gauge
	sessionsSeen prometheus.Counter
	sandboxes    *prometheus.CounterVec
	sandboxStart prometheus.Histogram

	// meters is the meter provider protoactor's instruments record to;
	// nil when another Metrics of the process has them.
	meters metric.MeterProvider

	mu    sync.Mutex
	tools map[string]bool
	usage func() []Usage
}

// Usage is what a host runs of one kind, against its limit.
type Usage struct {
	Kind    string
	InUse   int64
	Max     int64
	Refused uint64
}

// protoactorOnce: OpenTelemetry's meter provider is global, so only one
// registry of the process can carry protoactor's instruments.
var protoactorOnce sync.Once

// Exponential latency buckets from 100 µs to about 105 s: an echo takes
// about 0.1 ms, a build minutes.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 4, 11)

// New makes a registry with the runtime's instruments, Go's and the
// process's collectors and, for the first one of the process, protoactor's
// instruments.
func New() (*Metrics, error) {
	m := &Metrics{reg: prometheus.NewRegistry(), tools: map[string]bool{}}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dsh_actors_tool_calls_total",
		Help: "Tool calls answered, by tool and outcome (ok, tool_error, cancelled, failed).",
	}, []string{"tool", "outcome"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dsh_actors_tool_call_duration_seconds",
		Help:    "Time from a tool call to its answer, by tool.",
		Buckets: latencyBuckets,
	}, []string{"tool"})
	m.readiness = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dsh_actors_terminal_readiness_total",
		Help: "Terminal and task results by the reason the program was taken to be ready.",
	}, []string{"tool", "reason"})
	m.clipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dsh_actors_output_clipped_bytes_total",
		Help: "Bytes of output left out of results for their cap, by tool.",
	}, []string{"tool"})
	m.resets = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dsh_actors_shell_resets_total",
		Help: "Persistent bash shells thrown away and restarted, by cause.",
	}, []string{"cause"})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dsh_actors_actor_failures_total",
		Help: "Unexpected actor failures (panics), by kind of actor; each is a restart or a stop, as its supervisor decides.",
	}, []string{"kind"})
	m.conflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dsh_actors_reservation_conflicts_total",
		Help: "terminal_send calls refused because another send or a background task held the terminal.",
	})
	m.appends = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dsh_actors_session_log_appends_total",
		Help: "Session-log appends, by outcome (ok, error).",
	}, []string{"outcome"})
	m.appendTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dsh_actors_session_log_append_duration_seconds",
		Help:    "Time of a session-log append, its commit included.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	m.sessions = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dsh_actors_mcp_sessions",
		Help: "MCP sessions open.",
	})
	m.sessionsSeen = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dsh_actors_mcp_sessions_started_total",
		Help: "MCP sessions started.",
	})
	m.sandboxes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dsh_actors_sandboxes_made_total",
		Help: "Agent sandboxes made, by the level asked and the mechanisms obtained (process, limits, nonet, fs joined by +; weaker than asked when they differ).",
	}, []string{"asked", "obtained"})
	m.sandboxStart = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dsh_actors_sandbox_start_seconds",
		Help:    "Time to make an agent's sandbox (its init ready, its cgroup joined).",
		Buckets: latencyBuckets,
	})
	err := errors.Join(
		m.reg.Register(m.sandboxes), m.reg.Register(m.sandboxStart),
		m.reg.Register(m.calls), m.reg.Register(m.latency), m.reg.Register(m.readiness),
		m.reg.Register(m.clipped), m.reg.Register(m.resets), m.reg.Register(m.failures),
		m.reg.Register(m.conflicts), m.reg.Register(m.appends), m.reg.Register(m.appendTime),
		m.reg.Register(m.sessions), m.reg.Register(m.sessionsSeen),
		m.reg.Register(usageCollector{m}),
		m.reg.Register(collectors.NewGoCollector()),
		m.reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	)
	if err != nil {
		return nil, err
	}
	protoactorOnce.Do(func() {
		exp, perr := otelprom.New(otelprom.WithRegisterer(m.reg), otelprom.WithoutUnits(),
			otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
		if perr != nil {
			err = perr
			return
		}
		// protoactor's receive times are in seconds, but OpenTelemetry's
		// default buckets (0 to 10,000) are for milliseconds.
		seconds := sdkmetric.NewView(
			sdkmetric.Instrument{Name: "protoactor_actor_message_receive_duration_seconds"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: latencyBuckets}})
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(seconds))
		otel.SetMeterProvider(mp)
		m.meters = mp
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Registry is where the instruments are; an embedding program may add its
// own collectors to it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: nil, Registry: m.reg})
}

// ActorSystemOptions turn protoactor's instruments on for an actor system,
// when this Metrics carries them.
func (m *Metrics) ActorSystemOptions() []actor.ConfigOption {
	if m == nil || m.meters == nil {
		return nil
	}
	return []actor.ConfigOption{actor.WithMetricProviders(m.meters)}
}

// ReportUsage sets where the scrape reads what the host runs; the last
// call wins.
func (m *Metrics) ReportUsage(usage func() []Usage) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.usage = usage
	m.mu.Unlock()
}

// resultData is what the instruments read of a result's structured data.
type resultData struct {
	ReadyReason  string `json:"ready_reason"`
	ClippedBytes int64  `json:"clipped_bytes"`
	Busy         bool   `json:"busy"`
}

// readyReasons are the readiness reasons a label may name.
var readyReasons = map[string]bool{
	"prompt": true, "stdin_read": true, "inferred_idle": true, "timeout": true,
	"exited": true, "running": true, "killed": true,
}

// Call records one tool call: its tool, how long it took, and its result
// (isError and the structured data) or the call's own error.
func (m *Metrics) Call(tool string, took time.Duration, isError bool, data []byte, err error, cancelled bool) {
	if m == nil {
		return
	}
	tool = m.toolLabel(tool)
	outcome := OK
	switch {
	case cancelled:
		outcome = Cancelled
	case err != nil:
		outcome = Failed
	case isError:
		outcome = ToolError
	}
	m.calls.WithLabelValues(tool, string(outcome)).Inc()
	m.latency.WithLabelValues(tool).Observe(took.Seconds())
	if len(data) == 0 {
		return
	}
	var d resultData
	if json.Unmarshal(data, &d) != nil {
		return
	}
	if d.ReadyReason != "" {
		m.readiness.WithLabelValues(tool, bounded(readyReasons, d.ReadyReason)).Inc()
	}
	if d.ClippedBytes > 0 {
		m.clipped.WithLabelValues(tool).Add(float64(d.ClippedBytes))
	}
	if d.Busy {
		m.conflicts.Inc()
	}
}

func (m *Metrics) toolLabel(tool string) string {
	m.mu.Lock()
	known := m.tools[tool]
	m.mu.Unlock()
	if known {
		return tool
	}
	return "other"
}

// KnownTools adds tool names that may appear as labels (a host adds its
// tools when it starts); calls of other names are counted as "other".
func (m *Metrics) KnownTools(names ...string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	for _, n := range names {
		m.tools[n] = true
	}
	m.mu.Unlock()
}

// resetCauses are the causes a shell reset label may name.
var resetCauses = map[string]bool{"timeout": true, "exited": true, "cancelled": true, "stuck": true, "broken": true}

// ShellReset records a shell thrown away, with its cause.
func (m *Metrics) ShellReset(cause string) {
	if m == nil {
		return
	}
	m.resets.WithLabelValues(bounded(resetCauses, cause)).Inc()
}

// SandboxMade records an agent's sandbox made in took, as asked and as
// obtained (both bounded: a level, and a set of four mechanisms).
func (m *Metrics) SandboxMade(asked, obtained string, took time.Duration) {
	if m == nil {
		return
	}
	m.sandboxes.WithLabelValues(asked, obtained).Inc()
	m.sandboxStart.Observe(took.Seconds())
}

// actorKinds are the kinds of actor a failure label may name.
var actorKinds = map[string]bool{"host": true, "agent": true, "shell": true, "terminal": true, "tasks": true, "task": true}

// ActorFailure records an unexpected failure of an actor of kind.
func (m *Metrics) ActorFailure(kind string) {
	if m == nil {
		return
	}
	m.failures.WithLabelValues(bounded(actorKinds, kind)).Inc()
}

// Append records a session-log append (sessionlog.Options.OnAppend).
func (m *Metrics) Append(took time.Duration, err error) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.appends.WithLabelValues(outcome).Inc()
	m.appendTime.Observe(took.Seconds())
}

// SessionStarted and SessionEnded count MCP sessions.
func (m *Metrics) SessionStarted() {
	if m != nil {
		m.sessions.Inc()
		m.sessionsSeen.Inc()
	}
}

// SessionEnded: see SessionStarted.
func (m *Metrics) SessionEnded() {
	if m != nil {
		m.sessions.Dec()
	}
}

// usageCollector reads the host's usage at each scrape.
type usageCollector struct{ m *Metrics }

var (
	runningDesc = prometheus.NewDesc("dsh_actors_running",
		"What the host runs now, by kind (agents, shells, terminals, tasks).", []string{"kind"}, nil)
	limitDesc = prometheus.NewDesc("dsh_actors_limit",
		"The host's limit of each kind (limits.* in the configuration); 0 means none.", []string{"kind"}, nil)
	refusedDesc = prometheus.NewDesc("dsh_actors_limit_refusals_total",
		"What was refused because the host's limit of its kind was reached.", []string{"kind"}, nil)
)

func (c usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningDesc
	ch <- limitDesc
	ch <- refusedDesc
}

func (c usageCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	usage := c.m.usage
	c.m.mu.Unlock()
	if usage == nil {
		return
	}
	for _, u := range usage() {
		ch <- prometheus.MustNewConstMetric(runningDesc, prometheus.GaugeValue, float64(u.InUse), u.Kind)
		ch <- prometheus.MustNewConstMetric(limitDesc, prometheus.GaugeValue, float64(u.Max), u.Kind)
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(u.Refused), u.Kind)
	}
}

// ResetCauser is a failure that is a shell reset with a cause (the shell
// actor's *shell.ResetError).
type ResetCauser interface{ ResetCause() string }

// Failures is a receiver middleware that records an actor's failures: a
// shell reset by its cause, any other panic by the kind of actor. Put it
// outside the middleware that logs panics.
func (m *Metrics) Failures() actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		if m == nil {
			return next
		}
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			defer func() {
				if reason := recover(); reason != nil {
					if rc, ok := reason.(ResetCauser); ok {
						m.ShellReset(rc.ResetCause())
					} else {
						m.ActorFailure(kindOf(ctx.Actor()))
					}
					panic(reason)
				}
			}()
			next(ctx, env)
		}
	}
}

// kindOf names an actor's kind from its type ("*shell.Actor": shell).
func kindOf(a any) string {
	switch t := fmt.Sprintf("%T", a); t {
	case "*agent.Actor":
		return "agent"
	case "*shell.Actor":
		return "shell"
	case "*terminal.Actor":
		return "terminal"
	case "*tasks.Registry":
		return "tasks"
	case "*tasks.task":
		return "task"
	}
	return "other"
}

// bounded is v when it is one of the label values of set, else "other":
// no input can grow the number of series.
func bounded(set map[string]bool, v string) string {
	if set[v] {
		return v
	}
	return "other"
}
