package shell

import (
	"errors"
	"fmt"
	"time"
)

// BackendShell is the only backend: bash on a pseudo-terminal of its own.
const BackendShell = "shell"

// DefaultDescription is the bash tool's description for the model when the
// configuration gives none. Environment facts (network, mirrors) belong in
// the configured description, not here.
const DefaultDescription = "Run a command in a persistent bash shell. The shell stays alive between calls: " +
	"the working directory, exported variables, functions, activated environments and background jobs carry over. " +
	"Each call returns the command's output (stdout and stderr together) and, when it is not zero, " +
	"its exit status as [exit code: N]. Long output keeps its beginning and its end, and says how much was left out between them. " +
	"A command that waits for keyboard input returns early with its output so far; run interactive programs in a terminal instead. " +
	"A command that runs past the time limit is killed together with the shell, and the next call starts a fresh shell."

// Config is the bash tool's configuration (the "bash" section of the
// configuration file). Its zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// BackendType names the PTY backend; only "shell" exists.
	BackendType string `yaml:"backendType"`
	// TimeoutMs is the wall-clock limit of one command in milliseconds; a
	// command that passes it is killed with its shell.
	TimeoutMs int64 `yaml:"timeoutMs"`
	// MaxOutputChars is how many characters of a command's output are kept:
	// its first and its last half, with a notice between them of what was
	// left out (a command's verdict, a test summary, is at its end).
	MaxOutputChars int `yaml:"maxOutputChars"`
	// KeepHeadOnly keeps only the first MaxOutputChars characters, as the
	// reference does.
	KeepHeadOnly bool `yaml:"keepHeadOnly"`
	// Description is the tool description the model sees.
	Description string `yaml:"description"`
	// HostHistory lets agent shells read and write the host user's bash
	// history (~/.bash_history). Off by default: an agent's shell keeps its
	// history in memory only and never sees the host user's.
	HostHistory bool `yaml:"hostHistory"`
	// HostStartupFiles lets agent shells read the host user's readline
	// configuration (~/.inputrc). Off by default. (bash's own startup files,
	// ~/.bashrc and ~/.profile, are never run: the shell starts with
	// --norc --noprofile.)
	HostStartupFiles bool `yaml:"hostStartupFiles"`
	// VerifyStatus asks bash for every line's status with a fresh token,
	// typed after the line has run, instead of taking it from the prompt.
	// A command can print a copy of the prompt's marker and blank PS1, so
	// that the copy is the only marker and its status is believed; with
	// this on, no command can set its own status that way. It costs one
	// more round trip per line.
	VerifyStatus bool `yaml:"verifyStatus"`
	// CancelGraceMs is how long a command whose call was cancelled may take
	// to end after SIGINT (a build tool cleaning up) before its job gets
	// SIGTERM, then SIGKILL; only a command that survives those costs the
	// shell.
	CancelGraceMs int64 `yaml:"cancelGraceMs"`
	// InputSilenceMs is how long a command that waits on the terminal in a
	// way that proves nothing (a relay such as ssh -t, script or docker
	// exec -it, whose other side may be working; a program that also waits
	// on a connection) must print nothing and use no processor time before
	// the call returns early as waiting for input, said to be inferred. 0:
	// such a command runs until it ends or reaches the time limit.
	InputSilenceMs int64 `yaml:"inputSilenceMs"`
}

// DefaultConfig returns the reference defaults.
func DefaultConfig() Config {
	return Config{
		BackendType:    BackendShell,
		TimeoutMs:      300000,
		MaxOutputChars: 16000,
		Description:    DefaultDescription,
		CancelGraceMs:  5000,
		InputSilenceMs: 10000,
	}
}

// CancelGrace is CancelGraceMs as a duration.
func (c Config) CancelGrace() time.Duration {
	return time.Duration(c.CancelGraceMs) * time.Millisecond
}

// InputSilence is InputSilenceMs as a duration.
func (c Config) InputSilence() time.Duration {
	return time.Duration(c.InputSilenceMs) * time.Millisecond
}

// Timeout is TimeoutMs as a duration.
func (c Config) Timeout() time.Duration { return time.Duration(c.TimeoutMs) * time.Millisecond }

// maxTimeoutMs keeps timeouts within what a timer and a human can mean (a day).
const maxTimeoutMs = 24 * 60 * 60 * 1000

// maxOutputCharsLimit bounds the kept output (4 bytes a character).
const maxOutputCharsLimit = 16 << 20

// Validate checks every field; each error names the key, the value and the
// rule.
func (c Config) Validate() error {
	var errs []error
	if c.BackendType != BackendShell {
		errs = append(errs, fmt.Errorf("bash.backendType: %q is not a known backend (the only one is %q)", c.BackendType, BackendShell))
	}
	if c.CancelGraceMs < 0 || c.CancelGraceMs > maxTimeoutMs {
		errs = append(errs, fmt.Errorf("bash.cancelGraceMs: %d is out of range (must be between 0 and %d milliseconds)", c.CancelGraceMs, maxTimeoutMs))
	}
	if c.InputSilenceMs < 0 || c.InputSilenceMs > maxTimeoutMs {
		errs = append(errs, fmt.Errorf("bash.inputSilenceMs: %d is out of range (must be between 0, never, and %d milliseconds)", c.InputSilenceMs, maxTimeoutMs))
	}
	if c.TimeoutMs < 1 || c.TimeoutMs > maxTimeoutMs {
		errs = append(errs, fmt.Errorf("bash.timeoutMs: %d is out of range (must be between 1 and %d milliseconds)", c.TimeoutMs, maxTimeoutMs))
	}
	if c.MaxOutputChars < 1 || c.MaxOutputChars > maxOutputCharsLimit {
		errs = append(errs, fmt.Errorf("bash.maxOutputChars: %d is out of range (must be between 1 and %d)", c.MaxOutputChars, maxOutputCharsLimit))
	}
	if c.Description == "" {
		errs = append(errs, errors.New(`bash.description: "" is empty (the model needs a description; omit the key to use the default)`))
	}
	return errors.Join(errs...)
}
