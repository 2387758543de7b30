package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/host"
)

// ServeOptions configure RunServe.
type ServeOptions struct {
	// Command is the server's command line, program first. It must serve
	// streamable HTTP and print "dsh-actors: serving MCP at http://ADDR/mcp"
	// on its standard error, as `dsh-actors serve --http 127.0.0.1:0` does.
	// Nil means ServeCommand(os.Executable(), Config).
	Command []string
	// Config is the configuration file the default command gives the
	// server; "" means the built-in defaults. The host given to RunServe
	// should run the same configuration.
	Config string
	// Sessions is how many MCP sessions (and Go API agents) the load
	// drives at once.
	Sessions int
	// CallsPerSession is how many calls each of them makes (when Duration
	// is zero).
	CallsPerSession int
	// Duration, when set, runs the load for that long instead.
	Duration time.Duration
	// Rate, when set (with Duration), makes the load open-loop: each
	// session calls Rate times a second, at a steady pace from a random
	// start, whether or not its last call has returned.
	Rate float64
	// Iterations is the number of samples of the single-session figure.
	Iterations int
	// Token is sent as "Authorization: Bearer TOKEN" on every request, for
	// a server that requires one; "" means $DSH_ACTORS_TOKEN, which the
	// server also takes by default.
	Token string
}

// DefaultServeOptions are the figures `dsh-actors bench serve` uses.
func DefaultServeOptions() ServeOptions {
	return ServeOptions{Sessions: 1, CallsPerSession: 200, Iterations: 1000}
}

// ServeCommand is the command line of `program serve` on a port of
// 127.0.0.1 the system picks, with config ("" for none).
func ServeCommand(program, config string) []string {
	cmd := []string{program, "serve", "--http", "127.0.0.1:0"}
	if config != "" {
		cmd = append(cmd, "--config", config)
	}
	return cmd
}

// ServeReport is the result of RunServe.
type ServeReport struct {
	// Command is the server's command line, ServerPID its process.
	Command   []string `json:"command"`
	ServerPID int      `json:"server_pid"`
	Sessions  int      `json:"sessions"`
	// Rate is the open-loop rate per session (calls/s), 0 for a closed
	// loop; Duration the load's length, 0 for a number of calls.
	Rate     float64 `json:"rate_per_session,omitempty"`
	Duration float64 `json:"duration_s,omitempty"`
	// Single is one session's sequential echo, over MCP and through the Go
	// API, interleaved sample by sample.
	Single ServeLatency `json:"single_session"`
	// MCP is the load over MCP sessions, API the same load through the Go
	// API of an in-process host, one agent per session; each with the
	// errors of its path (the single-session figure's included).
	MCP ServePath `json:"mcp"`
	API ServePath `json:"go_api"`
	// SetupSeconds is how long the sessions took to connect and start
	// their shells.
	SetupSeconds float64     `json:"sessions_setup_s"`
	Memory       ServeMemory `json:"server_memory"`
	// StopMs is how long the server took to exit after SIGTERM;
	// ServerKilled says it did not within its deadline and got SIGKILL.
	StopMs       float64 `json:"server_stop_ms"`
	ServerKilled bool    `json:"server_killed,omitempty"`
	// ProcessesLeft counts the server's processes alive after it exited
	// (they are killed then).
	ProcessesLeft int `json:"processes_left"`
	// Errors counts the failed calls of both paths. (A server that does
	// not exit cleanly, or leaves processes, makes RunServe return an
	// error.)
	Errors  int           `json:"errors"`
	Targets []ServeTarget `json:"targets"`
	// ServerLog is what the server wrote to standard error after its
	// address (its warnings), clipped.
	ServerLog string `json:"server_log,omitempty"`
}

// ServeLatency is one session's sequential echo over MCP next to the Go
// API, with two floors of the MCP path sampled in the same loop: a bare HTTP
// round trip to the server (a GET its mux answers 404, no MCP), and an MCP
// ping over the session (the SDK's transport and protocol, no tool).
type ServeLatency struct {
	Samples   int     `json:"samples"`
	MCPP50us  float64 `json:"mcp_p50_us"`
	MCPP99us  float64 `json:"mcp_p99_us"`
	APIP50us  float64 `json:"api_p50_us"`
	APIP99us  float64 `json:"api_p99_us"`
	HTTPP50us float64 `json:"http_p50_us"`
	HTTPP99us float64 `json:"http_p99_us"`
	PingP50us float64 `json:"ping_p50_us"`
	PingP99us float64 `json:"ping_p99_us"`
	// RatioP50 is MCPP50us / APIP50us.
	RatioP50 float64 `json:"ratio_p50"`
}

// ServePath is one path's load figures and errors, and the CPU it took.
type ServePath struct {
	Load
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// HostCPUus is the CPU time (user and system, without the shells) of
	// the process that runs the host, per call of the load: the server
	// for MCP, this process for the Go API (its load driver included).
	HostCPUus float64 `json:"host_cpu_us_per_call"`
	// ClientCPUus is this process's CPU time per call over MCP: the
	// sessions' clients and the load driver.
	ClientCPUus float64 `json:"client_cpu_us_per_call,omitempty"`
	// ShellsCPUus is the CPU time of the host's shells per call.
	ShellsCPUus float64 `json:"shells_cpu_us_per_call"`
	// MachineBusy is how many of the machine's CPUs were busy during the
	// load, on average (in ticks of /proc/stat); OtherBusy how many of
	// those were neither the host, the client nor the shells: the kernel's
	// own threads (the terminals' work queues), and whatever else runs on
	// the machine (which a shared machine makes large, and the figures of
	// that run doubtful).
	MachineBusy float64 `json:"machine_busy_cpus"`
	OtherBusy   float64 `json:"other_busy_cpus"`
}

// ServeMemory is the server process's resident memory (VmRSS of that
// process alone, not of its shells), in KiB.
type ServeMemory struct {
	IdleKB int64 `json:"idle_rss_kb"`
	// WarmKB is after the single-session figure (its session closed): the
	// server's heap grows with its first calls, which at few sessions is
	// most of (LiveKB - IdleKB).
	WarmKB int64 `json:"warm_rss_kb"`
	// LiveKB is with every session connected and its shell started,
	// before the load; AfterLoadKB after it.
	LiveKB      int64 `json:"live_rss_kb"`
	AfterLoadKB int64 `json:"after_load_rss_kb"`
	// PerSessionKB is (LiveKB - IdleKB) / sessions.
	PerSessionKB float64 `json:"per_session_kb"`
	// ShellsKB is the sum of the VmRSS of the server's other processes
	// (the shells) with the sessions live, for scale.
	ShellsKB int64 `json:"shells_rss_kb"`
}

// ServeTarget is a target the run is checked against. A target whose shape
// is not this run's (Applies false) is shown, not judged.
type ServeTarget struct {
	Name    string `json:"name"`
	Got     string `json:"got"`
	Applies bool   `json:"applies"`
	Met     bool   `json:"met"`
}

// The targets.
const (
	targetRatio    = 1.5
	targetSessions = 1000
	targetRate     = 1.0
	targetP99ms    = 50.0
)

// serveCallTimeout bounds every call and connection of the run: a hung
// server fails the call instead of the benchmark.
const serveCallTimeout = time.Minute

// serveMark is the environment entry that marks the server's processes.
const serveMark = "DSH_BENCH_SERVE_MARK"

// RunServe starts the server (a process of its own, see ServeOptions.
// Command) and measures the bash tool over MCP-over-HTTP sessions next to
// the same calls through h's Go API: one session's sequential echo, then the
// load (Sessions agents of h, then as many MCP sessions, each calling echo
// back to back or at Rate), with the server's memory before and with the
// sessions. It stops the server with SIGTERM at the end (SIGKILL past a
// deadline) and kills whatever of it is left.
func RunServe(ctx context.Context, h *host.Host, opts ServeOptions) (rep ServeReport, err error) {
	if opts.Sessions < 1 || opts.Iterations < 1 || (opts.Duration <= 0 && opts.CallsPerSession < 1) {
		return rep, fmt.Errorf("bench serve: sessions %d, iterations %d, calls %d, duration %v: sessions and iterations must be positive, and calls too without a duration",
			opts.Sessions, opts.Iterations, opts.CallsPerSession, opts.Duration)
	}
	if err := raiseOpenFiles(opts.Sessions); err != nil {
		return rep, err
	}
	rep.Command = opts.Command
	if rep.Command == nil {
		exe, err := os.Executable()
		if err != nil {
			return rep, fmt.Errorf("bench serve: finding this program: %w", err)
		}
		rep.Command = ServeCommand(exe, opts.Config)
	}
	rep.Sessions, rep.Rate, rep.Duration = opts.Sessions, opts.Rate, opts.Duration.Seconds()

	srv, err := startServer(ctx, rep.Command)
	if err != nil {
		return rep, err
	}
	rep.ServerPID = srv.cmd.Process.Pid
	defer func() {
		stopErr := srv.stop(&rep)
		if err == nil {
			err = stopErr
		}
		rep.Errors = rep.MCP.Errors + rep.API.Errors
		rep.Targets = targets(rep)
	}()
	if rep.Memory.IdleKB, err = vmRSS(rep.ServerPID); err != nil {
		return rep, err
	}

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	// Every session keeps a connection for its standalone SSE stream and
	// needs one for each call in flight: keep them all, or each call would
	// dial anew and churn through ephemeral ports.
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 2*opts.Sessions + 16
	defer tr.CloseIdleConnections()
	var rt http.RoundTripper = tr
	if opts.Token == "" {
		opts.Token = os.Getenv("DSH_ACTORS_TOKEN")
	}
	if opts.Token != "" {
		rt = bearer{"Bearer " + opts.Token, tr}
	}
	r := &serveRun{
		h:         h,
		serverPID: rep.ServerPID,
		url:       srv.url,
		hc:        &http.Client{Transport: rt},
		client:    mcp.NewClient(&mcp.Implementation{Name: "dsh-actors-bench", Version: "1"}, nil),
	}
	var mcpErrs, apiErrs errorCount
	defer func() {
		rep.MCP.Errors, rep.MCP.FirstError = mcpErrs.get()
		rep.API.Errors, rep.API.FirstError = apiErrs.get()
	}()

	if rep.Single, err = r.single(ctx, opts.Iterations, &mcpErrs, &apiErrs); err != nil {
		return rep, err
	}
	if rep.Memory.WarmKB, err = vmRSS(rep.ServerPID); err != nil {
		return rep, err
	}
	load := ShellOptions{Agents: opts.Sessions, CallsPerAgent: opts.CallsPerSession, Duration: opts.Duration, Rate: opts.Rate}
	if opts.Duration > 0 {
		load.CallsPerAgent = 0
	}
	// The Go API first, on the caller's host; its agents are stopped (every
	// shell gone) before the sessions connect.
	if err := r.apiLoad(ctx, load, &rep.API, &apiErrs); err != nil {
		return rep, err
	}

	t0 := time.Now()
	sessions, err := r.connectAll(ctx, opts.Sessions, &mcpErrs)
	defer r.closeAll(sessions, &mcpErrs)
	if err != nil {
		return rep, err
	}
	rep.SetupSeconds = time.Since(t0).Seconds()
	if rep.Memory.LiveKB, err = vmRSS(rep.ServerPID); err != nil {
		return rep, err
	}
	rep.Memory.PerSessionKB = float64(rep.Memory.LiveKB-rep.Memory.IdleKB) / float64(opts.Sessions)
	for _, pid := range marked(srv.mark) {
		if kb, err := vmRSS(pid); err == nil && pid != rep.ServerPID {
			rep.Memory.ShellsKB += kb
		}
	}
	cpu := startCPU(rep.ServerPID, 0)
	rep.MCP.Load = driveLoad(ctx, load, func(i int) {
		text, isErr, err := r.bash(ctx, sessions[i], echoArgs)
		checkMCP(&mcpErrs, text, isErr, err, "hi\n")
	})
	cpu.stop(&rep.MCP)
	if rep.Memory.AfterLoadKB, err = vmRSS(rep.ServerPID); err != nil {
		return rep, err
	}
	return rep, ctx.Err()
}

var (
	echoArgs = json.RawMessage(`{"command":"echo hi"}`)
	trueArgs = json.RawMessage(`{"command":"true"}`)
)

// serveRun is what the phases of RunServe share.
type serveRun struct {
	h         *host.Host
	serverPID int
	url       string
	hc        *http.Client
	client    *mcp.Client
}

// single samples one session's echo over MCP and one agent's through the
// Go API, both warm, interleaved with the MCP path's floors (a bare HTTP
// round trip, an MCP ping); their errors count as the MCP path's.
func (r *serveRun) single(ctx context.Context, n int, mcpErrs, apiErrs *errorCount) (ServeLatency, error) {
	cs, err := r.connect(ctx)
	if err != nil {
		return ServeLatency{}, fmt.Errorf("bench serve: connecting a session: %w", err)
	}
	defer func() {
		if err := cs.Close(); err != nil {
			mcpErrs.add("closing a session: %v", err)
		}
	}()
	const id = "bench-serve-single"
	text, isErr, err := r.bash(ctx, cs, trueArgs) // the shells start on their first call
	checkMCP(mcpErrs, text, isErr, err, "")
	res, err := r.h.Bash(ctx, id, shell.Args{Command: "true"})
	check(apiErrs, res, err, "")
	defer r.h.StopAgent(context.WithoutCancel(ctx), id)
	// The floors' first round trips open their connections.
	if err := r.notFound(ctx); err != nil {
		return ServeLatency{}, err
	}
	if err := r.ping(ctx, cs); err != nil {
		return ServeLatency{}, err
	}
	var overMCP, api, bare, ping []time.Duration
	for i := 0; i < n && ctx.Err() == nil; i++ {
		t0 := time.Now()
		err := r.notFound(ctx)
		bare = append(bare, time.Since(t0))
		if err != nil {
			mcpErrs.add("%v", err)
		}

		t0 = time.Now()
		err = r.ping(ctx, cs)
		ping = append(ping, time.Since(t0))
		if err != nil {
			mcpErrs.add("%v", err)
		}

		t0 = time.Now()
		text, isErr, err := r.bash(ctx, cs, echoArgs)
		overMCP = append(overMCP, time.Since(t0))
		checkMCP(mcpErrs, text, isErr, err, "hi\n")

		t0 = time.Now()
		res, err := r.h.Bash(ctx, id, shell.Args{Command: "echo hi"})
		api = append(api, time.Since(t0))
		check(apiErrs, res, err, "hi\n")
	}
	l := ServeLatency{
		Samples:   len(overMCP),
		MCPP50us:  percentile(overMCP, 50),
		MCPP99us:  percentile(overMCP, 99),
		APIP50us:  percentile(api, 50),
		APIP99us:  percentile(api, 99),
		HTTPP50us: percentile(bare, 50),
		HTTPP99us: percentile(bare, 99),
		PingP50us: percentile(ping, 50),
		PingP99us: percentile(ping, 99),
	}
	if l.APIP50us > 0 {
		l.RatioP50 = l.MCPP50us / l.APIP50us
	}
	return l, ctx.Err()
}

// apiLoad drives load.Agents agents of the host through the Go API, as
// measureThroughput does, and measures the CPU this process takes for it.
func (r *serveRun) apiLoad(ctx context.Context, load ShellOptions, p *ServePath, errs *errorCount) error {
	ids := make([]string, load.Agents)
	var g errgroup.Group
	g.SetLimit(32)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-serve-agent-%d", i)
		g.Go(func() error { // every shell started before the load
			res, err := r.h.Bash(ctx, ids[i], shell.Args{Command: "true"})
			check(errs, res, err, "")
			return nil
		})
	}
	_ = g.Wait()
	cpu := startCPU(os.Getpid(), r.serverPID)
	p.Load = driveLoad(ctx, load, func(i int) {
		res, err := r.h.Bash(ctx, ids[i], shell.Args{Command: "echo hi"})
		check(errs, res, err, "hi\n")
	})
	cpu.stop(p)
	var stop errgroup.Group
	stop.SetLimit(32)
	for _, id := range ids {
		stop.Go(func() error { return r.h.StopAgent(context.WithoutCancel(ctx), id) })
	}
	if err := stop.Wait(); err != nil {
		return fmt.Errorf("bench serve: stopping the Go API's agents: %w", err)
	}
	return ctx.Err()
}

const (
	serveLinePrefix = "dsh-actors: serving MCP at "
	serverLogMax    = 16 << 10
)
