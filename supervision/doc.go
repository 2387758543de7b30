// Package supervision gives protoactor actors OTP-style supervision: restart
// types, a restart intensity within a period, backoff between restarts, and
// escalation past the limit. It is built on protoactor's public
// [actor.SupervisorStrategy] interface; protoactor's own one-for-one strategy
// stops a child past its limit instead of escalating, and never forgets old
// failures.
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
//   - More than MaxRestarts restarts within the period Within: the child is
//     stopped, and with [Escalate] the supervisor fails too, so that its own
//     supervisor decides (OTP's default); with [StopChild] the supervisor
//     carries on without the child.
//
// # Using a Strategy
//
// A supervisor actor owns a Strategy and implements
// [actor.SupervisorStrategy] by delegating to it; protoactor then hands it
// its children's failures. It tells the strategy about stops:
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
// No directive rescues an actor that panics while handling *actor.Stopping
// or *actor.Stopped: it is left half stopped and its parent never receives
// *actor.Terminated. [LogPanics] logs such panics and does not pass them on.
//
// # Goroutines
//
// A Strategy starts no goroutine of its own. A restart delayed by a backoff
// is a [time.AfterFunc] timer, which is not a goroutine until it fires; its
// function then sends the Restart system message and returns at once. The
// timer is stopped when the child terminates ([Strategy.ChildTerminated]), is
// stopped on purpose ([Strategy.StoppingChild]) or the supervisor goes down
// ([Strategy.Stopping]); a timer that fires after that sends nothing.
//
// # Concurrency
//
// A Strategy's methods may be called from any goroutine; protoactor calls
// HandleFailure on the supervisor's. Decisions are published on the
// system's event stream, whose handlers run synchronously on the publishing
// goroutine: they and the [Strategy.OnDecision] function must not block.
// A delayed restart is sent with the strategy's lock held; if the child is
// gone by then, protoactor publishes the message as a dead letter from that
// goroutine, so a handler of dead-letter events must not call the Strategy.
package supervision
