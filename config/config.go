package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

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
	// Sandbox configures the sandbox of each agent's processes.
	Sandbox Sandbox `yaml:"sandbox"`
}

// Default returns the configuration used when there is no file.
func Default() Config {
	return Config{Bash: shell.DefaultConfig(), Terminal: terminal.DefaultConfig(), Admission: DefaultAdmission(), Limits: DefaultLimits(), MCP: DefaultMCP(), Sandbox: DefaultSandbox()}
}

// Validate checks every section.
func (c Config) Validate() error {
	return errors.Join(c.Bash.Validate(), c.Terminal.Validate(), c.Admission.Validate(), c.Session.Validate(), c.TmuxContext.Validate(), c.Limits.Validate(), c.MCP.Validate(), c.Sandbox.Validate())
}

// Parse reads YAML on top of the defaults and validates the result. name is
// used in error messages (a file path, or "<stdin>"). Every problem is
// reported at once: unknown keys, values of the wrong type and values out of
// range (a key that could not be read keeps its default for the range
// checks), each with the line of the file it is on. Only a file that is not
// YAML stops at its first error.
func Parse(name string, data []byte) (Config, error) {
	cfg := Default()
	values := map[string]*yaml.Node{}
	var errs []error
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
		errs = decodeInto(&doc, reflect.ValueOf(&cfg).Elem(), "", values)
	}
	for _, err := range leaves(cfg.Validate()) {
		errs = append(errs, withLine(err, values))
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("config %s: %w", name, errors.Join(errs...))
	}
	return cfg, nil
}

// leaves are the errors joined in err, however deeply (each section joins
// its own).
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, leaves(e)...)
	}
	return out
}

// withLine gives a range error ("bash.timeoutMs: -5 is out of range ...")
// the line of its key's value in the file, as a decoding error has it:
// after the value when the message starts with it as the file wrote it,
// else after the key. An error about a key the file does not give (a
// default that another key's value made wrong) stays as it is.
func withLine(err error, values map[string]*yaml.Node) error {
	key, rest, ok := strings.Cut(err.Error(), ": ")
	n := values[key]
	if !ok || n == nil {
		return err
	}
	line := fmt.Sprintf(" (line %d)", n.Line)
	if n.Kind == yaml.ScalarNode {
		for _, v := range []string{n.Value, strconv.Quote(n.Value)} {
			if after, found := strings.CutPrefix(rest, v+" "); found {
				return fmt.Errorf("%s: %s%s %s", key, v, line, after)
			}
		}
	}
	return fmt.Errorf("%s%s: %s", key, line, rest)
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
