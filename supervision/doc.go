// Package supervision gives protoactor actors OTP-style supervision: restart
// types, a restart intensity within a period, backoff between restarts, and
// escalation past the limit. It is built on protoactor's public
// [actor.SupervisorStrategy] interface. (protoactor's own one-for-one
// strategy stops a child past its limit instead of escalating, has no
// restart types and no backoff, and its statistics keep every failure time
// until the limit is reached.)
//
// # How the restart types map onto protoactor
//
// A failure is a panic in the child. protoactor's mailbox recovers it,
// suspends the child's mailbox and hands the panic value (the reason) to the
// parent's strategy, which answers with a directive. A restart keeps the
// child's PID: the old instance receives *actor.Restarting, a new one
// *actor.Started, and the message that panicked is lost. Messages sent
// meanwhile wait in the suspended mailbox, also during a backoff delay.
//
//   - Permanent and Transient children are restarted when the decider says
//     Restart; Temporary children are stopped instead.
//   - A child that stops without failing sends its parent *actor.Terminated,
//     and only the parent can spawn a replacement. [Strategy.ChildTerminated]
//     says whether to: yes for a Permanent child the supervisor did not stop
//     itself, no otherwise.
//   - A failure that says it is expected (see [Expected]: a shell reset
//     after a timeout or an exit is the protocol working) is restarted at
//     once, with no backoff, and not counted.
//   - Any other failure that would make more than MaxRestarts restarts within the
//     period Within stops the child, and with [Escalate] the supervisor
//     fails too, so that its own supervisor decides (OTP's default); with
//     [StopChild] the supervisor carries on without the child.
//
// # Using a Strategy
//
// A supervisor actor owns a Strategy and implements
// [actor.SupervisorStrategy] by passing every failure to it; protoactor then
// hands it its children's failures (and the Strategy's own delayed restarts,
// which come back as failures). It tells the strategy about stops:
//
//	type host struct{ strategy *supervision.Strategy }
//
//	func (h *host) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID,
//		rs *actor.RestartStatistics, reason, msg any) {
//		h.strategy.HandleFailure(sys, sup, child, rs, reason, msg)
//	}
//
//	func (h *host) Receive(ctx actor.Context) {
//		switch msg := ctx.Message().(type) {
//		case *actor.Stopping, *actor.Restarting:
//			h.strategy.Stopping()
//		case *actor.Terminated:
//			if h.strategy.ChildTerminated(msg.Who) {
//				// spawn a replacement
//			}
//		case closeAgent:
//			h.strategy.StoppingChild(msg.pid)
//			ctx.Stop(msg.pid)
//		}
//	}
//
// Create the Strategy with the actor instance (in its producer), so that a
// restarted supervisor starts with a fresh one. Deciders built with
// [Decide] map typed errors to directives; [LogPanics] logs a panic with its
// stack before supervision sees it.
//
// # Going down
//
// Once [Strategy.Stopping] has been called, or [Strategy.StoppingChild] for a
// child, every failure of the child is answered with Stop. protoactor turns
// an actor that receives Restart while it is stopping into a restarting one,
// which never reports its termination.
//
// protoactor still hands a stopping or restarting actor its messages. A
// child spawned then is not among the children it stopped: it never stops,
// and neither does the supervisor. Ask [Strategy.MaySpawn] before spawning
// in answer to a message.
//
// No directive rescues an actor that panics while handling *actor.Stopping
// or *actor.Stopped: it is left half stopped and its parent never receives
// *actor.Terminated. [LogPanics] logs such panics and does not pass them on.
//
// # Goroutines
//
// A Strategy starts no goroutine of its own. A restart delayed by a backoff
// is a [time.AfterFunc] timer, which is not a goroutine until it fires. Its
// function sends the supervisor a system message and returns; the
// supervisor then sends the Restart from its own goroutine, in order with
// the stops it handles there. (A dispatcher that runs actors on the sending
// goroutine, such as protoactor's synchronized one, runs that work on the
// timer's goroutine before its function returns.) The timer is stopped when
// the child terminates ([Strategy.ChildTerminated]), is stopped on purpose
// ([Strategy.StoppingChild]) or the supervisor goes down
// ([Strategy.Stopping]); a restart that comes due after that is dropped.
//
// # Concurrency
//
// A Strategy's methods may be called from any goroutine, and no lock is
// held while protoactor or a caller's function runs. Stopping, StoppingChild
// and ChildTerminated order correctly with delayed restarts when they are
// called from the supervisor's Receive, as above. Decisions are published on
// the system's event stream, whose handlers run synchronously on the
// supervisor's goroutine, as does the [Strategy.OnDecision] function: they
// must not block.
package supervision
