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
// See protocol.go. The command text is typed as it is, on a terminal in
// literal input mode, one line at a time: a line is typed when bash, proven
// back at its prompt, has answered the one before. bash prints the
// completion marker itself, as its prompt (PS1): its command number, $? and
// checks that the prompts are ours; PS2 marks a continuation. Nothing of the
// protocol runs as a shell command on the usual path, so a command that
// redefines or disables builtins, sets traps, xtrace, readline modes or
// unsets variables meets its own commands only, and a command that reads
// its input cannot swallow the lines after it. Like a script, the text stops
// at a line bash could not run (a syntax error), and the result names the
// lines that were not run.
//
// # Completion is proven, not announced
//
// Anyone can print a marker. An exchange ends only on a probe taken after
// every byte before it was delivered (ptyproc.Probe) that shows bash blocked
// in one of its own input reads, learned at start-up (see promptSigs), with
// the input read. Then the markers since the line was typed are counted:
// exactly one, PS1 or PS2, with a command number bash can be at. Any other
// count makes the status unknown, never a forger's, and nothing more of the
// text is typed.
//
// When bash is back at its prompt with no marker of ours (a command changed
// PS1, PS2, promptvars or stderr), a status query, a read-only function
// defined at start-up and called with a fresh token, reports $? and the
// prompt state on the terminal itself and makes the prompts ours again where
// it can; while PS1 cannot be made ours, every line ends with that query.
// The query's line is a group with its output to /dev/null (a DEBUG trap
// runs for it too), and it sets PROMPT_COMMAND aside for its own prompt,
// which is the runtime's doing, not the user's. While shopt extdebug may
// be on (the marker's length of BASHOPTS changed, or the query last found
// it on), every line ends with the query too: a DEBUG trap that returns
// non-zero makes bash skip commands, and one that skips the query leaves
// nothing typed able to reach bash; the call says so and the shell is
// reset.
// While PS2 is not ours, text is typed as one eval line instead. When bash
// waits for the rest of an incomplete text, SIGINT cancels it, as Ctrl-C
// would. A line that bash never answered (its command number did not move)
// was a syntax error, unless another program in bash's process group was
// reading the terminal (set +m; cat /dev/tty &): then it took the line, and
// the result says so with no status.
//
// # Results
//
// The text is the command's output (stdout and stderr together, as a
// terminal shows them), then:
//
//   - "[exit code: N]" when the status is not zero;
//   - "[output clipped: ...]" when more than maxOutputChars characters came;
//     the beginning is kept, cut on a character boundary, and the notice
//     says when it cut a line; invalid UTF-8 becomes U+FFFD and NUL U+2400;
//   - "[shell exited: code N]", "[shell killed by signal: SIG]" or
//     "[shell exited]" when bash itself ended, with a note that the next call
//     starts a fresh shell;
//   - a timeout note after timeoutMs (or the call's smaller timeout_ms): the
//     partial output is kept, the whole session is killed, the next call
//     starts fresh;
//   - a waiting-for-input note when a program is proven blocked reading the
//     terminal (see internal/procfs) and no marker came: the call returns
//     early with the output so far. The next call reports it if it ended by
//     itself meanwhile; otherwise it first stops that program (SIGINT,
//     end-of-file, then SIGTERM and SIGKILL to the foreground job) and says
//     what it did; only a program that survives all of it, or bash itself
//     waiting, costs the shell.
//
// Output that background jobs print between calls opens the next result
// under "[output since the previous call]", in whole lines (a line cut by the
// start of the call goes on in the call's own output), also when the shell
// died meanwhile. Every byte is in exactly one result, in order, or counted
// in a notice where it was dropped. Job-control notices are bash's own
// output and are kept.
//
// # Messages
//
// Run (answered with a *messages.ToolResult to the sender), Cancel and Peek
// (how a running call is getting on, for progress reports; answered with a
// *Peeked) come from the agent. From its ptyproc.Process it gets *ptyproc.Output,
// *ptyproc.Flushed, *ptyproc.Probe, *ptyproc.Exited and
// *ptyproc.OutputClosed; from its own timers, tick messages; from the
// host's admission gate (Options.Gate), admitted. Any other message is
// logged as unexpected.
//
// # Taking turns
//
// A call takes a ticket at the host's gate before anything is typed or a
// shell is started for it (package admission): with the gate full, it waits
// its turn, first come first served, and its timeout runs meanwhile. A call
// that times out or is cancelled while it waits is answered without touching
// the shell. The ticket is given back when the call is answered, and stays
// with a call that a reset puts back in the queue.
//
// # Failure and restart
//
// A cancelled call is Ctrl-C, not a reset (withdraw.go): its command gets
// SIGINT, and its result opens the next call's.
//
// A timeout, a shell that exits, a program that cannot be stopped and a
// protocol that cannot be repaired all end the shell: the
// actor answers the call, hands the process to the Reaper and panics with a
// *ResetError. Its supervisor (the agent) restarts it in place; the calls
// still waiting in its queue survive the restart, and the next one starts a
// fresh bash (never the one being reset: the next call starts only after the
// message that answered the last one is handled). Any other panic answers
// the call in flight with an internal error.
//
// # Goroutines
//
// The actor starts none itself. Its ptyproc.Process runs a reader, a waiter
// and a writer goroutine; the Reaper ends them in the background when the
// shell is thrown away. Timers (probe backoff, call timeout, interrupt and
// start-up steps) are time.AfterFunc timers, stopped when the call ends or
// the shell is thrown away; one that fires late is recognised by its number
// and ignored.
package shell
