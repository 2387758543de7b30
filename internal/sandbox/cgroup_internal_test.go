package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// The next sandbox's cgroup is made, and the host's group keeps its
// bound, when the last sandbox's close removes the group meanwhile (it is
// made again then). The bound was lost in 25 of 300 rounds when only the
// make of the group wrote it, and the make failed (ENOENT, the group gone
// between MkdirAll's two mkdirs) on the first run of this test.
func TestHostGroupKeepsItsBoundAcrossCloseAndMake(t *testing.T) {
	if isCgroup2(cgroupRoot) {
		t.Skip("v1 only: on v2 the sandboxes' parent is made once")
	}
	probe, err := newCgroup("probe", LimitValues{})
	if err != nil {
		t.Skipf("no cgroup v1 here to write: %v", err)
	}
	if err := probe.remove(); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		a, err := newCgroup("a", LimitValues{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _ = a.remove() })
		b, err := newCgroup("b", LimitValues{})
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		max, err := os.ReadFile(filepath.Join(filepath.Dir(b.dirs[0]), "pids.max"))
		if err != nil || strings.TrimSpace(string(max)) == "max" {
			t.Fatalf("round %d: the host's group %s allows %q pids (%v)", i, filepath.Dir(b.dirs[0]), max, err)
		}
		if err := b.remove(); err != nil {
			t.Fatal(err)
		}
	}
}

// The sweep of dead hosts' cgroups kills nothing: a live host in another
// pid namespace names its group by a pid that may be free here, and the
// sweep of a host outside once killed its agents' shells (CI, run under
// unshare beside the sandbox matrix). It removes what is empty.
func TestSweepKillsNothing(t *testing.T) {
	if l, _ := os.Readlink("/proc/self/ns/pid"); l != initialPidNS || isCgroup2(cgroupRoot) {
		t.Skipf("the sweep runs only from the initial pid namespace, on cgroup v1 here (%s)", l)
	}
	own, err := ownCgroups()
	if err != nil {
		t.Fatal(err)
	}
	free := 0
	for pid := 4194000; pid > 1000 && free == 0; pid-- {
		if !alive(pid) {
			free = pid
		}
	}
	group := filepath.Join(cgroupRoot, "pids", own["pids"], "dsh-actors-"+strconv.Itoa(free)+"-SWEEPTST")
	leaf := filepath.Join(group, "agent-1")
	if err := os.MkdirAll(leaf, 0o755); err != nil {
		t.Skipf("no cgroup v1 pids hierarchy to write: %v", err)
	}
	defer func() { _ = os.Remove(leaf); _ = os.Remove(group) }()
	sleep := exec.Command("sleep", "1000")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _, _ = sleep.Process.Wait() }()
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(sleep.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	sweepStale()
	if p, err := procfs.Stat(sleep.Process.Pid); err != nil || p.Zombie() {
		t.Fatalf("the sweep killed a process of a host it took for dead: %+v %v", p, err)
	}
	if _, err := os.Stat(leaf); err != nil {
		t.Fatalf("the sweep removed a cgroup in use: %v", err)
	}
	_ = sleep.Process.Kill()
	_, _ = sleep.Process.Wait()
	sweepStale()
	if _, err := os.Stat(group); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the sweep left the dead host's empty group %s: %v", group, err)
	}
}
