package sandbox

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mechanism is one wall of a sandbox; a set of them is a Mechanism too.
type Mechanism uint8

const (
	// Process: user, pid, mount, ipc and uts namespaces under init.
	Process Mechanism = 1 << iota
	// Limits: a cgroup per agent (pids, memory, CPU weight).
	Limits
	// Network: a network namespace with loopback only.
	Network
	// Files: the system read-only but for the agent's directories, a
	// private /tmp.
	Files
)

var mechanismNames = []struct {
	m    Mechanism
	name string
}{{Process, "process"}, {Limits, "limits"}, {Network, "nonet"}, {Files, "fs"}}

func (m Mechanism) String() string {
	var parts []string
	for _, n := range mechanismNames {
		if m&n.m != 0 {
			parts = append(parts, n.name)
		}
	}
	if len(parts) == 0 {
		return "off"
	}
	return strings.Join(parts, "+")
}

// Level is what config asks for: each level adds a wall to the one before.
type Level string

const (
	LevelAuto    Level = "auto"
	LevelOff     Level = "off"
	LevelProcess Level = "process"
	LevelLimits  Level = "limits"
	LevelNoNet   Level = "nonet"
	LevelFS      Level = "fs"
)

// Levels are the accepted levels, for messages.
var Levels = []Level{LevelAuto, LevelOff, LevelProcess, LevelLimits, LevelNoNet, LevelFS}

// Mechanisms are the walls the level asks for. Auto asks for process and
// limits, and takes what the machine allows of them.
func (l Level) Mechanisms() Mechanism {
	switch l {
	case LevelProcess:
		return Process
	case LevelLimits, LevelAuto:
		return Process | Limits
	case LevelNoNet:
		return Process | Limits | Network
	case LevelFS:
		return Process | Limits | Network | Files
	}
	return 0
}

// Valid reports whether l is one of Levels.
func (l Level) Valid() bool { return slices.Contains(Levels, l) }

// ParseMechanism reads a mechanism's name ("process", "limits", "nonet",
// "fs").
func ParseMechanism(name string) (Mechanism, bool) {
	for _, n := range mechanismNames {
		if n.name == name {
			return n.m, true
		}
	}
	return 0, false
}

// LimitValues are the limits of a Limits sandbox; zero leaves one unset.
type LimitValues struct {
	// Pids bounds the processes and threads.
	Pids int
	// MemoryBytes bounds the memory; past it the kernel kills inside the
	// sandbox only.
	MemoryBytes int64
	// CPUWeight is the sandbox's share of the processors (1-10000, 100 is
	// the usual weight).
	CPUWeight int
}

// Want is what a sandbox is asked to be.
type Want struct {
	// Name names the sandbox in its cgroup's path (the agent's id).
	Name  string
	Level Level
	// Require refuses a sandbox weaker than Level asks.
	Require bool
	// Disable turns mechanisms off whatever the level (config's
	// sandbox.disable), as if the machine lacked them.
	Disable Mechanism
	Limits  LimitValues
	// Writable are the directories that stay writable with Files.
	Writable []string
	// Hide are paths that are empty with Files (other agents' and the
	// host's state); a writable directory inside one is still there.
	Hide []string
}

// Shortfall is a wall asked for and not obtained.
type Shortfall struct {
	Mechanism Mechanism
	// Cause is why, Remedy what would give it.
	Cause, Remedy string
}

// Report says what a sandbox obtained.
type Report struct {
	Asked    Level
	Obtained Mechanism
	Missing  []Shortfall
	// Notes are lesser things not obtained (a /proc of its own, a
	// writable directory).
	Notes []string
}

// Has reports whether every wall of m was obtained.
func (r Report) Has(m Mechanism) bool { return r.Obtained&m == m }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (asked %s)", r.Obtained, r.Asked)
	for _, s := range r.Missing {
		fmt.Fprintf(&b, "; no %s: %s", s.Mechanism, s.Cause)
		if s.Remedy != "" {
			fmt.Fprintf(&b, " (%s)", s.Remedy)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "; %s", n)
	}
	return b.String()
}

// WeakerError is returned when Want.Require is set and the machine does
// not allow what was asked.
type WeakerError struct {
	Want   Want
	Report Report
}

func (e *WeakerError) Error() string {
	return fmt.Sprintf("sandbox: %s is required and the machine allows only %s", e.Want.Level, e.Report)
}

// mechanismError is a mechanism that failed when a sandbox was made.
type mechanismError struct {
	mech  Mechanism
	err   error
	errno syscall.Errno
}

func (e *mechanismError) Error() string { return e.err.Error() }
func (e *mechanismError) Unwrap() error { return e.err }

// planned is a Want on its way to a sandbox: what is still tried, and
// what was given up and why.
type planned struct {
	want    Want
	try     Mechanism
	missing []Shortfall
}

func (p *planned) has(m Mechanism) bool { return p.try&m == m }

func plan(w Want) *planned {
	p := &planned{want: w, try: w.Level.Mechanisms()}
	for _, n := range mechanismNames {
		if p.try&n.m != 0 && w.Disable&n.m != 0 {
			p.drop(n.m, "disabled by configuration (sandbox.disable)", "")
		}
	}
	if p.has(Process) {
		if cause, remedy := userNamespacesBlocked(); cause != "" {
			p.drop(Process, cause, remedy)
		}
	}
	return p
}

// drop gives up m (and what needs it: network and files need the
// namespaces of process).
func (p *planned) drop(m Mechanism, cause, remedy string) {
	if m&Process != 0 {
		m |= Network | Files
	}
	for _, n := range mechanismNames {
		if p.try&m&n.m != 0 {
			p.try &^= n.m
			p.missing = append(p.missing, Shortfall{Mechanism: n.m, Cause: cause, Remedy: remedy})
			cause, remedy = "needs process", ""
		}
	}
}

// fallback gives up the mechanism err names and reports whether there is a
// plan left to try.
func (p *planned) fallback(err error) bool {
	var me *mechanismError
	if !errors.As(err, &me) || p.try&me.mech == 0 {
		return false
	}
	cause, remedy := explain(me)
	p.drop(me.mech, cause, remedy)
	return true
}

func (p *planned) report() Report {
	return Report{Asked: p.want.Level, Obtained: p.try, Missing: slices.Clone(p.missing)}
}

func (p *planned) params() params {
	var prm params
	if !p.has(Process) {
		return prm
	}
	prm.Flags = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
	if p.has(Network) {
		prm.Flags |= unix.CLONE_NEWNET
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if uid == 0 {
		// Root maps every id to itself: files keep their owners and the
		// agent is root as before, with its capabilities only over what
		// its namespaces own.
		prm.UIDMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		prm.GIDMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		prm.Setgroups = true
	} else {
		prm.UIDMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		prm.GIDMap = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
	}
	if p.has(Files) {
		prm.Files = &fileParams{Writable: p.want.Writable, Hide: p.want.Hide}
	}
	return prm
}

// userNamespacesBlocked names a setting that forbids new user namespaces,
// before one is tried.
func userNamespacesBlocked() (cause, remedy string) {
	if v := sysctl("user/max_user_namespaces"); v == "0" {
		return "user namespaces are disabled (user.max_user_namespaces is 0)", "sysctl -w user.max_user_namespaces=15000"
	}
	if os.Geteuid() != 0 {
		if v := sysctl("kernel/unprivileged_userns_clone"); v == "0" {
			return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone is 0)", "sysctl -w kernel.unprivileged_userns_clone=1"
		}
	}
	return "", ""
}

func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/" + name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// explain turns a failed mechanism into a cause and a remedy a person can
// act on.
func explain(me *mechanismError) (cause, remedy string) {
	cause = me.err.Error()
	errno := me.errno
	if errno == 0 {
		errors.As(me.err, &errno)
	}
	switch me.mech {
	case Process:
		switch {
		case errno == syscall.EPERM && sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1":
			remedy = "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10 and later): allow them for this binary with an AppArmor profile granting `userns`, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
		case errno == syscall.EPERM && inContainer():
			remedy = "the container's seccomp profile forbids new namespaces (Docker's default does): run it with --security-opt seccomp=unconfined, or a profile allowing clone with CLONE_NEWUSER, or give the container CAP_SYS_ADMIN"
		case errno == syscall.EPERM:
			remedy = "the kernel or a security module forbids new user namespaces for this process"
		case errno == syscall.ENOSPC:
			remedy = "user.max_user_namespaces is reached; raise it"
		case errno == syscall.EINVAL:
			remedy = "this kernel lacks a namespace the sandbox needs (user, pid, mount, ipc, uts)"
		}
	case Limits:
		switch {
		case errors.Is(me.err, syscall.EACCES) || errors.Is(me.err, syscall.EROFS) || errors.Is(me.err, syscall.EPERM):
			remedy = "the host's cgroup is not writable by it: run the host as root, or under systemd with Delegate=yes (systemd-run --user --scope -p Delegate=yes dsh-actors ...)"
		case errors.Is(me.err, syscall.EBUSY):
			remedy = "the host shares its cgroup with other processes, and cgroup v2 gives controllers only to cgroups that hold none: start the host in a cgroup of its own (systemd-run --user --scope -p Delegate=yes dsh-actors ...)"
		case errors.Is(me.err, errNotDelegated):
			remedy = "give the host's cgroup the pids, memory and cpu controllers: under systemd, start it with Delegate=yes (systemd-run --user --scope -p Delegate=yes dsh-actors ...); in a container, let it manage its cgroup (a private cgroup namespace, cgroupfs mounted read-write)"
		}
	}
	return cause, remedy
}

func inContainer() bool {
	if _, err := os.Stat("/.dockerenv"); err == nil {
		return true
	}
	b, _ := os.ReadFile("/proc/1/cgroup")
	return strings.Contains(string(b), "docker") || strings.Contains(string(b), "containerd") || strings.Contains(string(b), "kubepods")
}
