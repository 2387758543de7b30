package bench

import (
	"context"
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
