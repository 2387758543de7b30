package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// liveHeap is the heap in use after two forced collections (the first may
// leave what finalizers and sync.Pools still held to the second).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A long-lived server gives memory back: a terminal that printed a lot and
// was closed, a background task whose output was collected, an agent that
// stopped leave nothing of their output behind, however many come and go.
// Each round, an agent that lives on opens terminals that print 1.5 MB
// (more than their history keeps), runs a background task, and closes them;
// and an agent of the round does the same and is stopped. The live heap
// after the last round is about what it was after the first. (It grew by
// the whole history of every terminal the lasting agent had closed, up to
// its 64 remembered answers, and of the last stopped agent's terminals:
// dead actors stay reachable through stale PIDs.)
func TestClosedTerminalsAndStoppedAgentsLeaveNothing(t *testing.T) {
	h := hosttest.Start(t, nil, host.Options{})
	// The rounds together take longer than one call may.
	ctx, cancel := context.WithTimeout(context.Background(), 20*testkit.Timeout)
	defer cancel()
	call := func(agent, tool string, args map[string]any) map[string]any {
		t.Helper()
		raw, _ := json.Marshal(args)
		r, err := h.Call(ctx, agent, tool, raw)
		if err != nil || r.IsError {
			t.Fatalf("%s %s: %v %+v", agent, tool, err, r)
		}
		var data map[string]any
		if err := json.Unmarshal(r.Data, &data); err != nil {
			t.Fatalf("%s %s: %v in %s", agent, tool, err, r.Data)
		}
		return data
	}
	const printMuch = "head -c 1125000 /dev/zero | base64 -w 100\n" // 1.5 MB
	terminal := func(agent string, background bool) {
		id := call(agent, "terminal_open", nil)["terminal_id"]
		if !background {
			call(agent, "terminal_send", map[string]any{"terminal_id": id, "text": printMuch, "wait_ms": 60000})
		} else {
			task := call(agent, "terminal_send", map[string]any{"terminal_id": id, "text": printMuch, "run_in_background": true})["task_id"]
			for call(agent, "task_output", map[string]any{"task_id": task, "wait_ms": 60000})["running"] != false {
			}
		}
		call(agent, "terminal_close", map[string]any{"terminal_id": id})
	}
	const rounds = 5
	var first uint64
	for round := 1; round <= rounds; round++ {
		for i := range 3 {
			terminal("lasting", i == 0)
		}
		passing := fmt.Sprintf("passing-%d", round)
		terminal(passing, false)
		terminal(passing, true)
		if err := h.StopAgent(ctx, passing); err != nil {
			t.Fatal(err)
		}
		heap := liveHeap()
		t.Logf("after round %d: live heap %.1f MB", round, float64(heap)/1e6)
		if round == 1 {
			first = heap
		}
	}
	// Each round printed 7.5 MB into terminals whose history keeps 1 MB
	// each: had they stayed, the heap would have grown by 16 MB at least.
	if last := liveHeap(); last > first+8e6 {
		t.Fatalf("the live heap grew from %.1f MB after the first round to %.1f MB after the %dth: what closed terminals and stopped agents printed stays",
			float64(first)/1e6, float64(last)/1e6, rounds)
	}
}
