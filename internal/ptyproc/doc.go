// Package ptyproc runs one program in a new session on a pseudo-terminal and
// reports what happens to it as messages, so that an actor can own it without
// ever blocking in Receive. The shell and terminal actors are both built on it.
//
// # Messages
//
// Start takes a deliver function (for an actor: a Send to itself) and calls it
// with:
//
//   - *Output: bytes the program wrote. The chunk's buffer is lent to the
//     receiver; call Release when done with it. At most [Credits] chunks are
//     outstanding at any time, so a program that floods the terminal cannot
//     fill a mailbox: the reader stops reading until a chunk is released and
//     the kernel then makes the program wait (flow control, not loss).
//   - *OutputClosed: the reader stopped; in practice only on errors, since the
//     Process keeps a slave descriptor of its own open (for the input-pending
//     check) and the master therefore never reads EIO. Exited reports the end.
//   - *Exited: the program the process was started with has exited. Other
//     members of its session may live on; Close kills them.
//   - *Probe: the answer to [Process.ProbeWait]: whether the terminal's
//     foreground process group is proven blocked reading the terminal, and
//     whether all output written before that moment has already been delivered.
//
// Every message carries the *Process it came from, so a receiver that has
// replaced its process can recognise and drop stale messages.
//
// # Goroutines
//
// A Process owns a reader goroutine (parked in the runtime poller, since the
// master is non-blocking), a waiter goroutine (in os/exec's Wait), a writer
// goroutine that only works when a write would block, and one short goroutine
// per ProbeWait call. Close ends all of them and returns only when they have
// returned: it kills every member of the session and everything that left it
// (see [MarkVariable]), reaps the program, closes the master and joins the
// goroutines.
//
// # Why the master is duplicated
//
// creack/pty returns a blocking master on which deadlines are ignored and
// Close does not wake a blocked Read. Start duplicates the descriptor, closes
// the original and makes the duplicate non-blocking, so the runtime poller
// parks the reader and Close wakes it; every ioctl then goes through
// SyscallConn().Control so the descriptor is never switched back to blocking.
package ptyproc
