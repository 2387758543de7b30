package bench

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
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

// bearer adds a token to every request.
type bearer struct {
	value string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.value)
	return b.next.RoundTrip(r)
}

// connect opens one MCP session. Retries are off: a broken stream is an
// error, not a reconnection.
func (r *serveRun) connect(ctx context.Context) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	return r.client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url, HTTPClient: r.hc, MaxRetries: -1}, nil)
}

// bash calls the bash tool over a session and returns its text.
func (r *serveRun) bash(ctx context.Context, cs *mcp.ClientSession, args json.RawMessage) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: shell.ToolName, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError, nil
}

// notFound is a bare HTTP round trip to the server: a GET of a path beside
// the endpoint, which the server's mux answers (404) without MCP.
func (r *serveRun) notFound(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"-bench-floor", nil)
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("bench serve: the HTTP floor: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// ping is an MCP ping over the session.
func (r *serveRun) ping(ctx context.Context, cs *mcp.ClientSession) error {
	ctx, cancel := context.WithTimeout(ctx, serveCallTimeout)
	defer cancel()
	if err := cs.Ping(ctx, nil); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// checkMCP counts a call over MCP that failed or returned unexpected text.
// The text of a command that exits with another status than 0 says so, so
// the exact text is the status too.
func checkMCP(errs *errorCount, text string, isErr bool, err error, want string) {
	switch {
	case err != nil:
		errs.add("%v", err)
	case isErr:
		errs.add("tool error %q", text)
	case want != "" && text != want:
		errs.add("got %q, want %q", text, want)
	}
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

// cpuMeter measures, from startCPU to stop, the CPU time of the host's
// process, of its children (the shells; but not the server, when this
// process is the host), of this process when it is not the host (the
// clients), and the machine's busy time.
type cpuMeter struct {
	host, notShell int
	t0             time.Time
	self, hostCPU  time.Duration
	shells, busy   time.Duration
}

func startCPU(host, notShell int) *cpuMeter {
	m := &cpuMeter{host: host, notShell: notShell, t0: time.Now()}
	m.self, m.hostCPU, m.shells, m.busy = selfCPU(), procCPU(host), m.childrenCPU(), machineBusy()
	return m
}

// stop fills in p's CPU figures for the calls of p.Load.
func (m *cpuMeter) stop(p *ServePath) {
	self, hostCPU, shells, busy := selfCPU()-m.self, procCPU(m.host)-m.hostCPU, m.childrenCPU()-m.shells, machineBusy()-m.busy
	elapsed := time.Since(m.t0)
	if m.host == os.Getpid() {
		self = 0 // the client is the host
	}
	if p.Calls > 0 {
		perCall := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(p.Calls) }
		p.HostCPUus, p.ClientCPUus, p.ShellsCPUus = perCall(hostCPU), perCall(self), perCall(shells)
	}
	if elapsed > 0 {
		p.MachineBusy = busy.Seconds() / elapsed.Seconds()
		p.OtherBusy = (busy - hostCPU - self - shells).Seconds() / elapsed.Seconds()
	}
}

// childrenCPU is the CPU time of the host's live children but notShell.
func (m *cpuMeter) childrenCPU() time.Duration {
	procs, _ := procfs.List()
	var sum time.Duration
	for _, p := range procs {
		if p.PPID == m.host && p.PID != m.notShell {
			sum += procCPU(p.PID)
		}
	}
	return sum
}

// selfCPU is this process's user and system time.
func selfCPU() time.Duration { return procCPU(os.Getpid()) }

// procCPU is the time process pid's threads have run, in nanoseconds: the
// sum of /proc/PID/task/*/schedstat (a shell takes a few ticks in a whole
// run, too few for the ticks of /proc/PID/stat). A thread that ended is not
// counted; Go programs keep theirs.
func procCPU(pid int) time.Duration {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/schedstat")
		if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// clockTick is the unit of /proc/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// machineBusy is the time the machine's CPUs were not idle, in all, since
// boot (the cpu line of /proc/stat, less idle and iowait).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * clockTick
}

// connectAll opens n sessions, a few dozen at a time, and starts each
// one's shell. On error it returns the sessions it opened, for closeAll.
func (r *serveRun) connectAll(ctx context.Context, n int, errs *errorCount) ([]*mcp.ClientSession, error) {
	sessions := make([]*mcp.ClientSession, n)
	var g errgroup.Group
	g.SetLimit(32)
	for i := range sessions {
		g.Go(func() error {
			cs, err := r.connect(ctx)
			if err != nil {
				return fmt.Errorf("bench serve: connecting session %d of %d: %w", i+1, n, err)
			}
			sessions[i] = cs
			text, isErr, err := r.bash(ctx, cs, trueArgs)
			checkMCP(errs, text, isErr, err, "")
			return nil
		})
	}
	return sessions, g.Wait()
}

// closeAll ends the sessions, a few dozen at a time; the server stops their
// agents.
func (r *serveRun) closeAll(sessions []*mcp.ClientSession, errs *errorCount) {
	var g errgroup.Group
	g.SetLimit(32)
	for _, cs := range sessions {
		if cs != nil {
			g.Go(func() error {
				if err := cs.Close(); err != nil {
					errs.add("closing a session: %v", err)
				}
				return nil
			})
		}
	}
	_ = g.Wait()
}

// server is the server process.
type server struct {
	cmd     *exec.Cmd
	url     string
	mark    string
	log     *serverLog
	exited  chan struct{} // closed when waitErr is set
	waitErr error
}

// startServer starts command with a mark in its environment (its shells
// inherit it) and waits for the address it prints.
func startServer(ctx context.Context, command []string) (*server, error) {
	if len(command) == 0 {
		return nil, errors.New("bench serve: no server command")
	}
	var tok [8]byte
	_, _ = crand.Read(tok[:])
	s := &server{
		mark:   serveMark + "=" + hex.EncodeToString(tok[:]),
		log:    &serverLog{addr: make(chan string, 1)},
		exited: make(chan struct{}),
	}
	s.cmd = exec.Command(command[0], command[1:]...)
	s.cmd.Env = append(os.Environ(), s.mark)
	s.cmd.Stderr = s.log
	// A process group of its own: a ^C at the terminal reaches the
	// benchmark, which stops the server in order. Pdeathsig: a benchmark
	// killed outright takes the server with it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.cmd.WaitDelay = 5 * time.Second // for its standard error to close
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench serve: starting the server: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	var err error
	select {
	case s.url = <-s.log.addr:
		return s, nil
	case <-s.exited:
		err = fmt.Errorf("bench serve: the server exited before serving (%v): %s", s.waitErr, s.log.text())
	case <-deadline.C:
		err = fmt.Errorf("bench serve: the server printed no address within 30s: %s", s.log.text())
	case <-ctx.Done():
		err = ctx.Err()
	}
	var rep ServeReport
	return nil, errors.Join(err, s.stop(&rep))
}

// stop sends SIGTERM and waits for the server to exit (SIGKILL past a
// deadline), then for its processes to go, and kills those left. It fills in
// the report's stop figures.
func (s *server) stop(rep *ServeReport) error {
	t0 := time.Now()
	var errs []error
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		errs = append(errs, fmt.Errorf("bench serve: stopping the server: %w", err))
	}
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	select {
	case <-s.exited:
	case <-deadline.C:
		rep.ServerKilled = true
		_ = s.cmd.Process.Kill()
		<-s.exited
		errs = append(errs, fmt.Errorf("bench serve: the server did not exit within a minute of SIGTERM; killed"))
	}
	rep.StopMs = float64(time.Since(t0).Microseconds()) / 1e3
	rep.ServerLog = s.log.text()
	if s.waitErr != nil && !rep.ServerKilled {
		errs = append(errs, fmt.Errorf("bench serve: the server exited with %v", s.waitErr))
	}
	// A shell SIGKILLed by the server lingers a moment before it is gone.
	if left := waitGone(marked(s.mark), 10*time.Second); len(left) > 0 {
		rep.ProcessesLeft = len(left)
		for _, pid := range left {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		waitGone(left, 10*time.Second)
		errs = append(errs, fmt.Errorf("bench serve: %d of the server's processes outlived it (killed now): %v", len(left), left))
	}
	return errors.Join(errs...)
}

// waitGone waits, on pidfds, until each process has exited, and returns
// those alive at the deadline.
func waitGone(pids []int, timeout time.Duration) []int {
	var left []int
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := 0, unix.EINTR
		for err == unix.EINTR { // the Go runtime's own signals interrupt poll
			n, err = unix.Poll(fds, max(int(time.Until(deadline)/time.Millisecond), 0))
		}
		unix.Close(fd)
		if n <= 0 {
			left = append(left, pid)
		}
	}
	return left
}

// serverLog takes the server's standard error: it sends the address of its
// first "serving MCP at" line on addr, and keeps the rest (clipped).
type serverLog struct {
	mu      sync.Mutex
	partial []byte
	kept    bytes.Buffer
	clipped int
	addr    chan string
	found   bool
}

const (
	serveLinePrefix = "dsh-actors: serving MCP at "
	serverLogMax    = 16 << 10
)

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i+1]
		if rest, ok := strings.CutPrefix(string(line), serveLinePrefix); ok && !l.found {
			l.found = true
			l.addr <- strings.TrimSpace(rest)
		} else if l.kept.Len()+len(line) <= serverLogMax {
			l.kept.Write(line)
		} else {
			l.clipped++
		}
		l.partial = l.partial[:copy(l.partial, l.partial[i+1:])]
	}
	return len(p), nil
}

func (l *serverLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.kept.String() + string(l.partial)
	if l.clipped > 0 {
		s += fmt.Sprintf("(%d more lines)\n", l.clipped)
	}
	return s
}

// vmRSS is process pid's resident memory in KiB (VmRSS in
// /proc/PID/status: that process only, not its children).
func vmRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("bench serve: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bench serve: /proc/%d/status: VmRSS %q: %w", pid, rest, err)
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("bench serve: no VmRSS in /proc/%d/status (%v)", pid, sc.Err())
}

// raiseOpenFiles raises this process's open-file limit to its hard limit if
// the sessions need more, and says so when even that is too low. Measured
// at 1,000 sessions: the server holds about 9 descriptors a session (its
// two connections, the shell's terminal and what watches the shell), this
// process about 6 an agent of the Go API phase; a Go server raises its own
// limit to the same hard limit.
func raiseOpenFiles(sessions int) error {
	need := uint64(9*sessions + 256)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("bench serve: reading the open-file limit: %w", err)
	}
	if rl.Cur >= need {
		return nil
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err == nil {
			rl = raised
		}
	}
	if rl.Cur < need {
		return fmt.Errorf("bench serve: %d sessions need about %d open files in the server and in this process, which may have %d (ulimit -n; hard limit %d): raise the limit (ulimit -n %d) or run fewer sessions",
			sessions, need, rl.Cur, rl.Max, need)
	}
	return nil
}

// targets judges the run against the targets.
func targets(r ServeReport) []ServeTarget {
	ratio := ServeTarget{
		Name:    fmt.Sprintf("one session: MCP p50 / Go API p50 <= %.1f", targetRatio),
		Got:     fmt.Sprintf("%.2fx", r.Single.RatioP50),
		Applies: r.Single.Samples > 0,
	}
	ratio.Met = ratio.Applies && r.Single.RatioP50 <= targetRatio
	load := ServeTarget{
		Name: fmt.Sprintf("%d sessions with live shells at %g call/s: zero errors, MCP p99 < %g ms", targetSessions, targetRate, targetP99ms),
		Got:  "not this run's shape (--sessions 1000 --rate 1 --duration D)",
	}
	if r.Sessions >= targetSessions && r.Rate == targetRate && r.Duration > 0 {
		load.Applies = true
		load.Got = fmt.Sprintf("%d errors, p99 %.2f ms", r.Errors, r.MCP.P99ms)
		load.Met = r.Errors == 0 && r.MCP.Calls > 0 && r.MCP.P99ms < targetP99ms
	}
	return []ServeTarget{ratio, load}
}

// WriteTable prints a report for people.
func (r ServeReport) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "server: %s (pid %d)\n\n", strings.Join(r.Command, " "), r.ServerPID)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	sl := r.Single
	fmt.Fprintf(tw, "one session, sequential, interleaved\tsamples\tp50 µs\tp99 µs\t\n")
	fmt.Fprintf(tw, "echo over MCP\t%d\t%.1f\t%.1f\t\n", sl.Samples, sl.MCPP50us, sl.MCPP99us)
	fmt.Fprintf(tw, "echo through the Go API\t%d\t%.1f\t%.1f\t\n", sl.Samples, sl.APIP50us, sl.APIP99us)
	fmt.Fprintf(tw, "floor: MCP ping, no tool\t%d\t%.1f\t%.1f\t\n", sl.Samples, sl.PingP50us, sl.PingP99us)
	fmt.Fprintf(tw, "floor: HTTP GET, no MCP\t%d\t%.1f\t%.1f\t\n", sl.Samples, sl.HTTPP50us, sl.HTTPP99us)
	tw.Flush()
	fmt.Fprintf(&b, "echo: MCP p50 / Go API p50 = %.2fx; with this transport it cannot go below (Go API p50 + ping p50) / Go API p50 = %.2fx\n",
		sl.RatioP50, ratio(sl.APIP50us+sl.PingP50us, sl.APIP50us))

	loop := "closed loop"
	if r.Rate > 0 {
		loop = fmt.Sprintf("open loop, %g calls/s each", r.Rate)
	}
	span := fmt.Sprintf("for %gs", r.Duration)
	if r.Duration == 0 {
		span = "a number of calls each"
	}
	fmt.Fprintf(&b, "\n%s at once (%s, %s); connected and shells started in %.2fs\n", plural(r.Sessions, "session"), loop, span, r.SetupSeconds)
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "path\tcalls\tcalls/s\tp50 ms\tp99 ms\tmax ms\tcalls per session\terrors\t\n")
	for _, p := range []struct {
		name string
		p    ServePath
	}{{"MCP over HTTP", r.MCP}, {"Go API", r.API}} {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%d to %d\t%d\t\n", p.name, p.p.Calls, p.p.CallsPerSec, p.p.P50ms, p.p.P99ms, p.p.MaxMs,
			p.p.MinPerAgent, p.p.MaxPerAgent, p.p.Errors)
	}
	tw.Flush()
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "CPU during the load\thost µs/call\tclient µs/call\tshells µs/call\tmachine busy\tof which other\t\n")
	for _, p := range []struct {
		name   string
		p      ServePath
		client string
	}{{"MCP over HTTP", r.MCP, fmt.Sprintf("%.0f", r.MCP.ClientCPUus)}, {"Go API", r.API, "-"}} {
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.0f\t%.2f of %d CPUs\t%.2f\t\n", p.name, p.p.HostCPUus, p.client, p.p.ShellsCPUus, p.p.MachineBusy, runtime.NumCPU(), p.p.OtherBusy)
	}
	tw.Flush()
	fmt.Fprintf(&b, "(host: the server process over MCP, this one for the Go API; client: this one over MCP; other: the kernel's threads, such as the terminals' work queues, and anything else on the machine)\n")
	fmt.Fprintf(&b, "MCP / Go API: p50 %.2fx, p99 %.2fx, host CPU per call %.2fx\n",
		ratio(r.MCP.P50ms, r.API.P50ms), ratio(r.MCP.P99ms, r.API.P99ms), ratio(r.MCP.HostCPUus, r.API.HostCPUus))

	m := r.Memory
	fmt.Fprintf(&b, "\nserver memory (VmRSS of the server process, without its shells): idle %.1f MiB, after the single-session figure %.1f MiB, %s live %.1f MiB, after the load %.1f MiB\n",
		mib(m.IdleKB), mib(m.WarmKB), plural(r.Sessions, "session"), mib(m.LiveKB), mib(m.AfterLoadKB))
	fmt.Fprintf(&b, "per session: %.1f KiB (live - idle) / %d; the shells themselves: %.1f MiB in all\n", m.PerSessionKB, r.Sessions, mib(m.ShellsKB))
	killed := ""
	if r.ServerKilled {
		killed = " (killed: SIGTERM was not enough)"
	}
	fmt.Fprintf(&b, "server stopped in %.0f ms%s; its processes left after it: %d\n", r.StopMs, killed, r.ProcessesLeft)

	fmt.Fprintf(&b, "\ntargets:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, t := range r.Targets {
		verdict := "not judged"
		switch {
		case t.Met:
			verdict = "met"
		case t.Applies:
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Name, t.Got, verdict)
	}
	tw.Flush()
	if r.MCP.FirstError != "" {
		fmt.Fprintf(&b, "\nfirst error over MCP: %s\n", r.MCP.FirstError)
	}
	if r.API.FirstError != "" {
		fmt.Fprintf(&b, "first error through the Go API: %s\n", r.API.FirstError)
	}
	if r.ServerLog != "" {
		fmt.Fprintf(&b, "\nthe server's standard error:\n%s", r.ServerLog)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

// plural is "1 session", "2 sessions".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// ratio is a / b, 0 when b is.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
