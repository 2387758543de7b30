// Package shell is the persistent bash of an agent and its model-facing
// `bash` tool.
//
// One Actor owns one bash, started on the first call, in a pseudo-terminal
// and a session of its own. The working directory, exported variables,
// functions, activated environments and background jobs carry over from call
// to call. Calls run one at a time in the order they arrive.
//
// # The protocol with bash
//
// See protocol.go: commands go in as one escaped line, and a per-shell nonce
// marker with the sequence number and $? comes back from a read-only
// PROMPT_COMMAND, so a call is one round trip and nothing the command prints
// can pass for the marker. The prompt function re-asserts PS1 and PS2 before
// every prompt and hides itself from `set -x`.
//
// # Results
//
// The text is the command's output (stdout and stderr together, as a
// terminal shows them), then:
//
//   - "[exit code: N]" when the status is not zero;
//   - "[output clipped: ...]" when more than maxOutputChars characters came;
//     the beginning is kept, cut on a character boundary; invalid UTF-8
//     becomes U+FFFD and NUL becomes U+2400;
//   - "[shell exited: code N]", "[shell killed by signal: SIG]" or
//     "[shell exited]" when bash itself ended, with a note that the next call
//     starts a fresh shell;
//   - a timeout note after timeoutMs (or the call's smaller timeout_ms): the
//     partial output is kept, the whole session is killed, the next call
//     starts fresh;
//   - a waiting-for-input note when the foreground process is proven blocked
//     reading the terminal (see internal/procfs) and no marker came: the call
//     returns early with the output so far. The next call first interrupts
//     that program (SIGINT, then end-of-file, then a fresh shell if it still
//     waits) and says what it did.
//
// Output that background jobs print between calls is shown at the start of
// the next result under "[output since the previous call]". Job-control
// notices ("[1] 1234", "[1]+ Done ...") are bash's own output and are kept.
//
// # Messages
//
// Run (answered with a *messages.ToolResult to the sender) and Cancel come
// from the agent. From its ptyproc.Process it gets *ptyproc.Output,
// *ptyproc.Exited, *ptyproc.Probe and *ptyproc.OutputClosed; from its own
// timers, tick messages. Any other message is logged as unexpected.
//
// # Failure and restart
//
// A timeout, a cancelled call, a shell that exits and a program that will not
// stop waiting for input all end the shell: the actor answers the call,
// hands the process to the Reaper and panics with a *ResetError. Its
// supervisor (the agent) restarts it in place; the calls still waiting in
// its queue survive the restart, and the next one starts a fresh bash. Any
// other panic answers the call in flight with an internal error.
//
// # Goroutines
//
// The actor starts none itself. Its ptyproc.Process runs a reader, a waiter
// and a writer goroutine and one per /proc probe; the Reaper ends them in
// the background when the shell is thrown away. Timers (probe backoff, call
// timeout, interrupt steps) are time.AfterFunc timers, stopped when the call
// ends or the shell is thrown away; one that fires late is recognised by its
// call and sequence number and ignored.
package shell
