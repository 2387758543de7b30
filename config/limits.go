package config

import (
	"errors"
	"fmt"

	"github.com/dsh-actors/dsh-actors/internal/limits"
)

// Limits bounds what the whole host runs at once (the "limits" section); a
// call that would go past one is answered with an error naming the key.
// Each agent has its own limits too: one shell, and terminal.maxTerminals
// and terminal.maxTasks. 0 means no limit but the machine's (file
// descriptors, kernel.pty.max).
type Limits struct {
	// Agents is how many agents may run at once (an MCP session is one).
	Agents int `yaml:"agents"`
	// Shells is how many agents may have their bash shell at once.
	Shells int `yaml:"shells"`
	// Terminals is how many terminals may be open at once, across agents.
	Terminals int `yaml:"terminals"`
	// Tasks is how many background tasks may run at once, across agents.
	Tasks int `yaml:"tasks"`
}

// DefaultLimits leaves room for a few thousand agents: each shell and each
// terminal takes a pty, and Linux has 4096 of them by default
// (kernel.pty.max).
func DefaultLimits() Limits {
	return Limits{Agents: 4096, Shells: 4096, Terminals: 4096, Tasks: 4096}
}

const maxLimit = 1 << 20

// Validate names the key, the value and the rule of each error.
func (l Limits) Validate() error {
	var errs []error
	for _, f := range []struct {
		key string
		v   int
	}{{"agents", l.Agents}, {"shells", l.Shells}, {"terminals", l.Terminals}, {"tasks", l.Tasks}} {
		if f.v < 0 || f.v > maxLimit {
			errs = append(errs, fmt.Errorf("limits.%s: %d is out of range (must be between 0, for no limit, and %d)", f.key, f.v, maxLimit))
		}
	}
	return errors.Join(errs...)
}

// NewSet makes the host's pools of these limits.
func (l Limits) NewSet() *limits.Set {
	return &limits.Set{
		Agents:    limits.NewPool(limits.Agents, l.Agents),
		Shells:    limits.NewPool(limits.Shells, l.Shells),
		Terminals: limits.NewPool(limits.Terminals, l.Terminals),
		Tasks:     limits.NewPool(limits.Tasks, l.Tasks),
	}
}
