package shell

import "fmt"

// ResetReason says why a shell was thrown away.
type ResetReason int

const (
	// ResetTimeout: a command ran past its time limit.
	ResetTimeout ResetReason = iota + 1
	// ResetExited: bash itself ended (exit, exec into something that ended,
	// set -e, a signal).
	ResetExited
	// ResetCancelled: the caller withdrew a running call.
	ResetCancelled
	// ResetStuck: a command waiting for input ignored SIGINT and end-of-file.
	ResetStuck
	// ResetBroken: the shell could not be talked to (its terminal failed).
	ResetBroken
)

func (r ResetReason) String() string {
	switch r {
	case ResetTimeout:
		return "timeout"
	case ResetExited:
		return "exited"
	case ResetCancelled:
		return "cancelled"
	case ResetStuck:
		return "stuck"
	case ResetBroken:
		return "broken"
	}
	return fmt.Sprintf("ResetReason(%d)", int(r))
}

// ResetError is the failure a shell actor raises (as a panic, the way an
// actor fails in protoactor) after it has answered the call that ended its
// shell. The supervisor's decider maps it to a restart: the actor comes back
// with the same PID, no bash, and its queue of waiting calls intact; the next
// call starts a fresh bash.
type ResetError struct {
	Reason ResetReason
	// Detail is a short human explanation.
	Detail string
}

func (e *ResetError) Error() string {
	if e.Detail == "" {
		return "shell reset: " + e.Reason.String()
	}
	return "shell reset: " + e.Reason.String() + ": " + e.Detail
}

// ExpectedFailure tells the panic logger that this failure is part of the
// protocol, not a bug: it is logged without a stack.
func (e *ResetError) ExpectedFailure() bool { return true }

// ResetCause names the reason, for the metrics (metrics.ResetCauser).
func (e *ResetError) ResetCause() string { return e.Reason.String() }
