package ptyproc

import (
	"os"
	"sort"
	"strings"
)

// TokenVariable holds the bearer token of `dsh-actors serve`. It is the
// server's secret: no program the runtime starts gets it from the base
// environment (serve also removes it from its own once read).
const TokenVariable = "DSH_ACTORS_TOKEN"

// BuildEnv is the environment of a program the runtime starts: base (nil
// means the host's) without TokenVariable, the names in drop and those that
// set gives, then set, in name order. The shell and the terminal both build
// theirs here, each with its own policy of what to leave out and what to
// give.
func BuildEnv(base []string, drop map[string]bool, set map[string]string) []string {
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, given := set[name]; !given && !drop[name] && name != TokenVariable {
			env = append(env, kv)
		}
	}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		env = append(env, name+"="+set[name])
	}
	return env
}
