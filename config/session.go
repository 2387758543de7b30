package config

import (
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// Session configures the session log (the "session" section).
type Session struct {
	// Path is the session log file; empty means DefaultSessionPath(). The
	// file is opened at the first use of a session feature (a turn, an
	// injection), so a host that only runs tools never takes its lock.
	Path string `yaml:"path"`
}

// DefaultSessionPath is $XDG_STATE_HOME/dsh-actors/sessions.db, or
// ~/.local/state/dsh-actors/sessions.db.
func DefaultSessionPath() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "dsh-actors", "sessions.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("session.path: no path given and no home directory to put the session log in: %w", err)
	}
	return filepath.Join(home, ".local", "state", "dsh-actors", "sessions.db"), nil
}

// Validate names the key, the value and the rule of each error.
func (s Session) Validate() error {
	if s.Path != "" && !filepath.IsAbs(s.Path) {
		return fmt.Errorf("session.path: %q is not an absolute path", s.Path)
	}
	return nil
}

// TmuxContext configures the tmux location plugin (the "tmuxContext"
// section): on the first step of each turn, the agent's own tmux location
// is read and injected when it changed.
type TmuxContext struct {
	// Enabled turns the plugin on; it is off by default.
	Enabled bool `yaml:"enabled"`
	// RefreshIntervalMs, when positive, suppresses a reading (the query and
	// the injection) within that many milliseconds of the latest injection;
	// 0 injects on every turn whose location changed.
	RefreshIntervalMs WholeNumber `yaml:"refreshIntervalMs"`
}

// WholeNumber is an integer that the YAML must write as one: yaml.v3 would
// take 1.5 for 1, and "soon" for an error that names no key.
type WholeNumber int64

// UnmarshalYAML accepts a YAML integer only.
func (n *WholeNumber) UnmarshalYAML(node *yaml.Node) error {
	var v int64
	if node.Kind != yaml.ScalarNode || node.ShortTag() != "!!int" || node.Decode(&v) != nil {
		return fmt.Errorf("%q (line %d) is not a whole number", node.Value, node.Line)
	}
	if !plainDecimal(node.Value) {
		return fmt.Errorf("%q (line %d): write the number in plain decimal digits (%d?)", node.Value, node.Line, v)
	}
	*n = WholeNumber(v)
	return nil
}

// maxSafeInteger is the largest integer a JSON number holds exactly (the
// reference validates the interval as a "safe integer").
const maxSafeInteger = 1<<53 - 1

// Validate names the key, the value and the rule of each error.
func (t TmuxContext) Validate() error {
	if t.RefreshIntervalMs < 0 || t.RefreshIntervalMs > maxSafeInteger {
		return fmt.Errorf("tmuxContext.refreshIntervalMs: %d is out of range (must be a whole number of milliseconds between 0 and %d; 0 means every changed turn)", t.RefreshIntervalMs, int64(maxSafeInteger))
	}
	return nil
}
