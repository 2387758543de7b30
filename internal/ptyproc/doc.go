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
//   - *Exited: the program the process was started with has exited; all it
//     wrote was delivered before. Other members of its session may live on;
//     Close kills them.
//   - *Flushed: the answer to [Process.FlushThenWrite]: every chunk before it
//     was read before the input was written.
//   - *Probe: the answer to [Process.Probe]: the foreground process group,
//     what the session leader is doing (/proc/PID/syscall), whether the
//     group is proven blocked reading the terminal, and whether all output
//     written before the look was delivered before the answer.
//
// Every message carries the *Process it came from, so a receiver that has
// replaced its process can recognise and drop stale messages.
//
// # One reader
//
// The reader goroutine is the only one that reads the master. Flushes,
// probes and the exit are requests it serves between reads, after
// delivering what the terminal holds, so the order of the messages is the
// order of events: no caller reads on the side, and no lock orders reads
// against deliveries. A request made while the reader delivers (by a
// receiver running on its goroutine) is served before it parks again;
// otherwise the request wakes it with a read deadline in the past.
//
// # Goroutines
//
// A Process owns a reader goroutine (parked in the runtime poller, since the
// master is non-blocking), a waiter goroutine (in os/exec's Wait) and a
// writer goroutine that only works when a write would block. Close ends all
// of them and returns only when they have returned: it kills every member of
// the session and everything that left it (see [MarkVariable]), reaps the
// program, wakes the reader and the writer, joins them and only then closes
// the descriptors they use.
//
// # Why the master is duplicated
//
// creack/pty returns a blocking master on which deadlines are ignored and
// Close does not wake a blocked Read. Start duplicates the descriptor, closes
// the original and makes the duplicate non-blocking, so the runtime poller
// parks the reader and Close wakes it; every ioctl then goes through
// SyscallConn().Control so the descriptor is never switched back to blocking.
package ptyproc
