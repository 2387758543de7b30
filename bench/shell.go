package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/host"
)

// ShellOptions configure RunShell.
type ShellOptions struct {
	// Iterations is the number of samples of the echo and pwd scenarios.
	Iterations int
	// SpawnIterations is the number of samples of spawn_init_echo.
	SpawnIterations int
	// Agents is how many agents the throughput run drives at once.
	Agents int
	// CallsPerAgent is how many calls each of them makes (when Duration is
	// zero).
	CallsPerAgent int
	// Duration, when set, runs the throughput for that long instead: each
	// agent calls until it is over.
	Duration time.Duration
	// Rate, when set (with Duration), makes the run open-loop: each agent
	// calls Rate times a second, at a steady pace from a random start,
	// whether or not its last call has returned.
	Rate float64
	// FloorLoad runs the throughput figure a second time on bare PTY bash
	// shells (see floorShell), for comparison.
	FloorLoad bool
}

// DefaultShellOptions are the figures `dsh-actors bench shell` uses.
func DefaultShellOptions() ShellOptions {
	return ShellOptions{Iterations: 1000, SpawnIterations: 100, Agents: 1, CallsPerAgent: 200}
}

// Scenario is one measured path against its floor.
type Scenario struct {
	Name       string  `json:"name"`
	Samples    int     `json:"samples"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	FloorP50us float64 `json:"floor_p50_us"`
	FloorP99us float64 `json:"floor_p99_us"`
	RatioP50   float64 `json:"ratio_p50"`
}

// ShellReport is the result of RunShell.
type ShellReport struct {
	Scenarios []Scenario `json:"scenarios"`
	Agents    int        `json:"agents"`
	// Load is the throughput run through the runtime.
	Load
	// FloorLoad is the same run on bare PTY bash shells, one goroutine
	// each, no runtime (ShellOptions.FloorLoad), after Load: what the
	// machine itself does with that many shells.
	FloorLoad *Load `json:"floor_load,omitempty"`
	// Rate is the open-loop rate per agent (calls/s), 0 for a closed loop.
	Rate   float64 `json:"rate_per_agent,omitempty"`
	Errors int     `json:"errors"`
	// FirstError describes the first failed call, if any.
	FirstError string `json:"first_error,omitempty"`
}

// Load is what a throughput run measured: its calls, their latency, and how
// evenly the agents were served (calls per agent).
type Load struct {
	Calls       int     `json:"calls"`
	CallsPerSec float64 `json:"calls_per_sec"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	MinPerAgent int     `json:"min_calls_per_agent"`
	MaxPerAgent int     `json:"max_calls_per_agent"`
}

// RunShell measures the bash tool through the whole path (host API, agent
// actor, shell actor, PTY, bash) next to the floor, a bare PTY bash round trip
// with no actors, sampled in the same run and interleaved with it so both see
// the same machine.
func RunShell(ctx context.Context, h *host.Host, opts ShellOptions) (ShellReport, error) {
	var rep ShellReport
	var errs errorCount

	spawn, err := measureSpawn(ctx, h, opts.SpawnIterations, &errs)
	if err != nil {
		return rep, err
	}
	rep.Scenarios = append(rep.Scenarios, spawn)
	for _, sc := range []struct{ name, command, want string }{
		{"echo", "echo hi", "hi\n"},
		{"pwd", "pwd", ""},
	} {
		s, err := measureRoundTrips(ctx, h, sc.name, sc.command, sc.want, opts.Iterations, &errs)
		if err != nil {
			return rep, err
		}
		rep.Scenarios = append(rep.Scenarios, s)
	}
	rep.Agents, rep.Rate = opts.Agents, opts.Rate
	measureThroughput(ctx, h, opts, &rep, &errs)
	rep.Errors, rep.FirstError = errs.get()
	return rep, nil
}

// errorCount counts failed calls and keeps the first description.
type errorCount struct {
	n     atomic.Int64
	mu    sync.Mutex
	first string
}

func (e *errorCount) add(format string, args ...any) {
	if e.n.Add(1) == 1 {
		e.mu.Lock()
		e.first = fmt.Sprintf(format, args...)
		e.mu.Unlock()
	}
}

func (e *errorCount) get() (int, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return int(e.n.Load()), e.first
}

// check counts a call that failed or returned unexpected text.
func check(errs *errorCount, res shell.Result, err error, want string) {
	switch {
	case err != nil:
		errs.add("%v", err)
	case res.IsError || res.ExitCode == nil || *res.ExitCode != 0:
		errs.add("unexpected result %q", res.Text)
	case want != "" && res.Text != want:
		errs.add("got %q, want %q", res.Text, want)
	}
}

func measureSpawn(ctx context.Context, h *host.Host, n int, errs *errorCount) (Scenario, error) {
	var full, floor []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		f, err := startFloor()
		if err != nil {
			return Scenario{}, fmt.Errorf("floor: %w", err)
		}
		if _, err := f.roundTrip("echo hi"); err != nil {
			f.close()
			return Scenario{}, fmt.Errorf("floor: %w", err)
		}
		floor = append(floor, time.Since(t0))
		if err := f.close(); err != nil {
			return Scenario{}, err
		}

		id := fmt.Sprintf("bench-spawn-%d", i)
		t0 = time.Now()
		res, err := h.Bash(ctx, id, shell.Args{Command: "echo hi"})
		full = append(full, time.Since(t0))
		check(errs, res, err, "hi\n")
		if err := h.StopAgent(ctx, id); err != nil {
			return Scenario{}, err
		}
	}
	return scenario("spawn_init_echo", full, floor), nil
}

func measureRoundTrips(ctx context.Context, h *host.Host, name, command, want string, n int, errs *errorCount) (Scenario, error) {
	f, err := startFloor()
	if err != nil {
		return Scenario{}, fmt.Errorf("floor: %w", err)
	}
	defer f.close()
	const id = "bench-roundtrip"
	// Warm both paths: the agent's shell starts on its first call.
	if _, err := h.Bash(ctx, id, shell.Args{Command: "true"}); err != nil {
		return Scenario{}, err
	}
	defer h.StopAgent(ctx, id)
	var full, floor []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := f.roundTrip(command); err != nil {
			return Scenario{}, fmt.Errorf("floor: %w", err)
		}
		floor = append(floor, time.Since(t0))

		t0 = time.Now()
		res, err := h.Bash(ctx, id, shell.Args{Command: command})
		full = append(full, time.Since(t0))
		check(errs, res, err, want)
	}
	return scenario(name, full, floor), nil
}

// measureThroughput drives agents at once through the runtime, then, when
// asked, bare shells the same way. It fills in the report's load figures.
func measureThroughput(ctx context.Context, h *host.Host, opts ShellOptions, rep *ShellReport, errs *errorCount) {
	agents := opts.Agents
	if agents <= 0 || (opts.CallsPerAgent <= 0 && opts.Duration <= 0) {
		return
	}
	ids := make([]string, agents)
	var wg sync.WaitGroup
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-agent-%d", i)
		wg.Go(func() { // start every shell before timing
			res, err := h.Bash(ctx, ids[i], shell.Args{Command: "true"})
			check(errs, res, err, "")
		})
	}
	wg.Wait()
	rep.Load = driveLoad(ctx, opts, func(i int) {
		res, err := h.Bash(ctx, ids[i], shell.Args{Command: "echo hi"})
		check(errs, res, err, "hi\n")
	})
	// Stop them a few dozen at a time: each stop kills and reaps a session.
	var g errgroup.Group
	g.SetLimit(32)
	for _, id := range ids {
		g.Go(func() error { return h.StopAgent(ctx, id) })
	}
	if err := g.Wait(); err != nil {
		errs.add("stopping the agents: %v", err)
	}
	if opts.FloorLoad {
		floor, err := floorLoad(ctx, opts, errs)
		if err != nil {
			errs.add("floor load: %v", err)
			return
		}
		rep.FloorLoad = &floor
	}
}

// floorLoad drives opts.Agents bare shells as driveLoad drives agents.
func floorLoad(ctx context.Context, opts ShellOptions, errs *errorCount) (Load, error) {
	shells := make([]*floorShell, opts.Agents)
	defer func() {
		var g errgroup.Group
		g.SetLimit(32)
		for _, f := range shells {
			if f != nil {
				g.Go(f.close)
			}
		}
		_ = g.Wait()
	}()
	for i := range shells {
		f, err := startFloor()
		if err != nil {
			return Load{}, err
		}
		shells[i] = f
	}
	locks := make([]sync.Mutex, len(shells)) // a bare shell takes one line at a time
	load := driveLoad(ctx, opts, func(i int) {
		locks[i].Lock()
		defer locks[i].Unlock()
		out, err := shells[i].roundTrip("echo hi")
		switch {
		case err != nil:
			errs.add("floor shell %d: %v", i, err)
		case string(out) != "hi\n":
			errs.add("floor shell %d: echo hi printed %q", i, out)
		}
	})
	return load, nil
}

// driveLoad calls call(i) for every agent i at once: one call after the
// other (a closed loop: a fixed number, or for Duration), or at Rate a
// second (an open loop); and measures each call.
func driveLoad(ctx context.Context, opts ShellOptions, call func(i int)) Load {
	var mu sync.Mutex
	var lat []time.Duration
	perAgent := make([]int, opts.Agents)
	timed := func(i int) {
		t0 := time.Now()
		call(i)
		d := time.Since(t0)
		mu.Lock()
		lat = append(lat, d)
		perAgent[i]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(opts.Duration)
	for i := range perAgent {
		wg.Go(func() {
			switch {
			case opts.Duration > 0 && opts.Rate > 0:
				every := time.Duration(float64(time.Second) / opts.Rate)
				next := start.Add(time.Duration(rand.Int64N(int64(every))))
				var calls sync.WaitGroup
				for next.Before(end) && ctx.Err() == nil {
					time.Sleep(time.Until(next))
					calls.Go(func() { timed(i) })
					next = next.Add(every)
				}
				calls.Wait()
			case opts.Duration > 0:
				for time.Now().Before(end) && ctx.Err() == nil {
					timed(i)
				}
			default:
				for range opts.CallsPerAgent {
					timed(i)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	return Load{
		Calls:       len(lat),
		CallsPerSec: float64(len(lat)) / elapsed.Seconds(),
		P50ms:       percentile(lat, 50) / 1e3,
		P99ms:       percentile(lat, 99) / 1e3,
		MaxMs:       percentile(lat, 100) / 1e3,
		MinPerAgent: slices.Min(perAgent),
		MaxPerAgent: slices.Max(perAgent),
	}
}

func scenario(name string, full, floor []time.Duration) Scenario {
	s := Scenario{
		Name:       name,
		Samples:    len(full),
		P50us:      percentile(full, 50),
		P99us:      percentile(full, 99),
		FloorP50us: percentile(floor, 50),
		FloorP99us: percentile(floor, 99),
	}
	if s.FloorP50us > 0 {
		s.RatioP50 = s.P50us / s.FloorP50us
	}
	return s
}

// percentile returns the p-th percentile in microseconds (nearest rank).
func percentile(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return float64(s[i-1].Nanoseconds()) / 1e3
}

// writeScenarios prints scenarios as a table.
func writeScenarios(w io.Writer, scenarios []Scenario) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tsamples\tp50 µs\tp99 µs\tfloor p50 µs\tfloor p99 µs\tp50 / floor\t")
	for _, s := range scenarios {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.2fx\t\n", s.Name, s.Samples, s.P50us, s.P99us, s.FloorP50us, s.FloorP99us, s.RatioP50)
	}
	return tw.Flush()
}

// WriteTable prints a report for people.
func (r ShellReport) WriteTable(w io.Writer) error {
	if err := writeScenarios(w, r.Scenarios); err != nil {
		return err
	}
	loop := "closed loop"
	if r.Rate > 0 {
		loop = fmt.Sprintf("open loop, %g calls/s each", r.Rate)
	}
	_, err := fmt.Fprintf(w, "\n%d agents at once (%s): %s, %d errors\n", r.Agents, loop, r.Load, r.Errors)
	if err == nil && r.FloorLoad != nil {
		_, err = fmt.Fprintf(w, "floor, %d bare shells the same way: %s\n", r.Agents, *r.FloorLoad)
	}
	if err == nil && r.FirstError != "" {
		_, err = fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
	return err
}

// String is the figures on one line.
func (l Load) String() string {
	return fmt.Sprintf("%d calls, %.0f calls/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, calls per agent %d to %d",
		l.Calls, l.CallsPerSec, l.P50ms, l.P99ms, l.MaxMs, l.MinPerAgent, l.MaxPerAgent)
}
