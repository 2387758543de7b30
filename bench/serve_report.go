package bench

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
)

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
