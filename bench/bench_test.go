package bench

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/messages"
)

func TestMain(m *testing.M) {
	testkit.Main(m)
}

// The floor and the full path, one call at a time. `dsh-actors bench shell`
// interleaves them for a fair ratio; these are for profiling.

func BenchmarkFloorEcho(b *testing.B) {
	f, err := startFloor()
	if err != nil {
		b.Fatal(err)
	}
	defer f.close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.roundTrip("echo hi"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkShellActorEcho(b *testing.B) {
	h, err := host.Start(host.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Stop(context.Background())
	sys := h.System()
	pid := sys.Root.Spawn(shell.Props(shell.Options{Config: shell.DefaultConfig()}))
	defer func() { sys.Root.StopFuture(pid).Wait() }()
	run := func() {
		r, err := sys.Root.RequestFuture(pid, &shell.Run{CallID: "x", Args: shell.Args{Command: "echo hi"}}, 5*time.Second).Result()
		if err != nil || r.(*messages.ToolResult).Text != "hi\n" {
			b.Fatal(err, r)
		}
	}
	run()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
}

func BenchmarkHostEcho(b *testing.B) {
	h, err := host.Start(host.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Stop(context.Background())
	ctx := context.Background()
	h.Bash(ctx, "a", shell.Args{Command: "true"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := h.Bash(ctx, "a", shell.Args{Command: "echo hi"})
		if err != nil || r.Text != "hi\n" {
			b.Fatal(err, r)
		}
	}
}

// BenchmarkHostStop measures h.Stop with many live shells, each with a
// background job (`-stopshells N`, default 200; the target is 1,000
// in under a second). Each iteration starts the shells first, untimed.
func BenchmarkHostStop(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h, err := host.Start(host.Options{})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for a := range *stopShells {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := h.Bash(ctx, fmt.Sprintf("s%d", a), shell.Args{Command: "sleep 1000 & true"}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		b.StartTimer()
		t0 := time.Now()
		if err := h.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), "ms/stop")
	}
}

var stopShells = flag.Int("stopshells", 200, "live shells for BenchmarkHostStop")

// The soak's short form: agents with shells, terminals and tasks under
// random faults for a few seconds; every call answered with its own
// output, and nothing left after the host stops.
func TestSoak(t *testing.T) {
	rep, err := RunSoak(context.Background(), SoakOptions{Agents: 6, Duration: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Sound() || rep.Calls < 50 {
		t.Fatalf("%+v", rep)
	}
	t.Logf("%d calls: %v; threads after: %d; live heap %.1f MB at the start, %.1f MB once the agents stopped, %.1f MB at the end",
		rep.Calls, rep.Ops, rep.ThreadsAfter, float64(rep.LiveHeapStart)/1e6, float64(rep.LiveHeapIdle)/1e6, float64(rep.LiveHeapEnd)/1e6)
}

// The sandbox benchmark runs every level, counts what it measured and
// fails on no call.
func TestRunSandboxMeasuresEveryLevel(t *testing.T) {
	rep, err := RunSandbox(context.Background(), SandboxOptions{Iterations: 2, Agents: 3}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors > 0 {
		t.Fatalf("%d errors; first: %s", rep.Errors, rep.FirstError)
	}
	if len(rep.Create) != 4 || rep.Create[0].Samples != 2 || rep.Many == nil || rep.Many.Agents != 3 || rep.Many.InitPSSKiB <= 0 {
		t.Fatalf("report %+v", rep)
	}
}
