package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dsh-actors/dsh-actors/internal/sandbox"
)

// Sandbox configures the sandbox each agent's processes run in (the
// "sandbox" section).
type Sandbox struct {
	// Level is auto, off, process, limits, nonet or fs.
	Level string `yaml:"level"`
	// Require refuses to run an agent in a sandbox weaker than Level.
	Require bool `yaml:"require"`
	// Disable lists mechanisms (process, limits, nonet, fs), comma-
	// separated, never used whatever the level.
	Disable string `yaml:"disable"`
	// PidsMax bounds an agent's processes and threads.
	PidsMax int `yaml:"pidsMax"`
	// MemoryMax bounds an agent's memory: bytes with an optional unit
	// (KiB, MiB, GiB), a percentage of the machine's memory, or 0.
	MemoryMax string `yaml:"memoryMax"`
	// CPUWeight is an agent's share of the processors (1-10000; 100 is
	// the usual weight).
	CPUWeight int `yaml:"cpuWeight"`
	// Writable lists, comma-separated, directories writable at level fs
	// besides the agent's working directory.
	Writable string `yaml:"writable"`
	// Hide lists, comma-separated, directories shown empty at level fs
	// (where other agents' directories are, the host's secrets), besides
	// the session log's directory; an agent's own directory inside one is
	// still there.
	Hide string `yaml:"hide"`
	// Env is what of the host's environment the agents' processes get.
	Env SandboxEnv `yaml:"env"`
}

// SandboxEnv is the environment policy: which of the host's variables an
// agent's processes inherit.
type SandboxEnv struct {
	// Inherit is filtered (all but names that look like secrets), all, or
	// none.
	Inherit string `yaml:"inherit"`
	// Include lists name patterns (shell globs, case-insensitive), comma-
	// separated, always inherited; with none, the only ones.
	Include string `yaml:"include"`
	// Exclude lists name patterns never inherited, besides the secrets'.
	Exclude string `yaml:"exclude"`
}

// SecretPatterns are the names filtered leaves out (as Codex does), matched
// case-insensitively.
var SecretPatterns = []string{"*KEY*", "*SECRET*", "*TOKEN*", "*PASS*", "*CREDENTIAL*", "*COOKIE*", "*_PAT", "*PRIVATE*", "DSH_ACTORS_SANDBOX_*"}

// DefaultSandbox is auto, with limits that stop a fork bomb or a memory hog
// long before it reaches the other agents or the host.
func DefaultSandbox() Sandbox {
	return Sandbox{Level: string(sandbox.LevelAuto), PidsMax: 1024, MemoryMax: "50%", CPUWeight: 100, Env: SandboxEnv{Inherit: "filtered"}}
}

// Validate names the key, the value and the rule of each error.
func (s Sandbox) Validate() error {
	var errs []error
	if !sandbox.Level(s.Level).Valid() {
		errs = append(errs, fmt.Errorf("sandbox.level: %q is not a level (one of %v)", s.Level, sandbox.Levels))
	}
	if _, err := s.disabled(); err != nil {
		errs = append(errs, err)
	}
	if s.PidsMax < 0 || s.PidsMax > 1<<22 {
		errs = append(errs, fmt.Errorf("sandbox.pidsMax: %d is out of range (0, for no limit, to %d)", s.PidsMax, 1<<22))
	} else if s.PidsMax > 0 && s.PidsMax < 16 {
		errs = append(errs, fmt.Errorf("sandbox.pidsMax: %d is too few for a shell and its commands (at least 16, or 0 for no limit)", s.PidsMax))
	}
	if _, err := memoryBytes(s.MemoryMax); err != nil {
		errs = append(errs, fmt.Errorf("sandbox.memoryMax: %w", err))
	}
	if s.CPUWeight < 0 || s.CPUWeight > 10000 {
		errs = append(errs, fmt.Errorf("sandbox.cpuWeight: %d is out of range (1 to 10000, or 0 to leave it unset)", s.CPUWeight))
	}
	for _, f := range []struct{ key, v string }{{"writable", s.Writable}, {"hide", s.Hide}} {
		for _, d := range list(f.v) {
			if !strings.HasPrefix(d, "/") {
				errs = append(errs, fmt.Errorf("sandbox.%s: %q is not an absolute path", f.key, d))
			}
		}
	}
	switch s.Env.Inherit {
	case "filtered", "all", "none":
	default:
		errs = append(errs, fmt.Errorf("sandbox.env.inherit: %q is not a policy (filtered, all or none)", s.Env.Inherit))
	}
	for _, f := range []struct{ key, v string }{{"include", s.Env.Include}, {"exclude", s.Env.Exclude}} {
		for _, p := range list(f.v) {
			if _, err := path.Match(p, ""); err != nil {
				errs = append(errs, fmt.Errorf("sandbox.env.%s: %q is not a pattern: %v", f.key, p, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (s Sandbox) disabled() (sandbox.Mechanism, error) {
	var m sandbox.Mechanism
	for _, name := range list(s.Disable) {
		one, ok := sandbox.ParseMechanism(name)
		if !ok {
			return 0, fmt.Errorf("sandbox.disable: %q is not a mechanism (process, limits, nonet or fs)", name)
		}
		m |= one
	}
	return m, nil
}

func list(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// memoryBytes reads MemoryMax: 0 or "" is no limit.
func memoryBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	given := s
	if s == "" || s == "0" {
		return 0, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		n, err := strconv.ParseFloat(p, 64)
		if err != nil || n <= 0 || n > 100 {
			return 0, fmt.Errorf("%q is not a percentage between 0 and 100", s)
		}
		total := machineMemory()
		if total == 0 {
			return 0, nil
		}
		return int64(float64(total) * n / 100), nil
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}} {
		if p, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(p), u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (bytes, or a number with KiB, MiB, GiB or TiB, or a percentage such as 50%%)", given)
	}
	if n*mult < 16<<20 {
		return 0, fmt.Errorf("%q is less than 16 MiB, too little for a shell", given)
	}
	return n * mult, nil
}

func machineMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// Want is what an agent's sandbox is asked to be. level, when not empty,
// overrides Level (a host's choice for one agent); dir is the agent's
// working directory, writable at level fs.
func (s Sandbox) Want(name, level, dir string) sandbox.Want {
	if level == "" {
		level = s.Level
	}
	dis, _ := s.disabled()
	mem, _ := memoryBytes(s.MemoryMax)
	w := sandbox.Want{Name: name, Level: sandbox.Level(level), Require: s.Require, Disable: dis,
		Limits: sandbox.LimitValues{Pids: s.PidsMax, MemoryBytes: mem, CPUWeight: s.CPUWeight}}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if dir != "" {
		w.Writable = append(w.Writable, dir)
	}
	w.Writable = append(w.Writable, list(s.Writable)...)
	w.Hide = list(s.Hide)
	if p, err := DefaultSessionPath(); err == nil {
		w.Hide = append(w.Hide, filepath.Dir(p))
	}
	return w
}

// Filter applies the policy to an environment (nil: the host's).
func (e SandboxEnv) Filter(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	include, exclude := list(e.Include), list(e.Exclude)
	if e.Inherit == "filtered" || e.Inherit == "" {
		exclude = append(exclude, SecretPatterns...)
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case matchAny(include, name):
			out = append(out, kv)
		case e.Inherit == "none" || matchAny(exclude, name):
		default:
			out = append(out, kv)
		}
	}
	return out
}

func matchAny(patterns []string, name string) bool {
	up := strings.ToUpper(name)
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToUpper(p), up); ok {
			return true
		}
	}
	return false
}
