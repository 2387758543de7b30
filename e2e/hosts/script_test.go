package hosts

import (
	"regexp"
	"strings"
	"time"
)

// step is one tool call of the script and what the model must see in its
// result.
type step struct {
	name string // names the subtests of its checks
	tool string // the server's tool: bash, terminal_open, terminal_send
	// args builds the call's arguments from the results so far (the
	// terminal id the model was given).
	args   func(results []string) map[string]any
	checks []check
	// within, when set, bounds the time from the call to its result as
	// the model sees it.
	within time.Duration
}

// check is one thing the model must see in a step's result.
type check struct {
	name string
	want string // what it looks for, for the failure message
	ok   func(seen string) bool
}

// contains: the result holds s as it is.
func contains(name, s string) check {
	return check{name: name, want: "the text " + quote(s), ok: func(seen string) bool { return strings.Contains(seen, s) }}
}

// onALine: the result holds s as a line of its own. A host that wraps the
// result in JSON escapes its newlines, so "\n" written out counts as a line
// break too.
func onALine(name, s string) check {
	re := regexp.MustCompile(`(^|\n|\\n|\\r)` + regexp.QuoteMeta(s) + `(\r|\n|\\r|\\n|$)`)
	return check{name: name, want: "a line " + quote(s), ok: re.MatchString}
}

// word: the result holds s as a word (\b on both sides).
func word(name, s string) check {
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(s) + `\b`)
	return check{name: name, want: "the word " + quote(s), ok: re.MatchString}
}

func quote(s string) string { return "`" + s + "`" }

var terminalIDRE = regexp.MustCompile(`\bterminal (t\d+)\b|"terminal_id"\s*:\s*"(t\d+)"`)

// terminalID is the id the model was given in terminal_open's result, or
// "t1" (the first terminal of a session) when the result names none.
func terminalID(results []string, openStep int) string {
	if openStep < len(results) {
		if m := terminalIDRE.FindStringSubmatch(results[openStep]); m != nil {
			return m[1] + m[2]
		}
	}
	return "t1"
}

func fixed(args map[string]any) func([]string) map[string]any {
	return func([]string) map[string]any { return args }
}

// scriptOptions are what differs between hosts.
type scriptOptions struct {
	// waitForPrevious: the host adds a wait_for_previous argument to every
	// tool (Gemini CLI), and the model sets it on one call.
	waitForPrevious bool
	// hostTimeout: the host's own per-call limit is set short, and one call
	// runs past it (sleep), to see the shell keep its state after.
	hostTimeout bool
	// python3 is the interpreter's path (not a version manager's shim,
	// which may take a second to start on a loaded machine).
	python3 string
	// sleep is the command that runs past the host's limit, for sleepFor.
	sleep    string
	sleepFor time.Duration
}

// script is the conversation every host goes through.
func script(o scriptOptions) []step {
	steps := []step{
		{name: "export-and-cd", tool: "bash", args: fixed(map[string]any{"command": "export X=1; cd /tmp"})},
		{name: "state-kept", tool: "bash", args: fixed(map[string]any{"command": "echo $X $PWD"}),
			checks: []check{contains("sees-1-tmp", "1 /tmp")}},
		{name: "exit-status", tool: "bash", args: fixed(map[string]any{"command": "false"}),
			checks: []check{contains("sees-exit-code-1", "[exit code: 1]")}},
		// A prompt in an event loop (npx's "Ok to proceed?" is readline's
		// question): the call returns at once, saying so, and the next call
		// interrupts it in the same shell.
		{name: "prompt-in-event-loop", tool: "bash", args: fixed(map[string]any{"command": `node -e "require('readline').createInterface({input: process.stdin, output: process.stdout}).question('Ok to proceed? (y) ', a => console.log(a))"`}),
			checks: []check{contains("sees-question", "Ok to proceed? (y)"), contains("sees-waiting", "waiting for input")}},
		{name: "after-the-prompt", tool: "bash", args: fixed(map[string]any{"command": "echo after $X"}),
			checks: []check{contains("sees-after-1", "after 1")}},
		{name: "terminal-open", tool: "terminal_open", args: fixed(map[string]any{"command": o.python3}),
			checks: []check{contains("sees-prompt", ">>>"), word("sees-terminal-id", "t1")}},
	}
	open := len(steps) - 1
	steps = append(steps, step{name: "terminal-send", tool: "terminal_send",
		args: func(results []string) map[string]any {
			return map[string]any{"terminal_id": terminalID(results, open), "text": "6*7\n"}
		},
		checks: []check{onALine("sees-42", "42")}})
	if o.waitForPrevious {
		steps = append(steps, step{name: "wait-for-previous", tool: "bash",
			args:   fixed(map[string]any{"command": "echo waited $X", "wait_for_previous": true}),
			checks: []check{contains("runs", "waited 1")}})
	}
	if o.hostTimeout {
		steps = append(steps,
			// The host gives up at its limit, long before the command
			// would end; what it tells the model is the host's own.
			step{name: "past-host-timeout", tool: "bash", args: fixed(map[string]any{"command": o.sleep}),
				within: o.sleepFor / 2},
			step{name: "state-after-host-timeout", tool: "bash", args: fixed(map[string]any{"command": "echo $X $PWD"}),
				checks: []check{contains("sees-1-tmp", "1 /tmp")}})
	}
	return steps
}
