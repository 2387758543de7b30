package terminal

import (
	"github.com/dsh-actors/dsh-actors/internal/toolargs"
)

// Guidance is the text for the model's system prompt that comes with the
// terminal tools.
const Guidance = "Terminals are for work that needs a live program: an interactive prompt (a REPL, a debugger, ssh, a password question), " +
	"a server or watcher that keeps running, or a session whose state you build up over many steps. " +
	"For one-off commands use bash, which is faster and returns the exit status. " +
	"Keep track of the terminal ids you open and close each terminal as soon as you no longer need it. " +
	"A result marked inferred_idle or timeout does not mean the program has finished: read again, or look at terminal_list."

// Specs returns the terminal tools as the model sees them.
func Specs(cfg Config) []toolargs.Spec {
	var omit []string
	sendDesc := "Type text and named keys into a terminal, then wait until the program is ready for more input " +
		"(its prompt came back, it is proven to be reading the keyboard, it exited) or the wait ends. " +
		"Returns the output since your last read, with why the wait ended. One send at a time owns a terminal; " +
		"a second send while one is in progress is refused as busy."
	if cfg.EnableRunInBackground {
		sendDesc += " With run_in_background the input is typed and a task id comes back at once; collect the output with task_output."
	} else {
		omit = []string{"run_in_background"}
	}
	return []toolargs.Spec{
		{Name: ToolOpen, Schema: toolargs.Schema[OpenArgs](),
			Description: "Open a terminal: a program on a pseudo-terminal of its own (an interactive bash unless you name a command). " +
				"Returns the terminal id and the first screen once the program is ready."},
		{Name: ToolSend, Schema: toolargs.WithEnum(toolargs.Schema[SendArgs](omit...), "keys", KeyNames()), Description: sendDesc},
		{Name: ToolRead, Schema: toolargs.WithEnum(toolargs.Schema[ReadArgs](), "wait_for", []string{WaitForReady, WaitForOutput}),
			Description: "Read a terminal's output you have not seen yet, optionally waiting for the program to be ready " +
				"(or, with wait_for output, for it to print something new: a tail -f, a log, a build's progress); " +
				"or, with offset and limit, a page of its retained history."},
		{Name: ToolSignal, Schema: toolargs.WithEnum(toolargs.Schema[SignalArgs](), "signal", SignalNames()),
			Description: "Send a signal (INT, TERM, KILL, HUP, QUIT, TSTP, CONT) to the program in the terminal's foreground, " +
				"as Ctrl-C or Ctrl-Z would, whatever mode the terminal is in."},
		{Name: ToolResize, Schema: toolargs.Schema[ResizeArgs](),
			Description: "Change a terminal's size in columns and rows; the program is told with SIGWINCH."},
		{Name: ToolClose, Schema: toolargs.Schema[IDArgs](),
			Description: "Close a terminal: end its program and everything it started, and return the last output and the exit status."},
		{Name: ToolList, Schema: toolargs.Schema[NoArgs](),
			Description: "List your terminals: running or exited (with status), the foreground command, the last readiness, and whether a send holds it."},
	}
}
