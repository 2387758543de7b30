package config

import (
	"fmt"
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// comments say what each key is, in the file `dsh-actors config default`
// writes.
var comments = map[string]string{
	"bash":                           "The persistent bash tool.",
	"bash.backendType":               "the only backend: bash on a PTY of its own",
	"bash.timeoutMs":                 "wall-clock limit of one command; past it, the command and its shell are killed",
	"bash.maxOutputChars":            "characters of a command's output kept: its first and last half, with a notice between",
	"bash.keepHeadOnly":              "true: keep only the first maxOutputChars characters (the reference's rule)",
	"bash.description":               "the tool description the model sees",
	"bash.hostHistory":               "true: agent shells load and write ~/.bash_history",
	"bash.hostStartupFiles":          "true: agent shells read ~/.inputrc",
	"bash.verifyStatus":              "true: every line's status comes from a query no command can forge (one more round trip)",
	"bash.cancelGraceMs":             "a cancelled call's command gets SIGINT (the shell is kept); still running after this, its job gets SIGTERM, then SIGKILL",
	"bash.inputSilenceMs":            "a command whose wait on the terminal proves nothing (a relay such as ssh -t or script) this long quiet returns early as waiting for input, said to be inferred; 0: never",
	"terminal":                       "The terminal_* and task_* tools.",
	"terminal.enableRunInBackground": "false: no run_in_background in the schema, and no task tools",
	"terminal.maxResultBytes":        "cap of every terminal and task result, metadata included",
	"terminal.idleSilenceMs":         "silence before inferred_idle: where no proof of waiting is possible, or, for a call that gives no wait_ms, of a program using no processor time and not reading the terminal",
	"terminal.defaultWaitMs":         "wait of a call that gives no wait_ms",
	"terminal.maxWaitMs":             "longest wait a call may ask for",
	"terminal.historyBytes":          "output retained per terminal",
	"terminal.maxTerminals":          "terminals one agent may have open",
	"terminal.maxTasks":              "background tasks one agent may have running",
	"terminal.killGraceMs":           "between task_kill's signals; terminal_close's grace after SIGHUP",
	"terminal.hostHistory":           "true: bash in terminals may use ~/.bash_history",
	"terminal.hostStartupFiles":      "true: terminals' bash reads ~/.bashrc, ~/.inputrc and $BASH_ENV",
	"admission":                      "The host-wide gate: a few bash calls start at once, first come first served.",
	"admission.slots":                "calls that may start at once; 0: 4 per CPU; -1: no gate",
	"admission.leaseMs":              "a call still running after this gives its slot to the next",
	"session":                        "The session log.",
	"session.path":                   `the file; "": $XDG_STATE_HOME/dsh-actors/sessions.db or ~/.local/state/dsh-actors/sessions.db`,
	"tmuxContext":                    "The tmux location, injected on the first step of each turn it changed.",
	"tmuxContext.enabled":            "true: read and inject it",
	"tmuxContext.refreshIntervalMs":  "> 0: no query and no injection within this long of the latest one",
	"limits":                         "What the whole host runs at once; 0: no limit. Per agent: one shell, terminal.maxTerminals, terminal.maxTasks.",
	"limits.agents":                  "agents at once (each MCP session is one)",
	"limits.shells":                  "agents with a live bash shell",
	"limits.terminals":               "terminals open, across agents",
	"limits.tasks":                   "background tasks running, across agents",
	"mcp":                            "dsh-actors serve.",
	"mcp.sessionTimeoutMs":           "an HTTP session with no request this long ends (a stream open or not), and its agent with every process it started",
	"mcp.maxRequestBytes":            "largest request: an HTTP body, a stdio line",
	"mcp.maxSessions":                "HTTP sessions open at once; a new one past it is refused (503)",
	"mcp.turnIdleMs":                 "a call after this long without one begins a turn: the listeners' context (tmux location) comes with its result; 0: every call",
	"mcp.progressIntervalMs":         "a call whose client gave a progress token is reported this often while it runs (time so far, last line printed)",
	"mcp.detachedSessionMs":          "an HTTP session its client holds nothing of (no request, no stream, no call) this long ends, and its agent with every process; 30 s after a stream it held closed, if shorter",
	"sandbox":                        "The sandbox of each agent's processes: nothing in it reaches the host, another agent, or outlives the agent.",
	"sandbox.level":                  "auto (process+limits, as far as the machine allows; said when weaker), off, process (own user, pid, mount namespaces under an init), limits (+ a cgroup per agent), nonet (+ loopback-only network), fs (+ read-only system, private /tmp)",
	"sandbox.require":                "true: refuse to run an agent in a sandbox weaker than the level asks",
	"sandbox.disable":                "mechanisms never used, comma-separated (process, limits, nonet, fs)",
	"sandbox.pidsMax":                "processes and threads one agent may have; 0: no limit",
	"sandbox.memoryMax":              "memory one agent may use, past which the kernel kills inside it only: bytes, KiB/MiB/GiB, or a % of the machine's; 0: no limit",
	"sandbox.cpuWeight":              "one agent's share of the processors against the others' (1-10000, 100 usual); 0: unset",
	"sandbox.writable":               "directories writable at level fs besides the agent's working directory, comma-separated",
	"sandbox.hide":                   "directories shown empty at level fs (other agents' directories, the host's secrets), comma-separated; the session log's directory always is",
	"sandbox.env":                    "What of the host's environment agents' processes inherit.",
	"sandbox.env.inherit":            "filtered (all but names like *KEY*, *SECRET*, *TOKEN*, *PASS*, *CREDENTIAL*, *COOKIE*, *_PAT, *PRIVATE*), all, or none",
	"sandbox.env.include":            "name patterns always inherited (with none: the only ones), comma-separated, case-insensitive",
	"sandbox.env.exclude":            "name patterns never inherited, besides the secrets'",
}

// DefaultYAML is the default configuration as a commented file: loaded
// back, it changes nothing.
func DefaultYAML() ([]byte, error) {
	root, err := toNode(reflect.ValueOf(Default()), "")
	if err != nil {
		return nil, err
	}
	root.HeadComment = "dsh-actors configuration: every key with its default. Keys left out keep their defaults."
	return yaml.Marshal(root)
}

func toNode(v reflect.Value, path string) (*yaml.Node, error) {
	switch v.Kind() {
	case reflect.Struct:
		m := &yaml.Node{Kind: yaml.MappingNode}
		t := v.Type()
		for i := range t.NumField() {
			key := t.Field(i).Tag.Get("yaml")
			full := join(path, key)
			val, err := toNode(v.Field(i), full)
			if err != nil {
				return nil, err
			}
			k := &yaml.Node{Kind: yaml.ScalarNode, Value: key}
			if c := comments[full]; c != "" {
				if val.Kind == yaml.MappingNode {
					k.HeadComment = c
				} else {
					k.LineComment = c
				}
			}
			m.Content = append(m.Content, k, val)
		}
		return m, nil
	case reflect.Bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}, nil
	case reflect.Int, reflect.Int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}, nil
	case reflect.String:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.String()}
		if len(v.String()) > 60 {
			n.Style = yaml.FoldedStyle
		} else {
			n.Style = yaml.DoubleQuotedStyle
		}
		return n, nil
	}
	return nil, fmt.Errorf("config: %s: no YAML form for %s", path, v.Type())
}
