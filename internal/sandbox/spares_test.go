package sandbox_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// An agent's holder takes the spare made ahead when it asks alike, and
// the next spare is made; one asked otherwise makes its own; a spare whose
// init was killed while it waited is not handed out; Close ends the spare.
func TestSpares(t *testing.T) {
	var spares, own atomic.Int32
	w := sandbox.Want{Level: sandbox.LevelLimits, Limits: sandbox.LimitValues{Pids: 100}}
	s := sandbox.NewSpares(w, nil, func(sandbox.Report, time.Duration) { spares.Add(1) })
	closed := false
	defer func() {
		if !closed {
			_ = s.Close()
		}
	}()
	ready := func(n int32) int {
		t.Helper()
		var pid int
		testkit.Eventually(t, fmt.Sprintf("spare %d ready", n), func() (bool, string) {
			pid = s.SpareInitPID()
			return spares.Load() == n && pid != 0, fmt.Sprintf("%d made, ready: %d", spares.Load(), pid)
		})
		return pid
	}
	holder := func(w sandbox.Want) *sandbox.Holder {
		h := sandbox.NewHolder(w, s, nil, func(sandbox.Report, time.Duration) { own.Add(1) })
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	first := ready(1)

	a := w
	a.Name = "agent-a"
	sb, err := holder(a).Get()
	if err != nil || sb == nil {
		t.Fatalf("the first agent's sandbox: %v (none: %v)", err, sb == nil)
	}
	if sb.InitPID() != first || own.Load() != 0 {
		t.Errorf("the agent got init %d (made %d of its own), want the spare's %d", sb.InitPID(), own.Load(), first)
	}
	if out, _ := run(t, sb, "echo inside; ps -e -o comm= | head -n 1"); !strings.Contains(out, "inside\n"+sandbox.InitName+"\n") {
		t.Errorf("a program in the spare taken: %q", out)
	}
	second := ready(2)

	other := w
	other.Name, other.Level = "agent-b", sandbox.LevelProcess
	if sb, err := holder(other).Get(); err != nil || sb == nil || sb.InitPID() == second || own.Load() != 1 {
		t.Errorf("an agent asking another level: %v (made %d of its own); want one of its own", err, own.Load())
	}

	done := s.SpareDone()
	if err := syscall.Kill(second, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(testkit.Timeout):
		t.Fatal("the spare's end was not noticed")
	}
	c := w
	c.Name = "agent-c"
	sb, err = holder(c).Get()
	if err != nil || sb == nil || sb.InitPID() == second {
		t.Fatalf("after the spare's init was killed: %v (none: %v), want a live sandbox", err, sb == nil)
	}
	third := ready(3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	testkit.Eventually(t, "the spare's init gone", func() (bool, string) {
		// Ended: its reaper (pid 1 or a subreaper) may take a while.
		p, err := procfs.Stat(third)
		return errors.Is(err, procfs.ErrNoProcess) || errors.Is(err, os.ErrNotExist) || err == nil && p.Zombie(), fmt.Sprintf("%+v %v", p, err)
	})
	d := w
	d.Name = "agent-d"
	before := own.Load()
	if sb, err := holder(d).Get(); err != nil || sb == nil || own.Load() != before+1 {
		t.Errorf("after Close: %v (made %d of its own), want a sandbox of the agent's own", err, own.Load()-before)
	}
}
