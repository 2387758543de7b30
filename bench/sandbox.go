package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
)

// SandboxOptions configure RunSandbox.
type SandboxOptions struct {
	// Iterations is the number of samples of each level's scenarios.
	Iterations int
	// Agents is how many sandboxed agents, each with a shell, the last
	// figure starts at once; 0 leaves it out.
	Agents int
	// BallastBytes is the heap the host holds while the spawn is measured
	// again (0: that figure is left out).
	BallastBytes int64
}

// DefaultSandboxOptions are the figures `dsh-actors bench sandbox` uses.
func DefaultSandboxOptions() SandboxOptions {
	return SandboxOptions{Iterations: 50, Agents: 1000, BallastBytes: 2 << 30}
}

// SandboxReport is the result of RunSandbox. Every scenario's floor is the
// same path at level off, measured in the same run, interleaved.
type SandboxReport struct {
	// Create is sandbox.Start to a ready init (and Close), per level; its
	// floor is zero (off makes nothing).
	Create []Scenario `json:"create"`
	// ShellStart is a new agent's first `echo hi`: sandbox, shell start
	// and the call; floor: the same at level off.
	ShellStart []Scenario `json:"shell_start"`
	// ShellRestart is the call after `exit` in an agent whose sandbox
	// exists: a new bash in it, started and called; floor: level off.
	ShellRestart []Scenario `json:"shell_restart"`
	// TerminalStart is terminal_open of `echo hi` in an agent whose
	// sandbox exists; floor: the same at level off.
	TerminalStart []Scenario `json:"terminal_start"`
	// Echo is an echo round trip in a warm shell; floor: level off.
	Echo []Scenario `json:"echo"`
	// Ballast is the auto level's shell start with BallastBytes of heap
	// held, its floor the same without.
	Ballast *Scenario `json:"ballast,omitempty"`
	// Many is Agents sandboxed agents, each with a shell, at once.
	Many *ManySandboxes `json:"many,omitempty"`
	// Obtained is what each level obtained on this machine.
	Obtained   map[string]string `json:"obtained"`
	Errors     int               `json:"errors"`
	FirstError string            `json:"first_error,omitempty"`
}

// ManySandboxes is what many sandboxed agents cost.
type ManySandboxes struct {
	Agents  int     `json:"agents"`
	Seconds float64 `json:"seconds"`
	// InitPSSKiB and InitRSSKiB are one init's memory, averaged: its
	// proportional share (shared pages split among the inits) and its
	// resident set.
	InitPSSKiB  int64 `json:"init_pss_kib"`
	InitRSSKiB  int64 `json:"init_rss_kib"`
	ShellPSSKiB int64 `json:"shell_pss_kib"`
	// HostHeapKiB is the host's Go heap per agent.
	HostKiBPerAgent int64 `json:"host_kib_per_agent"`
	Errors          int   `json:"errors"`
}

var benchLevels = []sandbox.Level{sandbox.LevelProcess, sandbox.LevelLimits, sandbox.LevelNoNet, sandbox.LevelFS}

// RunSandbox measures what the sandbox costs, level by level, against level
// off in the same run.
func RunSandbox(ctx context.Context, opts SandboxOptions, log *slog.Logger) (SandboxReport, error) {
	rep := SandboxReport{Obtained: map[string]string{}}
	var errs errorCount
	levels := append([]sandbox.Level{sandbox.LevelOff}, benchLevels...)
	hosts := map[sandbox.Level]*host.Host{}
	defer func() {
		for _, h := range hosts {
			_ = h.Stop(context.Background())
		}
	}()
	for _, l := range levels {
		cfg := config.Default()
		cfg.Sandbox.Level = string(l)
		h, err := host.Start(host.Options{Config: &cfg, Logger: log})
		if err != nil {
			return rep, err
		}
		hosts[l] = h
	}
	wd, _ := os.Getwd()
	create := map[sandbox.Level][]time.Duration{}
	spawn := map[sandbox.Level][]time.Duration{}
	term := map[sandbox.Level][]time.Duration{}
	restart := map[sandbox.Level][]time.Duration{}
	echo := map[sandbox.Level][]time.Duration{}
	for _, l := range levels {
		// A warm agent per level for the round trips and terminals.
		res, err := hosts[l].Bash(ctx, "warm", shell.Args{Command: "true"})
		check(&errs, res, err, "")
	}
	for i := 0; i < opts.Iterations; i++ {
		for _, l := range levels {
			h := hosts[l]
			if l != sandbox.LevelOff {
				w := config.Default().Sandbox.Want("bench", string(l), wd)
				t0 := time.Now()
				sb, r, err := sandbox.Start(w)
				d := time.Since(t0)
				if err != nil {
					errs.add("sandbox %s: %v", l, err)
				} else {
					rep.Obtained[string(l)] = r.String()
					create[l] = append(create[l], d)
					if sb != nil {
						if err := sb.Close(); err != nil {
							errs.add("sandbox %s: close: %v", l, err)
						}
					}
				}
			}
			id := "spawn-" + strconv.Itoa(i)
			t0 := time.Now()
			res, err := h.Bash(ctx, id, shell.Args{Command: "echo hi"})
			spawn[l] = append(spawn[l], time.Since(t0))
			check(&errs, res, err, "hi\n")
			if err := h.StopAgent(ctx, id); err != nil {
				errs.add("stop: %v", err)
			}
			t0 = time.Now()
			r, err := h.Call(ctx, "warm", "terminal_open", json.RawMessage(`{"command":"echo hi"}`))
			term[l] = append(term[l], time.Since(t0))
			if err != nil || r.IsError || !strings.Contains(r.Text, "hi") {
				errs.add("terminal_open at %s: %v %v", l, r, err)
			} else if id := terminalID(r.Text); id != "" {
				_, _ = h.Call(ctx, "warm", "terminal_close", json.RawMessage(`{"terminal_id":"`+id+`"}`))
			}
			_, _ = h.Bash(ctx, "warm", shell.Args{Command: "exit"})
			t0 = time.Now()
			res, err = h.Bash(ctx, "warm", shell.Args{Command: "echo hi"})
			restart[l] = append(restart[l], time.Since(t0))
			if err != nil || !strings.HasSuffix(res.Text, "hi\n") {
				errs.add("restart at %s: %q %v", l, res.Text, err)
			}
			for range 10 {
				t0 = time.Now()
				res, err := h.Bash(ctx, "warm", shell.Args{Command: "echo hi"})
				echo[l] = append(echo[l], time.Since(t0))
				check(&errs, res, err, "hi\n")
			}
		}
	}
	for _, l := range benchLevels {
		name := string(l)
		rep.Create = append(rep.Create, scenario(name, create[l], nil))
		rep.ShellStart = append(rep.ShellStart, scenario(name, spawn[l], spawn[sandbox.LevelOff]))
		rep.ShellRestart = append(rep.ShellRestart, scenario(name, restart[l], restart[sandbox.LevelOff]))
		rep.TerminalStart = append(rep.TerminalStart, scenario(name, term[l], term[sandbox.LevelOff]))
		rep.Echo = append(rep.Echo, scenario(name, echo[l], echo[sandbox.LevelOff]))
	}
	for _, h := range hosts {
		_ = h.Stop(ctx)
	}
	clear(hosts)
	if opts.BallastBytes > 0 {
		s, err := measureBallast(ctx, opts, log, &errs)
		if err != nil {
			return rep, err
		}
		rep.Ballast = &s
	}
	if opts.Agents > 0 {
		m, err := measureMany(ctx, opts.Agents, log, &errs)
		if err != nil {
			return rep, err
		}
		rep.Many = &m
	}
	rep.Errors, rep.FirstError = errs.get()
	return rep, nil
}

func terminalID(text string) string {
	_, rest, ok := strings.Cut(text, "[terminal ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, " ")
	return id
}

// ballast is held while the spawn is measured with a large heap.
var ballast []byte

func measureBallast(ctx context.Context, opts SandboxOptions, log *slog.Logger, errs *errorCount) (Scenario, error) {
	cfg := config.Default()
	h, err := host.Start(host.Options{Config: &cfg, Logger: log})
	if err != nil {
		return Scenario{}, err
	}
	defer h.Stop(context.Background())
	var with, without []time.Duration
	one := func(i int, into *[]time.Duration) {
		id := "ballast-" + strconv.Itoa(i)
		t0 := time.Now()
		res, err := h.Bash(ctx, id, shell.Args{Command: "echo hi"})
		*into = append(*into, time.Since(t0))
		check(errs, res, err, "hi\n")
		_ = h.StopAgent(ctx, id)
	}
	for i := 0; i < opts.Iterations; i++ {
		one(i, &without)
	}
	ballast = make([]byte, opts.BallastBytes)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1 // resident, as a host's heap is
	}
	for i := 0; i < opts.Iterations; i++ {
		one(opts.Iterations+i, &with)
	}
	ballast = nil
	runtime.GC()
	return scenario(fmt.Sprintf("shell start with %d MiB heap", opts.BallastBytes>>20), with, without), nil
}

func measureMany(ctx context.Context, n int, log *slog.Logger, errs *errorCount) (ManySandboxes, error) {
	if err := raiseOpenFiles(n); err != nil {
		return ManySandboxes{}, err
	}
	cfg := config.Default()
	cfg.Limits.Agents, cfg.Limits.Shells = max(cfg.Limits.Agents, n), max(cfg.Limits.Shells, n)
	h, err := host.Start(host.Options{Config: &cfg, Logger: log})
	if err != nil {
		return ManySandboxes{}, err
	}
	defer h.Stop(context.Background())
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var m ManySandboxes
	m.Agents = n
	var failed errorCount
	t0 := time.Now()
	var g errgroup.Group
	g.SetLimit(16)
	for i := 0; i < n; i++ {
		g.Go(func() error {
			res, err := h.Bash(ctx, "many-"+strconv.Itoa(i), shell.Args{Command: "echo hi"})
			check(&failed, res, err, "hi\n")
			return nil
		})
	}
	_ = g.Wait()
	m.Seconds = time.Since(t0).Seconds()
	m.Errors, _ = failed.get()
	if m.Errors > 0 {
		_, first := failed.get()
		errs.add("%d of %d sandboxed agents failed; first: %s", m.Errors, n, first)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	m.HostKiBPerAgent = (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / 1024 / int64(n)
	inits, shells := memoryOf(sandbox.InitName), memoryOf("bash")
	if len(inits) > 0 {
		var pss, rss int64
		for _, v := range inits {
			pss += v[0]
			rss += v[1]
		}
		m.InitPSSKiB, m.InitRSSKiB = pss/int64(len(inits)), rss/int64(len(inits))
	}
	if len(shells) > 0 {
		var pss int64
		for _, v := range shells {
			pss += v[0]
		}
		m.ShellPSSKiB = pss / int64(len(shells))
	}
	var stop errgroup.Group
	stop.SetLimit(32)
	for i := 0; i < n; i++ {
		stop.Go(func() error { return h.StopAgent(ctx, "many-"+strconv.Itoa(i)) })
	}
	if err := stop.Wait(); err != nil {
		errs.add("stopping the agents: %v", err)
	}
	return m, nil
}

// memoryOf returns the Pss and Rss (KiB) of every process named comm.
func memoryOf(comm string) [][2]int64 {
	entries, _ := os.ReadDir("/proc")
	var out [][2]int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		c, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		wg.Go(func() {
			b, err := os.ReadFile("/proc/" + e.Name() + "/smaps_rollup")
			if err != nil {
				return
			}
			var v [2]int64
			for line := range strings.SplitSeq(string(b), "\n") {
				f := strings.Fields(line)
				if len(f) < 2 {
					continue
				}
				n, _ := strconv.ParseInt(f[1], 10, 64)
				switch f[0] {
				case "Pss:":
					v[0] = n
				case "Rss:":
					v[1] = n
				}
			}
			mu.Lock()
			out = append(out, v)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// WriteTable prints a report for people.
func (r SandboxReport) WriteTable(w io.Writer) error {
	for _, sec := range []struct {
		title string
		s     []Scenario
	}{
		{"sandbox creation (sandbox.Start to a ready init, per level)", r.Create},
		{"new agent's first echo (sandbox + shell + call), floor: level off", r.ShellStart},
		{"a new shell in an existing sandbox (the call after exit), floor: level off", r.ShellRestart},
		{"terminal_open of echo hi, floor: level off", r.TerminalStart},
		{"echo round trip in a warm shell, floor: level off", r.Echo},
	} {
		if _, err := fmt.Fprintf(w, "%s\n", sec.title); err != nil {
			return err
		}
		if err := writeScenarios(w, sec.s); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if r.Ballast != nil {
		fmt.Fprintf(w, "heap ballast (floor: the same host before it):\n")
		if err := writeScenarios(w, []Scenario{*r.Ballast}); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if m := r.Many; m != nil {
		fmt.Fprintf(w, "%d sandboxed agents, each with a shell, started 16 at a time in %.1f s (%d errors)\n", m.Agents, m.Seconds, m.Errors)
		fmt.Fprintf(w, "memory per sandbox: init PSS %d KiB (RSS %d KiB), its shell PSS %d KiB, host heap %d KiB per agent\n\n",
			m.InitPSSKiB, m.InitRSSKiB, m.ShellPSSKiB, m.HostKiBPerAgent)
	}
	for _, l := range benchLevels {
		fmt.Fprintf(w, "level %s obtained: %s\n", l, r.Obtained[string(l)])
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
	return nil
}
