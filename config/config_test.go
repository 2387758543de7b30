package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultsWithoutFile(t *testing.T) {
	cfg, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bash.TimeoutMs != 300000 || cfg.Bash.MaxOutputChars != 16000 || cfg.Bash.BackendType != "shell" || cfg.Bash.Description == "" {
		t.Fatalf("defaults: %+v", cfg.Bash)
	}
	if !cfg.Terminal.EnableRunInBackground || cfg.Terminal.MaxResultBytes != 262144 {
		t.Fatalf("terminal defaults: %+v", cfg.Terminal)
	}
}

func TestPartialFileKeepsDefaults(t *testing.T) {
	cfg, err := Parse("test.yaml", []byte("bash:\n  timeoutMs: 1500\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bash.TimeoutMs != 1500 || cfg.Bash.MaxOutputChars != 16000 {
		t.Fatalf("got %+v", cfg.Bash)
	}
}

func TestLoadFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dsh.yaml")
	if err := os.WriteFile(path, []byte("bash:\n  maxOutputChars: 99\n  description: my shell\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bash.MaxOutputChars != 99 || cfg.Bash.Description != "my shell" {
		t.Fatalf("got %+v", cfg.Bash)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing file: %v", err)
	}
}

// Each bad value is reported with its key, the value and the rule.
func TestBadValuesNameKeyValueAndRule(t *testing.T) {
	cases := []struct {
		yaml string
		want []string
	}{
		{"bash:\n  timeoutMs: 0\n", []string{"bash.timeoutMs", "0", "between 1 and"}},
		{"bash:\n  timeoutMs: -5\n", []string{"bash.timeoutMs", "-5", "between 1 and"}},
		{"bash:\n  maxOutputChars: 0\n", []string{"bash.maxOutputChars", "0", "between 1 and"}},
		{"bash:\n  backendType: docker\n", []string{"bash.backendType", `"docker"`, `only one is "shell"`}},
		{"bash:\n  description: \"\"\n", []string{"bash.description", "empty"}},
		{"bash:\n  timeoutMS: 10\n", []string{"bash.timeoutMS", "unknown key", "timeoutMs"}},
		{"bash:\n  timeoutMs: soon\n", []string{"bash.timeoutMs", `"soon"`, "not a whole number"}},
		{"bash:\n  timeoutMs: 1.5\n", []string{"bash.timeoutMs", `"1.5"`, "not a whole number"}},
		{"admission:\n  slots: 2.9\n", []string{"admission.slots", `"2.9"`, "not a whole number"}},
		{"bash:\n  description: [a, b]\n", []string{"bash.description", "a list", "not a text"}},
		{"bash: 3\n", []string{"bash", `"3"`, "not a section"}},
		{"shell:\n  timeoutMs: 10\n", []string{"shell", "unknown key", "bash"}},
		{"terminal:\n  maxResultBytes: 10\n", []string{"terminal.maxResultBytes", "10", "between 1024"}},
		{"terminal:\n  idleSilenceMs: 0\n", []string{"terminal.idleSilenceMs", "0", "between 10"}},
		{"terminal:\n  defaultWaitMs: 9999999\n  maxWaitMs: 1000\n", []string{"terminal.defaultWaitMs", "maxWaitMs, which is 1000"}},
		{"terminal:\n  enableRunInBackground: maybe\n", []string{"terminal.enableRunInBackground", `"maybe"`, "not true or false"}},
		{"limits:\n  agents: 1\nlimits:\n  agents: 2\n", []string{"limits", "given twice (lines 1 and 3)"}},
		{"limits:\n  agents: 1\n  agents: 2\n", []string{"limits.agents", "given twice (lines 2 and 3)"}},
		{"limits:\n  agents: 010\n", []string{"limits.agents", `"010"`, "plain decimal digits (8?)"}},
		{"limits:\n  agents: 0x10\n", []string{"limits.agents", `"0x10"`, "plain decimal"}},
		{"limits:\n  agents: 1_000\n", []string{"limits.agents", "plain decimal"}},
		{"limits:\n  agents: +5\n", []string{"limits.agents", "plain decimal"}},
		{"tmuxContext:\n  refreshIntervalMs: 0o10\n", []string{"tmuxContext.refreshIntervalMs", "plain decimal"}},
		{"limits:\n  agents: -1\n", []string{"limits.agents", "-1", "between 0"}},
		{"mcp:\n  maxSessions: 0\n", []string{"mcp.maxSessions", "0", "between 1"}},
	}
	for _, c := range cases {
		_, err := Parse("bad.yaml", []byte(c.yaml))
		if err == nil {
			t.Errorf("%q: no error", c.yaml)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not mention %q", c.yaml, err, w)
			}
		}
		if !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("%q: error %q does not name the file", c.yaml, err)
		}
	}
}

// An empty section keeps its defaults.
func TestAnEmptySectionKeepsItsDefaults(t *testing.T) {
	cfg, err := Parse("empty.yaml", []byte("limits:\nmcp:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits != DefaultLimits() || cfg.MCP != DefaultMCP() {
		t.Fatalf("%+v %+v", cfg.Limits, cfg.MCP)
	}
}

func TestSeveralErrorsAtOnce(t *testing.T) {
	_, err := Parse("x", []byte("bash:\n  timeoutMs: 0\n  maxOutputChars: -1\n"))
	if err == nil || !strings.Contains(err.Error(), "timeoutMs") || !strings.Contains(err.Error(), "maxOutputChars") {
		t.Fatalf("want both keys reported, got %v", err)
	}
}

func TestTmuxContextIntervalIsAWholeNonNegativeNumber(t *testing.T) {
	for _, bad := range []string{"1.5", "soon", `"12"`, "-3", "9007199254740992"} {
		_, err := Parse("x.yaml", []byte("tmuxContext:\n  refreshIntervalMs: "+bad+"\n"))
		if err == nil {
			t.Errorf("refreshIntervalMs %s was accepted", bad)
		}
	}
	cfg, err := Parse("x.yaml", []byte("tmuxContext:\n  enabled: true\n  refreshIntervalMs: 60000\n"))
	if err != nil || !cfg.TmuxContext.Enabled || cfg.TmuxContext.RefreshIntervalMs != 60000 {
		t.Fatalf("%+v %v", cfg.TmuxContext, err)
	}
	if _, err := Parse("x.yaml", []byte("session:\n  path: relative/x.db\n")); err == nil || !strings.Contains(err.Error(), "session.path") {
		t.Fatalf("a relative session path: %v", err)
	}
}

// The file `config default` writes is commented, and loaded back it
// changes nothing: no key is missing, and the long description survives.
func TestDefaultFileLoadsBackToTheDefaults(t *testing.T) {
	b, err := DefaultYAML()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("default.yaml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Fatalf("loaded back:\n%+v\nwant:\n%+v\nfile:\n%s", cfg, Default(), b)
	}
	for _, want := range []string{"# dsh-actors configuration", "timeoutMs: 300000 # wall-clock limit", "refreshIntervalMs: 0"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the file lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "...") {
		t.Error("the file abbreviates a value")
	}
}

// A file's problems are all reported in one pass, each with its line:
// unknown keys, values of the wrong type and values out of range together.
func TestEveryProblemAtOnceWithItsLine(t *testing.T) {
	file := `bash:
  timeoutMs: -5
  timeoutMS: 10
  maxOutputChars: lots
  description: ""
terminal:
  maxWaitMs: 0
  killGraceMs: 1.5
  defaultWaitMs: 2
limits:
  agents: -1
session:
  path: relative/x.db
`
	_, err := Parse("bad.yaml", []byte(file))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"bash.timeoutMs: -5 (line 2) is out of range",
		"bash.timeoutMS: unknown key (line 3;",
		`bash.maxOutputChars: "lots" (line 4) is not a whole number`,
		`bash.description: "" (line 5) is empty`,
		"terminal.maxWaitMs: 0 (line 7) is out of range",
		`terminal.killGraceMs: "1.5" (line 8) is not a whole number`,
		"terminal.defaultWaitMs: 2 (line 9) is out of range (must be between 0 and maxWaitMs, which is 0)",
		"limits.agents: -1 (line 11) is out of range",
		`session.path: "relative/x.db" (line 13) is not an absolute path`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 9 {
		t.Errorf("%d problems reported, want 9:\n%v", n, err)
	}
	// A default made wrong by another key names no line of its own.
	_, err = Parse("x.yaml", []byte("terminal:\n  maxWaitMs: 5\n"))
	if err == nil || !strings.Contains(err.Error(), "terminal.defaultWaitMs: 10000 is out of range") {
		t.Errorf("a default out of range: %v", err)
	}
}
