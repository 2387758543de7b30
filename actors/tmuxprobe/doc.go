// Package tmuxprobe reads where the agent's own process sits in tmux: the
// session, window and pane, their active flags and the window's layout. It
// asks tmux through the executor seam (package executor), never through an
// agent's shell, and never captures a pane's contents.
//
// # The reading
//
// A process counts as in tmux only when $TMUX_PANE is set and that pane's
// terminal (#{pane_tty}) is the process's own controlling terminal (ps -o
// tty=): a program started from a tmux shell by another terminal (an IDE, a
// launcher) inherits $TMUX_PANE, but not the pane. Every other outcome (no
// $TMUX_PANE, another pane's terminal, tmux failing, a reading with the
// wrong number of fields or no pane id) is "not in tmux", not an error; an
// error is the executor's: a refusal by its policy, or a program that could
// not run.
//
// The session and window names may hold any character but NUL (tabs,
// newlines, the characters \t): each is asked for on its own and the
// answers are NUL-separated, so no name can mis-split the reading.
//
// A host shares one Listener among its agents: all of them live in the
// host's pane, and agents that ask at once share one reading
// (golang.org/x/sync/singleflight). Whether to inject is decided per agent,
// from its own log.
//
// # Goroutines
//
// Read starts none; the executor's run ends before it returns.
package tmuxprobe
