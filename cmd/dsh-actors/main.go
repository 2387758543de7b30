package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/tmuxprobe"
	"github.com/dsh-actors/dsh-actors/bench"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/executor"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
	"github.com/dsh-actors/dsh-actors/mcpserve"
	"github.com/dsh-actors/dsh-actors/metrics"
)

const usage = `dsh-actors: real terminals for LLM agents, one supervised actor each.

Commands:
  serve [--config FILE] [--http ADDR] [--token-file FILE] [--metrics ADDR] [--grace D]
      Serve every tool over the Model Context Protocol on stdin and stdout,
      or as streamable HTTP at /mcp (a bare port binds to 127.0.0.1), with
      Prometheus metrics at /metrics. One agent per MCP session; the
      session's end stops it. SIGINT/SIGTERM: calls in flight may finish
      (up to --grace), the rest are cancelled, every process ends. The
      bearer token comes from --token-file or $DSH_ACTORS_TOKEN (--token
      works too, but every process can read a command line).

  call [--config FILE]
      Read tool calls from stdin, one JSON object a line:
        {"agent":"a1","tool":"bash","args":{"command":"echo hi"},"id":1}
      and write one JSON result a line to stdout:
        {"id":1,"line":1,"agent":"a1","tool":"bash","text":"hi\n","isError":false,"data":{...}}
      All lines share one host: an agent's shell persists from line to line.
      Tools named session.begin_turn, session.prepare_step, session.record
      and session.inject speak the session protocol (see the README).
      Calls of one agent run in order; different agents run at once, so
      their results may interleave. Bad lines get an error result.

  bench shell [--json] [--iterations N] [--spawn-iterations N] [--agents N] [--calls N]
              [--duration D [--rate R]] [--config FILE]
      Measure the bash tool through the whole runtime next to the floor (a
      bare PTY bash round trip, no actors) sampled in the same run.

  bench terminal [--json] [--iterations N] [--config FILE]
      Measure terminal_open (bash, python3) and a terminal_send round trip to
      python3 next to the same programs on a bare PTY, with the count of each
      readiness reason.

  bench sandbox [--json] [--iterations N] [--agents N] [--ballast-mib M]
      Measure what each sandbox level costs next to level off in the same
      run: creation, a new agent's first echo, terminal_open, echo; the
      spawn with M MiB of host heap; N sandboxed agents at once and the
      memory of each sandbox.

  bench soak [--agents N] [--duration D] [--terminals T]
      Throw random faults at N agents' shells, terminals and tasks for D
      (kill -9, timeouts, exits, task kills, closes, cancellations), check
      every answer, and count what is left after the host stops.

  bench serve [--sessions N] [--duration D [--rate R]] [--calls N] [--iterations N] [--json] [--config FILE]
      Run N concurrent MCP-over-HTTP sessions of bash calls against a
      server process, next to the same calls through the Go API in the same
      run: calls/s, p50/p99/max, errors, the server's memory.

  tmux-location
      Print this process's tmux location (session, window, pane, active
      flags, layout) as it would be injected; print nothing and exit 1 when
      not in a tmux pane of its own.

  tools [--config FILE]
      Print every tool (name, description, input schema) and the guidance
      text for the model, as one JSON object.

  config check FILE
      Load FILE as the runtime would and report every problem in it at
      once: unknown keys, wrong types, values out of range, each with its
      key, its line, the value and the rule; exit 0 when there is none.

  config default
      Print the default configuration as a commented file, every key with
      its default; loaded back, it changes nothing.

  version
      Print the module version and the VCS revision it was built from
      (also: --version).

  help [COMMAND]
      Show this text, or a command's own help, on stdout (COMMAND -h shows
      it on stderr, as a Go command's flags do).
`

const benchUsage = `Usage: dsh-actors bench BENCHMARK [flags]

Run a benchmark and print its figures next to the floor measured in the same run.

Benchmarks:
  shell      the bash tool: spawn, echo, pwd, and N agents at once
  terminal   terminal_open and a terminal_send round trip
  soak       random faults at N agents, then a check of what is left
  serve      N MCP-over-HTTP sessions next to the same calls through the Go API

dsh-actors bench BENCHMARK -h shows its flags.
`

// version is the module's version and the VCS revision of the build.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dsh-actors (no build information)"
	}
	v := "dsh-actors " + bi.Main.Version
	var rev, modified, when string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		case "vcs.time":
			when = " " + s.Value
		}
	}
	if rev != "" {
		v += ", revision " + rev + modified + when
	}
	return v + ", " + bi.GoVersion
}

func main() {
	// Before anything starts: the shells and terminals must not inherit a
	// blocked SIGWINCH or an ignored SIGINT from whoever started us.
	if err := host.ResetInheritedSignals(); err != nil {
		fmt.Fprintf(os.Stderr, "dsh-actors: warning: %v\n", err)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	// INT, TERM, QUIT and HUP (the terminal or the parent went away) end the run
	// cleanly: the host stops and kills every process it started. A closed
	// stdout must not kill us with SIGPIPE before that: writes then fail
	// with EPIPE, which ends the run the same way. SIGPIPE is caught, not
	// ignored: an ignored signal stays ignored in every shell we start, and
	// `yes | head -1` there would complain about a broken pipe.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer stop()
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	var err error
	switch args[0] {
	case "call":
		err = cmdCall(ctx, args[1:], stdin, stdout, stderr)
	case "bench":
		err = cmdBench(ctx, args[1:], stdout, stderr)
	case "config":
		err = cmdConfig(args[1:], stdout, stderr)
	case "serve":
		err = cmdServe(ctx, args[1:], stdin, stdout, stderr)
	case "tools":
		err = cmdTools(args[1:], stdout, stderr)
	case "tmux-location":
		if len(args) > 1 {
			if isHelp(args[1]) {
				fmt.Fprintln(stderr, "Usage: dsh-actors tmux-location\n\nPrint this process's tmux location as it would be injected; print nothing and exit 1 when not in a tmux pane of its own.")
				return 0
			}
			fmt.Fprintf(stderr, "dsh-actors: tmux-location: unexpected argument %q\n", args[1])
			return 2
		}
		loc, ok, err := tmuxprobe.Read(ctx, executor.New(nil), os.Getpid())
		if err != nil {
			fmt.Fprintf(stderr, "dsh-actors: %v\n", err)
			return 1
		}
		if !ok {
			return 1
		}
		fmt.Fprintln(stdout, loc.State())
		return 0
	case "version", "-version", "--version":
		if len(args) > 1 {
			if args[0] == "version" && isHelp(args[1]) {
				fmt.Fprintln(stderr, "Usage: dsh-actors version\n\nPrint the module version and the VCS revision it was built from (also: dsh-actors --version).")
				return 0
			}
			fmt.Fprintf(stderr, "dsh-actors: %s: unexpected argument %q\n", args[0], args[1])
			return 2
		}
		fmt.Fprintln(stdout, version())
		return 0
	case "help":
		if len(args) > 1 {
			// help CMD [SUB]: the command's own help, on stdout, as asked.
			return run(append(args[1:len(args):len(args)], "-h"), stdin, stdout, stdout)
		}
		fmt.Fprint(stdout, usage)
		return 0
	case "-h", "-help", "--help":
		fmt.Fprint(stderr, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "dsh-actors: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "dsh-actors: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "dsh-actors: %v\n", err)
		return 1
	}
}

type usageError struct{ error }

// errHelp: a command printed its help, as asked; the run succeeds.
var errHelp = errors.New("help shown")

// isHelp: the argument asks for help, as the flag package reads it.
func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// flags is a command's flag set with its help text.
type flags struct {
	*flag.FlagSet
	args, summary string
	out           io.Writer // where -h shows the usage: stderr
}

// newFlags makes the flag set of command name: args shows its arguments in
// the usage line, summary says what it does. As with a Go command's flag
// set, -h shows the usage on out (stderr) and succeeds (flag.ErrHelp); a bad
// flag is reported once, with exit 2. (`dsh-actors help COMMAND` shows the
// same usage on stdout.) The flag package prints nothing itself.
func newFlags(name, args, summary string, out io.Writer) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{FlagSet: fs, args: args, summary: summary, out: out}
}

func (f *flags) usage() {
	fmt.Fprintf(f.out, "Usage: dsh-actors %s %s\n\n%s\n", f.Name(), f.args, f.summary)
	hasFlags := false
	f.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprintln(f.out, "\nFlags:")
		f.SetOutput(f.out)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
}

// parseFlags parses a command's flags; it takes no other argument.
func parseFlags(fs *flags, args []string) error { return parseArgs(fs, args, 0) }

// parseArgs parses a command's flags, followed by exactly n arguments.
func parseArgs(fs *flags, args []string, n int) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.usage()
		return errHelp
	case err != nil:
		return usageError{fmt.Errorf("%s: %v (dsh-actors %s -h shows its flags)", fs.Name(), err, fs.Name())}
	case fs.NArg() > n:
		return usageError{fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(n))}
	case fs.NArg() < n:
		return usageError{fmt.Errorf("%s: missing %s (dsh-actors %s -h)", fs.Name(), fs.args, fs.Name())}
	}
	return nil
}

func startHost(configPath string, stderr io.Writer) (*host.Host, error) {
	cfg, err := config.Load(configPath)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return host.Start(host.Options{Config: &cfg, Logger: log})
}

func stopHost(h *host.Host) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return h.Stop(ctx)
}

func cmdCall(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("call", "[--config FILE] < calls.jsonl", "Read tool calls (and session lines) from stdin, one JSON object a line, and write one JSON result a line to stdout.", stderr)
	configPath := fs.String("config", "", "YAML configuration `file` (default: built-in defaults)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := startHost(*configPath, stderr)
	if err != nil {
		return err
	}
	return errors.Join(runCall(ctx, h, stdin, stdout), stopHost(h))
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "terminal" {
		return cmdBenchTerminal(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "soak" {
		return cmdBenchSoak(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "serve" {
		return cmdBenchServe(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "sandbox" {
		return cmdBenchSandbox(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stderr, benchUsage)
		return errHelp
	}
	if len(args) == 0 || args[0] != "shell" {
		return usageError{errors.New(`bench: name a benchmark: "bench shell", "bench terminal", "bench sandbox", "bench soak" or "bench serve" (dsh-actors bench -h lists them)`)}
	}
	def := bench.DefaultShellOptions()
	fs := newFlags("bench shell", "[flags]", "Measure the bash tool through the whole runtime next to the floor, a bare PTY bash round trip sampled in the same run.", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	iterations := fs.Int("iterations", def.Iterations, "samples of the echo and pwd scenarios")
	spawns := fs.Int("spawn-iterations", def.SpawnIterations, "samples of the spawn+init+first echo scenario")
	agents := fs.Int("agents", def.Agents, "agents driven at once for the throughput figure")
	calls := fs.Int("calls", def.CallsPerAgent, "calls each of those agents makes (without --duration)")
	duration := fs.Duration("duration", 0, "run the throughput figure for this long instead of a number of calls")
	floorLoad := fs.Bool("floor-load", false, "run the throughput figure again on bare PTY bash shells (no runtime), for comparison")
	rate := fs.Float64("rate", 0, "with --duration: calls per second per agent, open loop (0: closed loop)")
	configPath := fs.String("config", "", "YAML configuration `file` (default: built-in defaults)")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *duration < 0 || *rate < 0 || (*rate > 0 && *duration == 0) {
		return usageError{fmt.Errorf("bench shell: --duration %v, --rate %g: both must be positive, and --rate needs --duration", *duration, *rate)}
	}
	for name, v := range map[string]int{"iterations": *iterations, "spawn-iterations": *spawns, "agents": *agents, "calls": *calls} {
		if v < 1 {
			return usageError{fmt.Errorf("bench shell: --%s is %d: it must be at least 1", name, v)}
		}
	}
	h, err := startHost(*configPath, stderr)
	if err != nil {
		return err
	}
	rep, err := bench.RunShell(ctx, h, bench.ShellOptions{
		Iterations: *iterations, SpawnIterations: *spawns, Agents: *agents, CallsPerAgent: *calls,
		Duration: *duration, Rate: *rate, FloorLoad: *floorLoad,
	})
	if stopErr := stopHost(h); err == nil {
		err = stopErr
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		err = enc.Encode(rep)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err == nil && rep.Errors > 0 {
		err = fmt.Errorf("bench shell: %d calls failed; first: %s", rep.Errors, rep.FirstError)
	}
	return err
}

func cmdBenchSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench soak", "[flags]", "Throw random faults at agents' shells, terminals and tasks, check every answer, and count what is left after the host stops.", stderr)
	agents := fs.Int("agents", 100, "agents under faults at once")
	duration := fs.Duration("duration", 30*time.Second, "how long faults are thrown at them")
	terminals := fs.Int("terminals", 2, "terminals each agent keeps open at most (each takes a pty of kernel.pty.max)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *agents < 1 || *duration <= 0 {
		return usageError{fmt.Errorf("bench soak: --agents %d, --duration %v: both must be positive", *agents, *duration)}
	}
	rep, err := bench.RunSoak(ctx, bench.SoakOptions{Agents: *agents, Duration: *duration, Terminals: *terminals})
	if werr := rep.WriteTable(stdout); err == nil {
		err = werr
	}
	if err == nil && !rep.Sound() {
		err = errors.New("bench soak: the run was not sound (see the counts above)")
	}
	return err
}

func cmdBenchTerminal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := bench.DefaultTerminalOptions()
	fs := newFlags("bench terminal", "[flags]", "Measure terminal_open and a terminal_send round trip next to the same programs on a bare PTY.", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	iterations := fs.Int("iterations", def.Iterations, "samples of each open scenario (the send scenario takes four times as many)")
	configPath := fs.String("config", "", "YAML configuration `file` (default: built-in defaults)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *iterations < 1 {
		return usageError{fmt.Errorf("bench terminal: --iterations is %d: it must be at least 1", *iterations)}
	}
	h, err := startHost(*configPath, stderr)
	if err != nil {
		return err
	}
	rep, err := bench.RunTerminal(ctx, h, bench.TerminalOptions{Iterations: *iterations})
	if stopErr := stopHost(h); err == nil {
		err = stopErr
	}
	if err != nil {
		return err
	}
	if *asJSON {
		err = json.NewEncoder(stdout).Encode(rep)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err == nil && rep.Errors > 0 {
		err = fmt.Errorf("bench terminal: %d calls failed; first: %s", rep.Errors, rep.FirstError)
	}
	return err
}

func cmdBenchSandbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := bench.DefaultSandboxOptions()
	fs := newFlags("bench sandbox", "[flags]", "Measure each sandbox level's creation, shell and terminal start and echo next to level off in the same run, the spawn with a large host heap, and many sandboxed agents at once.", stderr)
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	iterations := fs.Int("iterations", def.Iterations, "samples of each level's scenarios")
	agents := fs.Int("agents", def.Agents, "sandboxed agents, each with a shell, started for the memory figure (0: none)")
	ballast := fs.Int("ballast-mib", int(def.BallastBytes>>20), "host heap held while the spawn is measured again (0: not measured)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *iterations < 1 || *agents < 0 || *ballast < 0 {
		return usageError{fmt.Errorf("bench sandbox: --iterations %d, --agents %d, --ballast-mib %d: iterations must be at least 1, the others at least 0", *iterations, *agents, *ballast)}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rep, err := bench.RunSandbox(ctx, bench.SandboxOptions{Iterations: *iterations, Agents: *agents, BallastBytes: int64(*ballast) << 20}, log)
	if err != nil {
		return err
	}
	if *asJSON {
		err = json.NewEncoder(stdout).Encode(rep)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err == nil && rep.Errors > 0 {
		err = fmt.Errorf("bench sandbox: %d failures; first: %s", rep.Errors, rep.FirstError)
	}
	return err
}

const configUsage = `Usage: dsh-actors config check FILE
       dsh-actors config default

check loads FILE as the runtime would and reports every problem in it;
default prints every key with its default, as a commented file.
`

func cmdConfig(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New(`config: "config check FILE" or "config default" (dsh-actors config -h)`)}
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stderr, configUsage)
		return errHelp
	case "check":
		fs := newFlags("config check", "FILE", "Load FILE as the runtime would and report every problem in it at once: unknown keys, values of the wrong type and values out of range, each with its key, its line, the value and the rule. Exit 0 when there is none, 1 when there is any.", stderr)
		if err := parseArgs(fs, args[1:], 1); err != nil {
			return err
		}
		if _, err := config.Load(fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: no problem found\n", fs.Arg(0))
		return nil
	case "default":
		fs := newFlags("config default", "", "Print the default configuration as a commented file, every key with its default; loaded back, it changes nothing.", stderr)
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		b, err := config.DefaultYAML()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	return usageError{fmt.Errorf(`config: unknown subcommand %q: "config check FILE" or "config default" (dsh-actors config -h)`, args[0])}
}

func cmdServe(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// The token in the environment is the server's: read once, and gone
	// before any shell, terminal or plugin could inherit it.
	envToken := os.Getenv(ptyproc.TokenVariable)
	os.Unsetenv(ptyproc.TokenVariable)
	fs := newFlags("serve", "[--config FILE] [--http ADDR] [--token-file FILE] [--metrics ADDR] [--grace D]", "Serve every tool over the Model Context Protocol: on stdin and stdout, or with --http as streamable HTTP at /mcp, with Prometheus metrics at /metrics. One agent per MCP session, stopped with every process it started when the session ends. SIGINT or SIGTERM lets the calls in flight finish (up to --grace), cancels the rest, and ends every process.\n\nThe bearer token is read from --token-file, else --token, else $DSH_ACTORS_TOKEN. Prefer the file or the variable: a command line is visible to every process of the machine (ps), the agents' shells included. The variable is removed from the server's environment once read, so no shell, terminal or plugin inherits it. The file holds the token alone (a trailing newline is trimmed), must not be empty, and must not be readable by others nor writable by its group or others (chmod 600 or 640).", stderr)
	configPath := fs.String("config", "", "YAML configuration `file` (default: built-in defaults)")
	addr := fs.String("http", "", "serve streamable HTTP on `ADDR` (PORT or HOST:PORT; a bare port binds to 127.0.0.1)")
	tokenFile := fs.String("token-file", "", "require the bearer token in `FILE` of every HTTP request, /metrics included (mode 600 or 640)")
	token := fs.String("token", "", "require this bearer `token` of every HTTP request (visible to every process in ps: prefer --token-file or $DSH_ACTORS_TOKEN)")
	metricsAddr := fs.String("metrics", "", "in stdio mode, serve Prometheus metrics at http://`ADDR`/metrics (with --http they are at /metrics on its listener)")
	grace := fs.Duration("grace", 10*time.Second, "on SIGINT or SIGTERM, how long calls in flight may take to finish before they are cancelled")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *tokenFile != "" && *token != "":
		return usageError{errors.New("serve: --token and --token-file: give one of them")}
	case *tokenFile != "":
		t, err := readTokenFile(*tokenFile)
		if err != nil {
			return usageError{fmt.Errorf("serve: --token-file: %v", err)}
		}
		*token = t
	case *token == "":
		*token = envToken
	}
	if *addr != "" && *metricsAddr != "" {
		return usageError{errors.New("serve: --metrics is for stdio mode: with --http, the metrics are at /metrics on the same listener")}
	}
	if *grace < 0 {
		return usageError{fmt.Errorf("serve: --grace %v: it must not be negative", *grace)}
	}
	if err := mcpserve.CheckToken(*token); err != nil {
		return usageError{fmt.Errorf("serve: --token (or $DSH_ACTORS_TOKEN): %v", err)}
	}
	listenAddr, err := loopbackUnlessTold("--http", *addr, *token)
	if err != nil {
		return err
	}
	metricsListen, err := loopbackUnlessTold("--metrics", *metricsAddr, *token)
	if err != nil {
		return err
	}
	m, err := metrics.New()
	if err != nil {
		return fmt.Errorf("serve: metrics: %w", err)
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	if cfg.Session.Path == "" && cfg.TmuxContext.Enabled {
		// A server's MCP sessions end with it, and two servers on one
		// file would wait for each other's lock: a log of its own.
		dir, err := os.MkdirTemp("", "dsh-actors-serve-")
		if err != nil {
			return fmt.Errorf("serve: a directory for the session log: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.Session.Path = filepath.Join(dir, "sessions.db")
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := host.Start(host.Options{Config: &cfg, Logger: log, Metrics: m})
	if err != nil {
		return err
	}
	s := mcpserve.New(h, log)
	// A signal (ctx) first lets the calls in flight finish, refusing new
	// ones; then serving ends, the sessions close (cancelling what still
	// runs) and the host stops, killing every process.
	serving, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	go func() {
		select {
		case <-ctx.Done():
		case <-serving.Done():
			return
		}
		drain, cancel := context.WithTimeout(context.Background(), *grace)
		defer cancel()
		// A second signal cancels what runs at once.
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT)
		defer signal.Stop(again)
		go func() {
			select {
			case <-again:
				cancel()
			case <-drain.Done():
			}
		}()
		fmt.Fprintf(stderr, "dsh-actors: stopping: calls in flight may finish within --grace %v (signal again to cancel them now)\n", *grace)
		if s.Drain(drain) != nil {
			fmt.Fprintln(stderr, "dsh-actors: the calls still running are cancelled")
		}
		stopServing()
	}()
	mux := http.NewServeMux()
	metricsOn := metricsListen
	if *addr != "" {
		metricsOn = listenAddr
	}
	mux.Handle("/metrics", mcpserve.LoopbackHostOnly(metricsOn, mcpserve.RequireToken(*token, m.Handler())))
	var stopListening func()
	if *addr == "" {
		if metricsListen != "" {
			if stopListening, _, err = listen("metrics", metricsListen, "/metrics", mux, stderr); err != nil {
				s.Close()
				return errors.Join(err, stopHost(h))
			}
		}
		err = s.ServeStdio(serving, stdin, stdout)
	} else {
		mux.Handle("/mcp", mcpserve.RequireToken(*token, s.Handler(mcpserve.HTTPOptions{})))
		var failed <-chan error
		if stopListening, failed, err = listen("MCP", listenAddr, "/mcp", mux, stderr); err == nil {
			select {
			case <-serving.Done():
			case err = <-failed:
			}
		}
	}
	if errors.Is(err, context.Canceled) {
		err = nil // a signal: a clean stop
	}
	stopServing()
	s.Close() // before the listener's shutdown: it ends the sessions' streams
	if stopListening != nil {
		stopListening()
	}
	return errors.Join(err, stopHost(h))
}

// maxTokenFile bounds what --token-file reads: a token, not a document.
const maxTokenFile = 4096

// readTokenFile reads the token of --token-file: the file's whole text
// less trailing line ends, not empty, and in a file that others cannot
// read and neither its group nor others can write (a token anyone can read
// is no better than one on the command line, and one they can write is
// theirs). The mode is that of the file opened, so a pipe
// (--token-file <(pass show dsh)) does as well as a file.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if perm := st.Mode().Perm(); perm&0o027 != 0 {
		return "", fmt.Errorf("%s has mode %04o: others may read or write it, or its group may write it (chmod 600 %s)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("%s is larger than %d bytes: it should hold the token alone", path, maxTokenFile)
	}
	t := strings.TrimRight(string(b), "\r\n")
	if t == "" {
		return "", fmt.Errorf("%s is empty: it should hold the token", path)
	}
	if err := mcpserve.CheckToken(t); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	return t, nil
}

// loopbackUnlessTold is the address to listen on for flag: a bare port
// means 127.0.0.1; another host is taken as asked, and needs a token.
func loopbackUnlessTold(flag, addr, token string) (string, error) {
	if addr == "" {
		return "", nil
	}
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", usageError{fmt.Errorf("serve: %s %q: %v", flag, addr, err)}
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return "", usageError{fmt.Errorf("serve: %s %q: the port must be a number from 0 to 65535", flag, addr)}
	}
	if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" && token == "" {
		return "", usageError{fmt.Errorf("serve: %s %q is reachable from other machines: give --token-file (or $DSH_ACTORS_TOKEN) too", flag, addr)}
	}
	return net.JoinHostPort(host, port), nil
}

// listen serves mux on addr until stop is called, saying where on stderr;
// failed reports a listener that failed by itself.
func listen(what, addr, path string, mux *http.ServeMux, stderr io.Writer) (stop func(), failed <-chan error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(stderr, "dsh-actors: serving %s at http://%s%s\n", what, ln.Addr(), path)
	// A request must arrive whole within a minute (a body sent slowly on
	// purpose would hold a descriptor); idle connections go after two.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("serve: %s: %w", what, err)
		}
		close(errc)
	}()
	return func() {
		// Not Shutdown: by now every answer that was let through is
		// written (mcpserve.Server.Drain), and Shutdown would wait up to
		// 5 s for a connection a client opened without sending on it.
		_ = srv.Close()
		for range errc {
		}
	}, errc, nil
}

func cmdTools(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tools", "[--config FILE]", "Print every tool (name, description, input schema) and the guidance text for the model, as one JSON object.", stderr)
	configPath := fs.String("config", "", "YAML configuration `file` (default: built-in defaults)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := startHost(*configPath, stderr)
	if err != nil {
		return err
	}
	defer stopHost(h)
	type tool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	out := struct {
		Tools    []tool `json:"tools"`
		Guidance string `json:"guidance"`
	}{Guidance: h.Guidance()}
	for _, t := range h.Tools() {
		out.Tools = append(out.Tools, tool{t.Name, t.Description, t.InputSchema})
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
