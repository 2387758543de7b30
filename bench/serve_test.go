package bench

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
)

// The serve benchmark's short form: a server built from ./cmd/dsh-actors,
// three sessions for a few calls each; every call answered, every figure
// measured, and the server gone after. No timing is asserted.
func TestServe(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "dsh-actors")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/dsh-actors/dsh-actors/cmd/dsh-actors").CombinedOutput(); err != nil {
		t.Fatalf("building the server: %v\n%s", err, out)
	}
	h := hosttest.Start(t, nil, host.Options{})
	rep, err := RunServe(hosttest.Context(t), h, ServeOptions{
		Command:  ServeCommand(bin, ""),
		Sessions: 3, CallsPerSession: 10, Iterations: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 0 || rep.ProcessesLeft != 0 {
		t.Fatalf("errors %d (MCP: %q, Go API: %q), processes left %d", rep.Errors, rep.MCP.FirstError, rep.API.FirstError, rep.ProcessesLeft)
	}
	if err := unix.Kill(rep.ServerPID, 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("server %d after the run: kill 0 says %v, not ESRCH", rep.ServerPID, err)
	}
	s, m := rep.Single, rep.Memory
	for name, v := range map[string]float64{
		"single: samples": float64(s.Samples), "single: MCP p50": s.MCPP50us, "single: MCP p99": s.MCPP99us,
		"single: API p50": s.APIP50us, "single: API p99": s.APIP99us, "single: ratio": s.RatioP50,
		"single: HTTP p50": s.HTTPP50us, "single: ping p50": s.PingP50us,
		"MCP: calls": float64(rep.MCP.Calls), "MCP: calls/s": rep.MCP.CallsPerSec, "MCP: p50": rep.MCP.P50ms,
		"MCP: p99": rep.MCP.P99ms, "MCP: max": rep.MCP.MaxMs, "MCP: calls per session": float64(rep.MCP.MinPerAgent),
		"API: calls": float64(rep.API.Calls), "API: calls/s": rep.API.CallsPerSec, "API: p50": rep.API.P50ms,
		"API: p99": rep.API.P99ms, "API: max": rep.API.MaxMs, "API: calls per agent": float64(rep.API.MinPerAgent),
		"idle RSS": float64(m.IdleKB), "live RSS": float64(m.LiveKB), "RSS after the load": float64(m.AfterLoadKB),
		"RSS per session": m.PerSessionKB, "shells' RSS": float64(m.ShellsKB), "server stop": rep.StopMs,
		"MCP: server CPU": rep.MCP.HostCPUus, "MCP: client CPU": rep.MCP.ClientCPUus, "MCP: shells' CPU": rep.MCP.ShellsCPUus,
		"API: host CPU": rep.API.HostCPUus, "API: shells' CPU": rep.API.ShellsCPUus,
	} {
		if !(v > 0) {
			t.Errorf("%s is %v", name, v)
		}
	}
	if rep.MCP.Calls != 30 || rep.API.Calls != 30 || s.Samples != 10 {
		t.Errorf("calls: MCP %d, Go API %d, single-session samples %d", rep.MCP.Calls, rep.API.Calls, s.Samples)
	}
	if len(rep.Targets) != 2 || rep.Targets[1].Applies {
		t.Errorf("targets %+v", rep.Targets)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil || !strings.Contains(b.String(), "echo over MCP") {
		t.Errorf("WriteTable: %v\n%s", err, b.String())
	}
}
