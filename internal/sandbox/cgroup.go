package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where the cgroup hierarchies are mounted: one cgroup2 (v2)
// or a directory per v1 controller. A variable for the test of v2 on a
// machine that mounts its cgroup2 beside the v1 hierarchies.
var cgroupRoot = "/sys/fs/cgroup"

// v2Controllers are the controllers a v2 sandbox's cgroup gets.
var v2Controllers = []string{"pids", "memory", "cpu"}

// errNotDelegated: the host's v2 cgroup cannot give its sandboxes a
// controller they need.
var errNotDelegated = errors.New("controller not delegated")

// cgroup is one sandbox's cgroup: one directory per controller hierarchy on
// cgroup v1, one directory on v2.
type cgroup struct {
	v2   bool
	dirs []string // v1: pids first
}

// cgroupSeq makes every sandbox's directory name unique in this host.
var cgroupSeq atomic.Uint64

// v1Controllers are the hierarchies a v1 sandbox joins, pids first (it
// lists the processes to kill).
var v1Controllers = []string{"pids", "memory", "cpu"}

func newCgroup(name string, lim LimitValues) (*cgroup, error) {
	sweepOnce.Do(sweepStale)
	leaf := fmt.Sprintf("%s-%d", cleanName(name), cgroupSeq.Add(1))
	if isCgroup2(cgroupRoot) {
		base, err := v2Base()
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(base, leaf)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		cg := &cgroup{v2: true, dirs: []string{dir}}
		if err := cg.limit(lim); err != nil {
			cg.remove()
			return nil, err
		}
		return cg, nil
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	cg := &cgroup{}
	for _, ctrl := range v1Controllers {
		rel, ok := own[ctrl]
		if !ok {
			cg.remove()
			return nil, fmt.Errorf("the cgroup v1 %s controller is not mounted (no %s in /proc/self/cgroup)", ctrl, ctrl)
		}
		group := filepath.Join(cgroupRoot, ctrl, rel, hostGroup())
		dir := filepath.Join(group, leaf)
		var err error
		for range 10 {
			// The last sandbox's close may remove the group between
			// MkdirAll's make of it and of the leaf: make it again.
			if err = os.MkdirAll(dir, 0o755); !errors.Is(err, os.ErrNotExist) {
				break
			}
		}
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		// Each time: the last sandbox's close removes the group, and a
		// sandbox being made meanwhile makes it again.
		limitHostGroup(group, ctrl)
		cg.dirs = append(cg.dirs, dir)
	}
	if err := cg.limit(lim); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

// hostGroup is the directory that holds this host's sandboxes: its pid
// (by which a later host finds it stale) and a token, since hosts in pid
// namespaces of their own may share a pid and a cgroup parent.
func hostGroup() string { return hostGroupName() }

var hostGroupName = sync.OnceValue(func() string {
	return "dsh-actors-" + strconv.Itoa(os.Getpid()) + "-" + rand.Text()[:8]
})

func cleanName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 48 {
		b = b[:48]
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte("a"), b...)
	}
	return string(b)
}

func isCgroup2(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// ownCgroups maps each v1 controller to this process's cgroup in it.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, ctrl := range strings.Split(f[1], ",") {
			if ctrl != "" {
				out[ctrl] = f[2]
			}
		}
		if f[1] == "" {
			out[""] = f[2]
		}
	}
	return out, nil
}

// hostLeafPrefix names the v2 cgroup a host moves itself into. Nothing
// sweeps it: no later host can start in its parent, which then gives
// controllers to its children (only the root cgroup may also hold
// processes, and a host there needs no leaf); the service manager that
// delegated the parent removes the tree with it.
const hostLeafPrefix = "dsh-actors-host-"

var v2Once struct {
	sync.Once
	base string
	err  error
}

// v2Base is the cgroup under which this host makes its sandboxes' cgroups,
// with the pids, memory and cpu controllers enabled for them. A cgroup
// that holds processes cannot give controllers to its children, so the
// host first moves itself into a leaf of its own cgroup.
func v2Base() (string, error) {
	v2Once.Do(func() {
		own, err := ownCgroups()
		if err != nil {
			v2Once.err = err
			return
		}
		cur := filepath.Join(cgroupRoot, own[""])
		base := filepath.Join(cur, hostGroup())
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			v2Once.err = fmt.Errorf("creating cgroup %s: %w", base, err)
			return
		}
		enable := func(dir string) error {
			avail, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
			var want []string
			for _, c := range v2Controllers {
				if !strings.Contains(" "+strings.TrimSpace(string(avail))+" ", " "+c+" ") {
					return fmt.Errorf("the %s %w to %s (its cgroup.controllers: %q)", c, errNotDelegated, dir, strings.TrimSpace(string(avail)))
				}
				want = append(want, "+"+c)
			}
			return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(want, " ")), 0)
		}
		if err := enable(cur); errors.Is(err, syscall.EBUSY) {
			// The host's own cgroup holds processes (the host): move the
			// host into a leaf beside the sandboxes' parent.
			leaf := filepath.Join(cur, hostLeafPrefix+strconv.Itoa(os.Getpid()))
			if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				_ = unix.Rmdir(base)
				v2Once.err = err
				return
			}
			if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
				_ = unix.Rmdir(leaf)
				_ = unix.Rmdir(base)
				v2Once.err = fmt.Errorf("moving the host into %s: %w", leaf, err)
				return
			}
			if err := enable(cur); err != nil {
				// Other processes share the cgroup: put things back.
				_ = os.WriteFile(filepath.Join(cur, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0)
				_ = unix.Rmdir(leaf)
				_ = unix.Rmdir(base)
				v2Once.err = fmt.Errorf("giving controllers to the children of %s, which holds other processes than the host: %w", cur, err)
				return
			}
		} else if err != nil {
			_ = unix.Rmdir(base)
			v2Once.err = err
			return
		}
		if err := enable(base); err != nil {
			_ = unix.Rmdir(base)
			v2Once.err = err
			return
		}
		limitHostGroup(base, "")
		v2Once.base = base
	})
	return v2Once.base, v2Once.err
}

// limitHostGroup bounds what a host's sandboxes may take together, so that
// agents that each keep within their own limits cannot, all at once, take
// every pid or all the memory of the machine: the host and the rest of the
// machine keep an eighth (at least 512 pids). dir is the cgroup of all of
// them: on v1 the host's group in the hierarchy of ctrl, on v2 (ctrl "")
// the sandboxes' parent. It is a second wall: a controller that is not
// there is skipped.
func limitHostGroup(dir, ctrl string) {
	pids, mem := hostShare()
	set := func(file string, value int64) {
		if value > 0 {
			_ = os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(value, 10)), 0)
		}
	}
	switch ctrl {
	case "":
		set("pids.max", int64(pids))
		set("memory.max", mem)
	case "pids":
		set("pids.max", int64(pids))
	case "memory":
		set("memory.limit_in_bytes", mem)
	}
}

// hostShare is what limitHostGroup allows all of a host's sandboxes.
func hostShare() (pids int, mem int64) {
	for _, name := range []string{"kernel/pid_max", "kernel/threads-max"} {
		if n, err := strconv.Atoi(sysctl(name)); err == nil && n > 0 && (pids == 0 || n < pids) {
			pids = n
		}
	}
	if pids > 1024 {
		pids -= max(pids/8, 512)
	} else {
		pids = 0
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		total := int64(si.Totalram) * int64(si.Unit)
		mem = total - total/8
	}
	return pids, mem
}

func (cg *cgroup) limit(lim LimitValues) error {
	write := func(dir, file, value string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			return fmt.Errorf("setting %s to %s: %w", filepath.Join(dir, file), value, err)
		}
		return nil
	}
	var errs []error
	if cg.v2 {
		d := cg.dirs[0]
		if lim.Pids > 0 {
			errs = append(errs, write(d, "pids.max", strconv.Itoa(lim.Pids)))
		}
		if lim.MemoryBytes > 0 {
			errs = append(errs, write(d, "memory.max", strconv.FormatInt(lim.MemoryBytes, 10)))
			errs = append(errs, write(d, "memory.swap.max", "0"))
		}
		if lim.CPUWeight > 0 {
			errs = append(errs, write(d, "cpu.weight", strconv.Itoa(lim.CPUWeight)))
		}
		return errors.Join(errs...)
	}
	if lim.Pids > 0 {
		errs = append(errs, write(cg.dirs[0], "pids.max", strconv.Itoa(lim.Pids)))
	}
	if lim.MemoryBytes > 0 {
		errs = append(errs, write(cg.dirs[1], "memory.limit_in_bytes", strconv.FormatInt(lim.MemoryBytes, 10)))
	}
	if lim.CPUWeight > 0 {
		// v1 shares: 1024 is the usual weight of 100.
		errs = append(errs, write(cg.dirs[2], "cpu.shares", strconv.Itoa(max(2, lim.CPUWeight*1024/100))))
	}
	return errors.Join(errs...)
}

// attach moves pid (init, before it starts anything) into the cgroup.
func (cg *cgroup) attach(pid int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cg.dirs))
	for i, d := range cg.dirs {
		// Each v1 hierarchy's move waits for the kernel on its own;
		// together they cost one wait, not three.
		wg.Go(func() {
			errs[i] = os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// procs lists the cgroup's processes.
func (cg *cgroup) procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(cg.dirs[0], "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// killAll kills every process in the cgroup and waits until it is empty.
func (cg *cgroup) killAll(d time.Duration) error {
	deadline := time.Now().Add(d)
	if cg.v2 {
		if err := os.WriteFile(filepath.Join(cg.dirs[0], "cgroup.kill"), []byte("1"), 0); err == nil {
			for time.Now().Before(deadline) {
				if pids, err := cg.procs(); err != nil || len(pids) == 0 {
					return nil
				}
				time.Sleep(time.Millisecond)
			}
			return fmt.Errorf("sandbox: cgroup %s not empty %v after cgroup.kill", cg.dirs[0], d)
		}
	}
	// v1 has no cgroup.kill: SIGKILL what is listed until nothing is. A
	// fork between the listing and the kill is listed in the next round,
	// and the pids limit bounds how many there can be.
	for {
		pids, err := cg.procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: %d processes still in cgroup %s %v after SIGKILL", len(pids), cg.dirs[0], d)
		}
		for _, pid := range pids {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// remove removes the cgroup's directories (and the host's, once empty).
func (cg *cgroup) remove() error {
	var errs []error
	for _, d := range cg.dirs {
		var err error
		for range 100 {
			// A killed process leaves its cgroup a moment after it ends.
			if err = unix.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("sandbox: removing cgroup %s: %w", d, err))
		}
		if !cg.v2 {
			_ = unix.Rmdir(filepath.Dir(d)) // the host's group, when it was the last
		}
	}
	return errors.Join(errs...)
}

var sweepOnce sync.Once

// initialPidNS is the initial pid namespace (its inode is fixed,
// PROC_PID_INIT_INO).
const initialPidNS = "pid:[4026531836]"

// sweepStale removes the empty cgroups of hosts that died without removing
// theirs (kill -9). It kills nothing: a name's pid is the one its host had
// in its own pid namespace, so a live host in another namespace (a
// container, a test run under unshare) may look dead from here, and
// killing what its cgroups hold killed its agents' shells. A dead host's
// sandboxes are empty anyway: their inits end with the host's socket, and
// an init without a pid namespace empties its cgroup first.
func sweepStale() {
	// Only a host in the initial pid namespace sees every host's pid: one
	// in a namespace of its own (a container, a test) would take another
	// host's sandboxes for stale.
	if l, err := os.Readlink("/proc/self/ns/pid"); err != nil || l != initialPidNS {
		return
	}
	var parents []string
	if isCgroup2(cgroupRoot) {
		if own, err := ownCgroups(); err == nil {
			parents = append(parents, filepath.Join(cgroupRoot, own[""]))
		}
	} else if own, err := ownCgroups(); err == nil {
		for _, ctrl := range v1Controllers {
			if rel, ok := own[ctrl]; ok {
				parents = append(parents, filepath.Join(cgroupRoot, ctrl, rel))
			}
		}
	}
	for _, parent := range parents {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			dir := filepath.Join(parent, e.Name())
			rest, ok := strings.CutPrefix(e.Name(), "dsh-actors-")
			rest, _, _ = strings.Cut(rest, "-")
			pid, err := strconv.Atoi(rest)
			if !ok || err != nil || e.Name() == hostGroup() || !e.IsDir() || alive(pid) {
				continue // not a host's, or its host is alive (or its pid was reused: swept later)
			}
			leaves, _ := os.ReadDir(dir)
			for _, l := range leaves {
				if l.IsDir() {
					cg := &cgroup{v2: isCgroup2(cgroupRoot), dirs: []string{filepath.Join(dir, l.Name())}}
					if pids, err := cg.procs(); err == nil && len(pids) == 0 {
						_ = cg.remove() // busy a moment after its last process ended
					}
				}
			}
			_ = unix.Rmdir(dir) // fails while a leaf is left
		}
	}
}

func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
