package shell

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-actors/dsh-actors/internal/toolargs"
)

// ToolName is the name the model calls the tool by.
const ToolName = "bash"

// Args are the bash tool's arguments.
type Args struct {
	// Command is the text bash runs, as if typed at the prompt: any number of
	// lines, heredocs, any length.
	Command string `json:"command" jsonschema:"the command text to run in the persistent shell"`
	// TimeoutMs optionally lowers the time limit of this one call; it is
	// capped at the configured timeoutMs.
	TimeoutMs int64 `json:"timeout_ms,omitempty" jsonschema:"optional time limit for this call in milliseconds, at most the configured limit"`
}

// ParseArgs decodes and checks JSON arguments. Unknown fields are errors, so
// a misspelt argument is reported instead of ignored.
func ParseArgs(raw []byte) (Args, error) {
	var a Args
	if err := toolargs.Decode(ToolName, raw, &a, false, `{"command": "ls"}`); err != nil {
		return a, err
	}
	if a.Command == "" {
		// Blank text runs (as bash runs an empty line); a missing one is
		// a mistake.
		if !toolargs.Has(raw, "command") {
			return a, errors.New(`bash: "command" is missing: give the command text to run, for example {"command": "ls"}`)
		}
	}
	return a, a.Validate()
}

// Validate checks the arguments on their own (limits that depend on the
// configuration are applied when the call runs). Blank text is valid: it
// runs nothing, with status 0.
func (a Args) Validate() error {
	if i := strings.IndexByte(a.Command, 0); i >= 0 {
		return fmt.Errorf(`bash: "command" contains a NUL byte at offset %d: bash cannot take NUL in command text`, i)
	}
	if a.TimeoutMs < 0 {
		return fmt.Errorf(`bash: "timeout_ms" is %d: give a positive number of milliseconds, or 0 for the configured limit`, a.TimeoutMs)
	}
	return nil
}

// timeout is the call's limit: the configured one, or the smaller one asked
// for.
func (a Args) timeout(cfg Config) time.Duration {
	if a.TimeoutMs > 0 && a.TimeoutMs < cfg.TimeoutMs {
		// Compared as milliseconds: a huge value must not overflow a Duration.
		return time.Duration(a.TimeoutMs) * time.Millisecond
	}
	return cfg.Timeout()
}

// Result is what one bash call produced. Text is what the model reads; the
// other fields carry the same facts for programs (the "data" of a tool
// result).
type Result struct {
	Text string `json:"-"`
	// ExitCode is the command's status; absent when the command did not
	// finish (timeout, waiting for input, shell death).
	ExitCode *int `json:"exit_code,omitempty"`
	// TimedOut: the call hit its time limit; the shell was killed.
	TimedOut bool `json:"timed_out,omitempty"`
	// WaitingForInput: the command is blocked reading the terminal; the call
	// returned early and the next call interrupts it first.
	WaitingForInput bool `json:"waiting_for_input,omitempty"`
	// WaitInferred: the wait for input is not proven, only inferred from
	// silence (a relay such as ssh or script, or a program that waits on a
	// connection too); the command may still be working.
	WaitInferred bool `json:"wait_inferred,omitempty"`
	// ShellExited says how the shell itself ended during the call, e.g.
	// "exit code 3" or "killed by signal SIGKILL".
	ShellExited string `json:"shell_exited,omitempty"`
	// ShellReset: the shell is gone after this call; the next call gets a
	// fresh one.
	ShellReset bool `json:"shell_reset,omitempty"`
	// FreshShell: this call ran in a shell started for it (the first call, or
	// the first after a reset).
	FreshShell bool `json:"fresh_shell,omitempty"`
	// StatusUnknown: the command finished, but its exit status could not be
	// established (more completion markers came than bash prints: the
	// command or a background job printed one), or the shell was lost.
	StatusUnknown bool `json:"status_unknown,omitempty"`
	// NotRun: bash read the command but did not run it (a syntax error, a
	// failed history expansion, incomplete text).
	NotRun bool `json:"not_run,omitempty"`
	// ClippedBytes is how many bytes of output were not kept.
	ClippedBytes int64 `json:"clipped_bytes,omitempty"`
	// IsError marks a call that failed as a call: bad arguments, a timeout, a
	// shell that could not start.
	IsError bool `json:"-"`
}

// Data is the JSON form of the structured fields.
func (r Result) Data() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	return b
}

// Spec returns the bash tool as the model sees it.
func Spec(cfg Config) toolargs.Spec {
	return toolargs.Spec{Name: ToolName, Description: cfg.Description, Schema: toolargs.Schema[Args]()}
}
