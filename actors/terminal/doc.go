// Package terminal is one PTY session per actor and the six terminal_*
// tools (plus terminal_resize): a program on a pseudo-terminal of its own,
// typed into, read from, signalled, resized and closed by the agent that
// opened it.
//
// # Readiness
//
// A wait (after terminal_open, terminal_send, or terminal_read with wait_ms)
// ends with a reason (a terminal_read with wait_for "output" also ends once
// new output pauses, as running):
//
//   - prompt: the interactive bash that terminal_open starts by default
//     printed its prompt marker (an invisible in-band marker from
//     PROMPT_COMMAND, exported so a nested bash shows it too, removed from
//     the output);
//   - stdin_read: a member of the foreground process group is proven blocked
//     reading the terminal with no input pending (see internal/waitproof);
//   - inferred_idle: a guess, said so, after idleSilenceMs of silence: the
//     program waits in a way /proc cannot see into (epoll); or the call gave
//     no wait_ms and the program is quiet, using no processor time and not
//     reading the terminal (a server waiting for connections, a sleep): the
//     default wait is not spent on a program that may stay so for ever;
//   - timeout: the wait's bound passed; the program may still be working;
//   - exited: the program ended; its status comes with it.
//
// A result that waited for nothing (wait_ms 0, a signal, a resize) says
// running. A background task that task_kill stops ends prompt or stdin_read
// only on proof that its program took the signal and is back at its input
// with nothing of the task's text left (see taskKill); unknown when the
// program came back reading without a word; killed when not even SIGKILL
// brought it back. The set is closed: ReadyReason.
//
// A background task types its text a piece at a time, the next once the
// program has read the last (see taskFeed), so that a kill has little to
// take back.
//
// # The send reservation
//
// A terminal has at most one holder: a foreground send for as long as it
// waits, or a background task until the program is ready again. A second
// send is answered at once with a busy error that names the holder and
// since when; keystrokes are never interleaved. Signals, resizes and
// history pages need no reservation; a read of unread output is refused
// while the terminal is held, since what the program prints then is the
// holder's.
//
// # Output and results
//
// Output is kept in a bounded history (historyBytes) addressed by absolute
// byte offsets, with "\r\n" stored as "\n". Every result is fitted to
// maxResultBytes with its metadata whole: the latest output is kept (or, for
// a history page, the first), cut on a character boundary, with a marker that
// says how to read what was left out. The structured fields (terminal_id,
// ready_reason, running, exit_status, and the offsets of the output shown)
// travel as the result's data.
//
// Every byte goes to exactly one result: a read cursor marks where the next
// result of unread output starts, and it never moves past the first bytes
// of a character still being written. A call withdrawn after it was
// answered (its caller had gone) gives its bytes back: the cursor moves back
// when nothing was taken since, or the next results name the bytes and how
// to page them (LostOutput). The last answers are remembered for this
// (answeredKept).
//
// # Messages
//
// From the agent: Open, Send, Read, Signal, Resize, Close (each answered
// with a *messages.ToolResult to its sender) and Describe (answered with an
// *Info). From a background task: Reserve (answered with *Reserved or
// *Busy), Interrupt and Release; to it, *TaskEvent. From its process and
// timers: the ptyproc messages, *waitproof.Tick, and its own deadline,
// grace, feed and kill ticks. Anything else is logged as unexpected.
//
// # Lifetime and goroutines
//
// A terminal whose program exits is not resurrected: its id answers
// "exited" with the final output until terminal_close, which sends SIGHUP,
// waits killGraceMs for the program, answers, and stops the actor; the
// Reaper then kills whatever is left of the session. The actor starts no
// goroutine itself; its ptyproc.Process runs a reader, a waiter, a writer
// and short probe goroutines, all ended by the Reaper. Its timers are
// time.AfterFunc timers, stopped when their wait ends.
package terminal
