package terminal

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"

	"github.com/dsh-actors/dsh-actors/internal/safetext"
	"github.com/dsh-actors/dsh-actors/internal/toolargs"
)

// Tool names.
const (
	ToolOpen   = "terminal_open"
	ToolSend   = "terminal_send"
	ToolRead   = "terminal_read"
	ToolSignal = "terminal_signal"
	ToolResize = "terminal_resize"
	ToolClose  = "terminal_close"
	ToolList   = "terminal_list"
)

// OpenArgs are terminal_open's arguments.
type OpenArgs struct {
	Command string            `json:"command,omitempty" jsonschema:"program and arguments, parsed as bash would; empty opens an interactive bash"`
	Cwd     string            `json:"cwd,omitempty" jsonschema:"working directory; empty keeps the host's"`
	Env     map[string]string `json:"env,omitempty" jsonschema:"environment variables to add or override"`
	Cols    int               `json:"cols,omitempty" jsonschema:"terminal width in columns (default 120)"`
	Rows    int               `json:"rows,omitempty" jsonschema:"terminal height in rows (default 40)"`
}

// SendArgs are terminal_send's arguments.
type SendArgs struct {
	TerminalID      string   `json:"terminal_id" jsonschema:"the id terminal_open returned"`
	Text            string   `json:"text,omitempty" jsonschema:"text to type, sent as is; add the Enter key to submit a line"`
	Keys            []string `json:"keys,omitempty" jsonschema:"named keys sent after the text, e.g. Enter, Tab, Esc, Up, C-c, C-d"`
	WaitMs          *int64   `json:"wait_ms,omitempty" jsonschema:"how long to wait for the program to be ready (0: do not wait); omitted, the default wait, which also ends once the program has gone quiet (inferred_idle)"`
	RunInBackground bool     `json:"run_in_background,omitempty" jsonschema:"return a task id at once and collect the output later with task_output"`
}

// ReadArgs are terminal_read's arguments.
type ReadArgs struct {
	TerminalID string `json:"terminal_id" jsonschema:"the id terminal_open returned"`
	WaitMs     *int64 `json:"wait_ms,omitempty" jsonschema:"wait up to this long for the program to be ready before reading; omitted, the default wait, which also ends once the program has gone quiet (inferred_idle)"`
	WaitFor    string `json:"wait_for,omitempty" jsonschema:"what ends a wait besides its bound: ready (the default: the program is ready for input, or exited) or output (also new output, as with task_output: a tail -f or a log returns as soon as it prints, once the output pauses 50 ms or 500 ms after it began)"`
	Offset     *int64 `json:"offset,omitempty" jsonschema:"read the retained history from this byte offset instead of the unread output (from the first byte retained when the history no longer holds it)"`
	Limit      *int64 `json:"limit,omitempty" jsonschema:"with offset: at most this many bytes"`
}

// The values of ReadArgs.WaitFor.
const (
	WaitForReady  = "ready"
	WaitForOutput = "output"
)

// SignalArgs are terminal_signal's arguments.
type SignalArgs struct {
	TerminalID string `json:"terminal_id" jsonschema:"the id terminal_open returned"`
	Signal     string `json:"signal" jsonschema:"INT, TERM, KILL, HUP, QUIT, TSTP or CONT; sent to the foreground process group"`
}

// ResizeArgs are terminal_resize's arguments.
type ResizeArgs struct {
	TerminalID string `json:"terminal_id" jsonschema:"the id terminal_open returned"`
	Cols       int    `json:"cols" jsonschema:"width in columns"`
	Rows       int    `json:"rows" jsonschema:"height in rows"`
}

// IDArgs are the arguments of terminal_close.
type IDArgs struct {
	TerminalID string `json:"terminal_id" jsonschema:"the id terminal_open returned"`
}

// NoArgs are the arguments of the list tools.
type NoArgs struct{}

// Size bounds.
const (
	DefaultCols, DefaultRows = 120, 40
	maxSize                  = 1000
)

// Parse decodes and checks the arguments of tool into v (a pointer to one of
// the argument types above).
func Parse(tool string, raw []byte, v any, cfg Config) error {
	allowEmpty := tool == ToolOpen || tool == ToolList || tool == "task_list"
	if err := toolargs.Decode(tool, raw, v, allowEmpty, `{"terminal_id": "t1"}`); err != nil {
		return err
	}
	switch a := v.(type) {
	case *OpenArgs:
		return errors.Join(checkNUL(tool, "command", a.Command), checkNUL(tool, "cwd", a.Cwd),
			checkSize(tool, a.Cols, a.Rows, true), checkEnv(tool, a.Env))
	case *SendArgs:
		if err := needID(tool, a.TerminalID); err != nil {
			return err
		}
		if a.Text == "" && len(a.Keys) == 0 {
			return fmt.Errorf(`%s: nothing to send: give "text", "keys" or both`, tool)
		}
		if i := strings.IndexByte(a.Text, 0); i >= 0 {
			return fmt.Errorf(`%s: "text" has a NUL byte at offset %d; to type Ctrl-@ on purpose, use "keys": ["C-@"]`, tool, i)
		}
		if !cfg.EnableRunInBackground && (a.RunInBackground || toolargs.Has(raw, "run_in_background")) {
			// The schema has no such field here: false is refused like true.
			return fmt.Errorf(`%s: "run_in_background" is turned off in this deployment (terminal.enableRunInBackground is false): send in the foreground`, tool)
		}
		if _, err := EncodeKeys(a.Keys); err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
		return checkWait(tool, a.WaitMs, cfg)
	case *ReadArgs:
		if err := needID(tool, a.TerminalID); err != nil {
			return err
		}
		if a.Offset != nil && *a.Offset < 0 {
			return fmt.Errorf(`%s: "offset" is %d: it must be 0 or more`, tool, *a.Offset)
		}
		if a.Limit != nil && (*a.Limit < 1 || a.Offset == nil) {
			return fmt.Errorf(`%s: "limit" must be positive and goes with "offset"`, tool)
		}
		switch {
		case a.WaitFor != "" && a.WaitFor != WaitForReady && a.WaitFor != WaitForOutput:
			return fmt.Errorf(`%s: "wait_for" is %q: it must be %q or %q`, tool, safetext.Clip(a.WaitFor, echoMax), WaitForReady, WaitForOutput)
		case a.WaitFor != "" && a.Offset != nil:
			return fmt.Errorf(`%s: "wait_for" goes with reading unread output: a page of the history (with "offset") does not wait`, tool)
		}
		return checkWait(tool, a.WaitMs, cfg)
	case *SignalArgs:
		if err := needID(tool, a.TerminalID); err != nil {
			return err
		}
		_, err := ParseSignal(a.Signal)
		if err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
	case *ResizeArgs:
		if err := needID(tool, a.TerminalID); err != nil {
			return err
		}
		return checkSize(tool, a.Cols, a.Rows, false)
	case *IDArgs:
		return needID(tool, a.TerminalID)
	}
	return nil
}

func needID(tool, id string) error {
	if id == "" {
		return fmt.Errorf(`%s: "terminal_id" is missing: give the id terminal_open returned`, tool)
	}
	return nil
}

func checkSize(tool string, cols, rows int, optional bool) error {
	low := 1
	if optional {
		low = 0
	}
	if cols < low || cols > maxSize || rows < low || rows > maxSize {
		return fmt.Errorf(`%s: size %dx%d is out of range: "cols" and "rows" must be between 1 and %d`, tool, cols, rows, maxSize)
	}
	return nil
}

// maxEnvBytes bounds what terminal_open may add to the environment (the
// kernel refuses an exec whose arguments and environment pass ~2 MiB).
const maxEnvBytes = 256 << 10

// checkNUL refuses a NUL in a string that becomes a program's argument or
// path: exec cannot take one.
func checkNUL(tool, field, v string) error {
	if i := strings.IndexByte(v, 0); i >= 0 {
		return fmt.Errorf(`%s: %q has a NUL byte at offset %d: a program's arguments and paths cannot hold one`, tool, field, i)
	}
	return nil
}

func checkEnv(tool string, env map[string]string) error {
	size := 0
	for k, v := range env {
		size += len(k) + len(v) + 2
	}
	if size > maxEnvBytes {
		return fmt.Errorf(`%s: "env" holds %d bytes: at most %d`, tool, size, maxEnvBytes)
	}
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf(`%s: env entry %q: names must be non-empty without "=" or NUL, values without NUL`, tool, safetext.Clip(k, echoMax))
		}
	}
	return nil
}

func checkWait(tool string, w *int64, cfg Config) error {
	if w != nil && (*w < 0 || *w > cfg.MaxWaitMs) {
		return fmt.Errorf(`%s: "wait_ms" is %d: it must be between 0 and %d`, tool, *w, cfg.MaxWaitMs)
	}
	return nil
}

// keyBytes are the bytes a terminal sends for each named key.
var keyBytes = map[string]string{
	"enter": "\r", "return": "\r", "tab": "\t", "backtab": "\x1b[Z", "space": " ",
	"esc": "\x1b", "escape": "\x1b", "backspace": "\x7f", "delete": "\x1b[3~", "insert": "\x1b[2~",
	"up": "\x1b[A", "down": "\x1b[B", "right": "\x1b[C", "left": "\x1b[D",
	"home": "\x1b[H", "end": "\x1b[F", "pageup": "\x1b[5~", "pagedown": "\x1b[6~",
	"f1": "\x1bOP", "f2": "\x1bOQ", "f3": "\x1bOR", "f4": "\x1bOS",
	"f5": "\x1b[15~", "f6": "\x1b[17~", "f7": "\x1b[18~", "f8": "\x1b[19~",
	"f9": "\x1b[20~", "f10": "\x1b[21~", "f11": "\x1b[23~", "f12": "\x1b[24~",
}

// KeyNames are the key names as the schema offers them; EncodeKeys takes
// any case, and Ctrl-x, Ctrl+x and ^x for C-x.
func KeyNames() []string {
	names := []string{"Enter", "Return", "Tab", "BackTab", "Space", "Esc", "Escape", "Backspace", "Delete", "Insert",
		"Up", "Down", "Right", "Left", "Home", "End", "PageUp", "PageDown"}
	for i := 1; i <= 12; i++ {
		names = append(names, fmt.Sprintf("F%d", i))
	}
	for c := 'a'; c <= 'z'; c++ {
		names = append(names, "C-"+string(c))
	}
	for _, c := range "@[\\]^_?" {
		names = append(names, "C-"+string(c))
	}
	return names
}

// SignalNames are the signal names as the schema offers them; ParseSignal
// also takes SIGINT and any case.
func SignalNames() []string { return []string{"INT", "TERM", "KILL", "HUP", "QUIT", "TSTP", "CONT"} }

// EncodeKeys turns key names into bytes. Control keys are written C-x (also
// Ctrl-x, Ctrl+x, ^x), for x a letter or one of @ [ \ ] ^ _ ?.
func EncodeKeys(keys []string) ([]byte, error) {
	var out []byte
	for _, k := range keys {
		b, ok := keyBytes[strings.ToLower(k)]
		if ok {
			out = append(out, b...)
			continue
		}
		if c, ok := controlKey(k); ok {
			out = append(out, c)
			continue
		}
		names := make([]string, 0, len(keyBytes))
		for n := range keyBytes {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown key %q: use one of %s, or C-a ... C-z", safetext.Clip(k, echoMax), strings.Join(names, ", "))
	}
	return out, nil
}

func controlKey(k string) (byte, bool) {
	lower := strings.ToLower(k)
	var rest string
	for _, p := range []string{"c-", "ctrl-", "ctrl+", "^"} {
		if strings.HasPrefix(lower, p) {
			rest = k[len(p):]
			break
		}
	}
	if len(rest) != 1 {
		return 0, false
	}
	c := rest[0]
	switch {
	case c >= 'a' && c <= 'z':
		return c - 'a' + 1, true
	case c >= 'A' && c <= 'Z':
		return c - 'A' + 1, true
	case c == '?':
		return 0x7f, true
	case strings.IndexByte("@[\\]^_", c) >= 0:
		return c - '@', true
	}
	return 0, false
}

// signals are the signals terminal_signal sends.
var signals = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP,
	"QUIT": syscall.SIGQUIT, "TSTP": syscall.SIGTSTP, "CONT": syscall.SIGCONT,
}

// ParseSignal accepts INT or SIGINT (any case) and the others above.
func ParseSignal(name string) (syscall.Signal, error) {
	if strings.TrimSpace(name) == "" {
		return 0, errors.New(`"signal" is missing: give one of INT, TERM, KILL, HUP, QUIT, TSTP, CONT`)
	}
	s, ok := signals[strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(name)), "SIG")]
	if !ok {
		return 0, fmt.Errorf(`signal %q is not one of INT, TERM, KILL, HUP, QUIT, TSTP, CONT`, safetext.Clip(name, echoMax))
	}
	return s, nil
}
