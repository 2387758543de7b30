package tmuxprobe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-actors/dsh-actors/executor"
)

// Plugin is the name the reading is run and injected under.
const Plugin = "tmux-context"

// Location is where a process sits in tmux.
type Location struct {
	Session      string
	WindowIndex  int
	WindowName   string
	PaneIndex    int
	PaneID       string
	WindowActive bool
	PaneActive   bool
	Layout       string
}

// fixed is what tmux is asked for first: the fields that cannot hold a tab
// or a newline, tab-separated. The session and window names, which can hold
// anything but NUL, come each from a display-message of its own, and the
// script puts a NUL after each answer.
const fixed = "#{window_index}\t#{pane_index}\t#{pane_id}\t#{window_active}\t#{pane_active}\t#{window_layout}"

// script checks that $TMUX_PANE is this process's own pane ($1 is its pid)
// and prints the reading ($2 is fixed); it exits 1 when there is none. -u:
// tmux prints values as they are (without a UTF-8 locale it would replace a
// tab, even the format's own, with "_").
const script = `[ -n "$TMUX_PANE" ] || exit 1
self_tty=$(ps -o tty= -p "$1" | tr -d ' ')
pane_tty=$(tmux -u display-message -t "$TMUX_PANE" -p '#{pane_tty}') || exit 1
[ -n "$self_tty" ] && [ "$pane_tty" = "/dev/$self_tty" ] || exit 1
tmux -u display-message -t "$TMUX_PANE" -p "$2" && printf '\0' &&
tmux -u display-message -t "$TMUX_PANE" -p '#{session_name}' && printf '\0' &&
tmux -u display-message -t "$TMUX_PANE" -p '#{window_name}'`

// ReadTimeout bounds one reading (it takes a few milliseconds).
const ReadTimeout = 2 * time.Second

// Read reads the location of process pid (the agent's own: os.Getpid())
// through ex. ok is false when the process is not in a tmux pane of its
// own; err is the executor's refusal or failure.
func Read(ctx context.Context, ex *executor.Executor, pid int) (loc Location, ok bool, err error) {
	res, err := ex.Run(ctx, executor.Request{
		Plugin: Plugin,
		Argv:   []string{"bash", "-c", script, "tmux-location", strconv.Itoa(pid), fixed},
		// A stopped or wedged tmux server must not add seconds to a turn.
		Timeout: ReadTimeout,
	})
	if err != nil {
		return Location{}, false, err
	}
	if res.ExitCode != 0 || res.TimedOut || res.DroppedBytes > 0 {
		return Location{}, false, nil
	}
	loc, ok = parse(res.Stdout)
	return loc, ok, nil
}

// parse reads the script's output; ok is false for one that is not a
// reading.
func parse(out string) (Location, bool) {
	parts := strings.Split(out, "\x00")
	if len(parts) != 3 {
		return Location{}, false
	}
	for i, p := range parts {
		v, found := strings.CutSuffix(p, "\n") // tmux ends each answer with one
		if !found {
			return Location{}, false
		}
		parts[i] = v
	}
	f := strings.Split(parts[0], "\t")
	if len(f) != 6 {
		return Location{}, false
	}
	loc := Location{Session: parts[1], WindowName: parts[2], PaneID: f[2], Layout: f[5]}
	var err1, err2 error
	loc.WindowIndex, err1 = strconv.Atoi(f[0])
	loc.PaneIndex, err2 = strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || !strings.HasPrefix(loc.PaneID, "%") || len(loc.PaneID) < 2 {
		return Location{}, false
	}
	var okW, okP bool
	loc.WindowActive, okW = flag(f[3])
	loc.PaneActive, okP = flag(f[4])
	return loc, okW && okP
}

func flag(s string) (v, ok bool) {
	switch s {
	case "0":
		return false, true
	case "1":
		return true, true
	}
	return false, false
}

// State is the reading's two lines, as injected: what is compared with the
// latest injection to decide whether anything changed.
func (l Location) State() string {
	return fmt.Sprintf("session %s, window %d %q, pane %d %s\nwindow active=%d, pane active=%d, layout %s",
		l.Session, l.WindowIndex, l.WindowName, l.PaneIndex, l.PaneID, b2i(l.WindowActive), b2i(l.PaneActive), l.Layout)
}

// Render is the text injected on turn: a preamble line and State.
func (l Location) Render(turn int) string {
	return fmt.Sprintf("tmux location (turn %d):\n%s", turn, l.State())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
