package terminal

import (
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/ptyproc"
)

// Messages from the agent. Each answers its sender with a
// *messages.ToolResult.
type (
	// Open asks for the first screen once the program is ready. The agent
	// sends it right after spawning the terminal.
	Open struct{ CallID string }
	// Send types input and waits for readiness (foreground send).
	Send struct {
		CallID string
		Input  []byte
		Wait   time.Duration
		// Settle: the call gave no wait of its own, so the wait also ends
		// once the program is quiet (see settles).
		Settle bool
	}
	// Read returns unread output, or a page of the history.
	Read struct {
		CallID string
		Args   ReadArgs
	}
	// Signal sends a signal to the foreground process group.
	Signal struct {
		CallID string
		Sig    syscall.Signal
	}
	// Resize sets the window size.
	Resize struct {
		CallID     string
		Cols, Rows int
	}
	// Close ends the session and everything in it; the terminal actor stops
	// after answering.
	Close struct{ CallID string }
	// Cancel withdraws a call whose caller is gone: its wait ends with no
	// answer and it holds nothing afterwards (a send's reservation is
	// released; an open nobody saw closes the terminal). Unknown ids are
	// ignored.
	Cancel struct{ CallID string }
)

// Describe asks for an *Info (terminal_list); Tag comes back in it.
type Describe struct{ Tag string }

// Info describes a terminal for terminal_list.
type Info struct {
	// Tag is Describe's.
	Tag     string `json:"-"`
	ID      string `json:"terminal_id"`
	Command string `json:"command"`
	Running bool   `json:"running"`
	// ExitStatus is set once the program has exited.
	ExitStatus *ptyproc.ExitStatus `json:"-"`
	// Foreground is the command of the foreground process group.
	Foreground string `json:"foreground,omitempty"`
	// LastReady is the reason of the last readiness the terminal reported.
	LastReady ReadyReason `json:"last_ready,omitempty"`
	// Holder is who holds the send reservation, if anyone.
	Holder      string    `json:"reserved_by,omitempty"`
	HolderSince time.Time `json:"-"`
}

// Messages between a background task and its terminal.
type (
	// Reserve takes the send reservation for a background task, types the
	// input and streams what follows to Subscriber as *TaskEvent. The answer
	// is *Reserved or *Busy.
	Reserve struct {
		TaskID string
		// CallID is the background send's: a Cancel of it after the answer
		// says that the output the answer carried reached nobody.
		CallID     string
		Input      []byte
		Subscriber *actor.PID
	}
	// Reserved: the task holds the terminal; its output starts at Offset.
	// Text and Data are the background send's result: the output nobody
	// had read before the task began (it is not the task's), and the task's
	// id, together within maxResultBytes.
	Reserved struct {
		Offset int64
		Text   string
		Data   []byte
	}
	// Busy: someone else holds the terminal (a reservation conflict), or
	// its program has exited.
	Busy struct {
		Reason string
		Exited bool
	}
	// TaskEvent carries a task's output and, at the end, why it is done.
	// Done events release the reservation.
	TaskEvent struct {
		TaskID string
		Output []byte
		Done   bool
		Ready  Readiness
	}
	// Interrupt sends a signal to the foreground group for a task.
	Interrupt struct {
		TaskID string
		Sig    syscall.Signal
	}
	// Release gives up a task's reservation without waiting for readiness.
	Release struct{ TaskID string }
)

// Readiness is why a wait ended.
type Readiness struct {
	// Reason is one of the ReadyReason values below.
	Reason ReadyReason
	// Detail says more: who waits for input, how long it was silent, the
	// exit status.
	Detail string
	// Exit is set for ReadyExited.
	Exit *ptyproc.ExitStatus
}

// ReadyReason is why a wait ended, or what state a result describes: a
// closed set, shown to the model and in results' data as ready_reason.
type ReadyReason string

const (
	// ReadyPrompt: the default bash printed its prompt marker.
	ReadyPrompt ReadyReason = "prompt"
	// ReadyStdin: the foreground program is proven blocked reading the
	// terminal.
	ReadyStdin ReadyReason = "stdin_read"
	// ReadyIdle: a wait /proc cannot see into, after idleSilenceMs of
	// silence: a guess.
	ReadyIdle ReadyReason = "inferred_idle"
	// ReadyTimeout: the wait's bound passed; the program may be working.
	ReadyTimeout ReadyReason = "timeout"
	// ReadyExited: the program ended.
	ReadyExited ReadyReason = "exited"
	// ReadyRunning: nothing was waited for (a read with wait_ms 0, a
	// signal, a resize) and the program is not known to be idle.
	ReadyRunning ReadyReason = "running"
	// ReadyUnknown: task_kill's signal was taken and the program is
	// reading the terminal again, but it printed nothing since, so
	// whether it acted on the signal (and what its line editor holds) is
	// not known.
	ReadyUnknown ReadyReason = "unknown"
	// ReadyKilled: task_kill went through SIGKILL and the terminal still
	// did not become ready; the task let go of it.
	ReadyKilled ReadyReason = "killed"
)
