// Package agent is the agent actor: the single entry of every tool call an
// agent makes, and the supervisor of the actors that carry them out.
//
// # Messages
//
//   - *messages.ToolCall: dispatched by tool name. The arguments are checked
//     here; bad ones, and unknown tools, are answered at once with an error
//     result naming what was wrong. A bash call goes to the agent's shell
//     (spawned on first use) with the caller as sender, so the shell answers
//     the caller directly.
//   - *messages.CancelCall: passed to the children that may hold the call.
//   - *actor.Terminated: a child is gone; a shell is spawned afresh on the
//     next call.
//   - The session protocol: *BeginTurn, *PrepareStep, *Record and *Inject,
//     answered with *TurnBegun, *StepPrepared and *Recorded. They run one
//     at a time, in order, on the agent's session goroutine (appends wait
//     for a disk sync; listeners run programs), never in Receive.
//
// Any other message is logged as unexpected.
//
// # Supervision
//
// The agent implements actor.SupervisorStrategy through a
// supervision.Strategy. Its shell is Transient and is restarted after every
// reset (DefaultShellPolicy), which is not counted as a failure; a shell
// actor that panics more than 100 times in 10 s escalates to the agent's own
// supervisor, the host.
//
// Calls go to the child that does the work with the agent as the sender,
// and the child's answer comes back through the agent (Actor.forward). So
// a call is answered exactly once whatever happens to the child: protoactor
// drops the messages left in a stopped actor's mailbox, and the agent then
// answers those calls with an error; when the agent itself stops or
// restarts, it answers every call still out.
//
// # Goroutines
//
// One, started at the first session message: the session goroutine, which
// runs the session protocol and the pre-step listeners. Stopping or
// restarting the agent cancels its context and answers the requests still
// queued with ErrStopping, without waiting: the goroutine ends after the
// request it is on, and the agent's Reaper, which its owner waits for,
// counts it. The timers (terminal_list's bound) are time.AfterFunc timers that
// send the agent a message. The processes of its children are killed
// by the Reaper in Options, which the agent's owner waits for after
// stopping it.
package agent
