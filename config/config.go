package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"

	"go.yaml.in/yaml/v3"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/actors/terminal"
)

// Config is the whole configuration.
type Config struct {
	// Bash configures the persistent bash tool.
	Bash shell.Config `yaml:"bash"`
	// Terminal configures the terminal and task tools.
	Terminal terminal.Config `yaml:"terminal"`
	// Admission configures the host's gate for bash calls.
	Admission Admission `yaml:"admission"`
	// Session configures the session log.
	Session Session `yaml:"session"`
	// TmuxContext configures the tmux location plugin.
	TmuxContext TmuxContext `yaml:"tmuxContext"`
	// Limits bounds what the host runs at once.
	Limits Limits `yaml:"limits"`
	// MCP configures the MCP server.
	MCP MCP `yaml:"mcp"`
}

// Default returns the configuration used when there is no file.
func Default() Config {
	return Config{Bash: shell.DefaultConfig(), Terminal: terminal.DefaultConfig(), Admission: DefaultAdmission(), Limits: DefaultLimits(), MCP: DefaultMCP()}
}

// Validate checks every section.
func (c Config) Validate() error {
	return errors.Join(c.Bash.Validate(), c.Terminal.Validate(), c.Admission.Validate(), c.Session.Validate(), c.TmuxContext.Validate(), c.Limits.Validate(), c.MCP.Validate())
}

// Parse reads YAML on top of the defaults and validates the result. name is
// used in error messages (a file path, or "<stdin>").
func Parse(name string, data []byte) (Config, error) {
	cfg := Default()
	if len(bytes.TrimSpace(data)) > 0 {
		var doc yaml.Node
		dec := yaml.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("config %s: %w", name, err)
		}
		var more yaml.Node
		if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
			return Config{}, fmt.Errorf("config %s: more than one YAML document (a second one starts after ---)", name)
		}
		if errs := decodeInto(&doc, reflect.ValueOf(&cfg).Elem(), ""); len(errs) > 0 {
			return Config{}, fmt.Errorf("config %s: %w", name, errors.Join(errs...))
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", name, err)
	}
	return cfg, nil
}

// Load reads and validates the file at path; an empty path means Default.
func Load(path string) (Config, error) {
	if path == "" {
		return Default(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}
