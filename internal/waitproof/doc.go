// Package waitproof decides when an actor that owns a ptyproc.Process looks
// at /proc, and when what it saw proves that the program is waiting for
// terminal input. The shell actor uses it to return early from a command
// that reads the keyboard; the terminal actor uses it to report readiness.
//
// # When to look
//
// A look (ptyproc.Process.Probe) costs a few reads of /proc. The first comes
// soon after the episode starts (input was written), later ones back off
// exponentially up to MaxInterval, and output resets the backoff: a program
// that has just printed something (a prompt) is the one most likely to wait
// next. No look is taken while output is flowing: the tracker waits for
// Quiet of silence first.
//
// # What proves a wait
//
// A probe is conclusive when no input is pending, a member of the
// foreground group is blocked reading the terminal, and every byte written
// before that was delivered (Drained). Two conclusive probes in a row, Quiet
// apart with no output between, make a proof: a task preempted on its way
// out of a read looks, for a moment, like one blocked in it.
//
// # Messages and goroutines
//
// The tracker sends *Tick to its owner through the send function given to
// New, from a time.AfterFunc timer; the owner hands each Tick back to
// Tracker.Tick and each *ptyproc.Probe to Tracker.Probe. A Tracker is used
// from its owner's Receive only (it is not safe for concurrent use). Stop
// stops the timer; a Tick or Probe that arrives after Stop or from an older
// episode is recognised and ignored.
package waitproof
