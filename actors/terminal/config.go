package terminal

import (
	"errors"
	"fmt"
	"time"
)

// Config is the terminal tools' configuration (the "terminal" section of the
// configuration file). Start from DefaultConfig.
type Config struct {
	// EnableRunInBackground exposes terminal_send's run_in_background and
	// the task tools; false removes the field from the schema and rejects it.
	EnableRunInBackground bool `yaml:"enableRunInBackground"`
	// MaxResultBytes caps every complete result, metadata included.
	MaxResultBytes int `yaml:"maxResultBytes"`
	// IdleSilenceMs is the silence after which a program is taken to be idle
	// (inferred_idle): one whose wait /proc cannot see, or, for a call that
	// gives no wait_ms, one that uses no processor time and does not read
	// the terminal.
	IdleSilenceMs int64 `yaml:"idleSilenceMs"`
	// DefaultWaitMs bounds a wait when the call gives no wait_ms.
	DefaultWaitMs int64 `yaml:"defaultWaitMs"`
	// MaxWaitMs bounds every wait.
	MaxWaitMs int64 `yaml:"maxWaitMs"`
	// HistoryBytes is how much output each terminal retains.
	HistoryBytes int `yaml:"historyBytes"`
	// MaxTerminals is how many terminals one agent may have open.
	MaxTerminals int `yaml:"maxTerminals"`
	// MaxTasks is how many background tasks one agent may have running.
	MaxTasks int `yaml:"maxTasks"`
	// KillGraceMs is how long task_kill waits after SIGINT, and after
	// SIGTERM, before the next signal; and how long terminal_close waits
	// after SIGHUP before it kills.
	KillGraceMs int64 `yaml:"killGraceMs"`
	// HostHistory lets programs in terminals use the host user's bash
	// history: off by default, HISTFILE is empty in their environment, so a
	// bash in a terminal neither loads nor writes ~/.bash_history.
	HostHistory bool `yaml:"hostHistory"`
	// HostStartupFiles lets terminals' bash read the host user's start-up
	// files: ~/.bashrc and ~/.inputrc for the default bash, $BASH_ENV and
	// $ENV for a command. Off by default (--norc, INPUTRC=/dev/null, and
	// BASH_ENV and ENV left out of the environment).
	HostStartupFiles bool `yaml:"hostStartupFiles"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		EnableRunInBackground: true,
		MaxResultBytes:        262144,
		IdleSilenceMs:         2000,
		DefaultWaitMs:         10000,
		MaxWaitMs:             600000,
		HistoryBytes:          1 << 20,
		MaxTerminals:          32,
		MaxTasks:              32,
		KillGraceMs:           2000,
	}
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// minResultBytes leaves room for the metadata of any result.
const minResultBytes = 1024

// Validate checks every field; each error names the key, the value and the
// rule.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, key string, value any, rule string) {
		if !ok {
			errs = append(errs, fmt.Errorf("terminal.%s: %v is out of range (%s)", key, value, rule))
		}
	}
	check(c.MaxResultBytes >= minResultBytes && c.MaxResultBytes <= 64<<20, "maxResultBytes", c.MaxResultBytes,
		fmt.Sprintf("must be between %d and %d bytes", minResultBytes, 64<<20))
	check(c.IdleSilenceMs >= 10 && c.IdleSilenceMs <= 3600000, "idleSilenceMs", c.IdleSilenceMs, "must be between 10 and 3600000 milliseconds")
	check(c.MaxWaitMs >= 1 && c.MaxWaitMs <= 86400000, "maxWaitMs", c.MaxWaitMs, "must be between 1 and 86400000 milliseconds")
	check(c.DefaultWaitMs >= 0 && c.DefaultWaitMs <= c.MaxWaitMs, "defaultWaitMs", c.DefaultWaitMs, fmt.Sprintf("must be between 0 and maxWaitMs, which is %d", c.MaxWaitMs))
	check(c.HistoryBytes >= 4096 && c.HistoryBytes <= 1<<30, "historyBytes", c.HistoryBytes, "must be between 4096 and 1073741824 bytes")
	check(c.MaxTerminals >= 1 && c.MaxTerminals <= 10000, "maxTerminals", c.MaxTerminals, "must be between 1 and 10000")
	check(c.MaxTasks >= 1 && c.MaxTasks <= 10000, "maxTasks", c.MaxTasks, "must be between 1 and 10000")
	check(c.KillGraceMs >= 1 && c.KillGraceMs <= 600000, "killGraceMs", c.KillGraceMs, "must be between 1 and 600000 milliseconds")
	return errors.Join(errs...)
}

// Wait is the wait a call asked for (wait_ms), or the default when it gave
// none.
func (c Config) Wait(waitMs *int64) time.Duration {
	if waitMs == nil {
		return ms(c.DefaultWaitMs)
	}
	return ms(*waitMs)
}
