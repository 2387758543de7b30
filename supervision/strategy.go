package supervision

import (
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A Strategy is an [actor.SupervisorStrategy] that treats each child of one
// supervisor actor by a [Policy]: restart types, restart intensity within a
// period, backoff, and escalation past the limit. The package documentation
// shows how a supervisor uses it.
//
// A Strategy belongs to one incarnation of one supervisor: create it with
// the actor instance, not once for all its restarts. Its methods are safe
// for concurrent use; see the package documentation for the order in which
// a supervisor calls them.
type Strategy struct {
	now func() time.Time // time.Now, except in tests

	mu       sync.Mutex
	policy   Policy // for children without a policy of their own
	children map[childKey]*child
	stopping bool // Stopping was called
	hook     func(Decision)
	tokens   uint64 // the last token given to a delayed restart
}

var _ actor.SupervisorStrategy = (*Strategy)(nil)

// childKey identifies a child. PIDs are compared by value: the *actor.PID in
// a Failure and the one in a Terminated need not be the same pointer.
type childKey struct{ address, id string }

func keyOf(pid *actor.PID) childKey {
	if pid == nil {
		return childKey{}
	}
	return childKey{pid.GetAddress(), pid.GetId()}
}

// child is what a Strategy remembers of one child between its spawn and its
// termination. Guarded by Strategy.mu.
type child struct {
	policy   Policy
	failures []time.Time // restarts counted in the current period, oldest first
	stopped  bool        // stopped on purpose or by a decision: never brought back
	// A delayed restart: its token (zero if there is none), and its timer
	// until it fires.
	due   uint64
	timer *time.Timer
}

func (c *child) cancelRestart() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.due = 0
}

// fail records a failure at now, forgets those that left the period, and
// returns how many remain, this one included.
func (c *child) fail(now time.Time, within time.Duration) int {
	cutoff := now.Add(-within)
	kept := c.failures[:0]
	for _, t := range c.failures {
		if t.After(cutoff) {
			kept = append(kept, t)
		}
	}
	c.failures = append(kept, now)
	return len(c.failures)
}

// A Decision is what a Strategy did about one failure. It is passed to the
// function given to [Strategy.OnDecision].
type Decision struct {
	Child     *actor.PID
	Reason    any             // the value the child panicked with
	Directive actor.Directive // what was done: Resume, Restart, Stop or Escalate
	// Failures is the number of the child's failures counted in the
	// current period, this one included, for a failure that counts toward
	// the limit (the decider said Restart and the child is not Temporary);
	// zero otherwise.
	Failures int
	// Delay is how long the restart waits for the backoff; zero otherwise.
	Delay time.Duration
}

// New returns a Strategy that applies p to every child that has no policy of
// its own. It returns p's validation error, if any.
func New(p Policy) (*Strategy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Strategy{now: time.Now, policy: p, children: make(map[childKey]*child)}, nil
}

// SetPolicy gives pid a policy of its own, replacing the default. Call it
// right after spawning the child, in the same Receive: the child's failures
// reach the supervisor only after that Receive returns. The policy is
// forgotten when [Strategy.ChildTerminated] is called for pid.
func (s *Strategy) SetPolicy(pid *actor.PID, p Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.child(pid).policy = p
	return nil
}

// OnDecision makes f be called with every decision, on the supervisor's
// goroutine, after the decision is published on the event stream and before
// it is carried out. f must not block. It replaces any earlier function.
func (s *Strategy) OnDecision(f func(Decision)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = f
}

// StoppingChild tells s that the supervisor is stopping pid on purpose, so
// that [Strategy.ChildTerminated] will not ask for a respawn. A restart of pid
// waiting for its backoff is cancelled. Call it before stopping the child.
func (s *Strategy) StoppingChild(pid *actor.PID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.child(pid)
	c.stopped = true
	c.cancelRestart()
}

// Stopping tells s that its supervisor is stopping or restarting, which stops
// all its children. Call it when the supervisor receives *actor.Stopping or
// *actor.Restarting. Restarts waiting for their backoff are cancelled before
// Stopping returns; from then on every failure is answered with Stop and
// [Strategy.ChildTerminated] asks for no respawn.
func (s *Strategy) Stopping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	for _, c := range s.children {
		c.cancelRestart()
	}
}

// MaySpawn reports whether the supervisor may spawn a child: not once
// [Strategy.Stopping] was called. protoactor still hands a stopping or
// restarting actor its messages, and a child spawned then was not among the
// children it stopped: it never stops, and neither does its parent (a host's
// Stop timed out with agents and their shells left running).
func (s *Strategy) MaySpawn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.stopping
}

// ChildTerminated tells s that pid has terminated, and reports whether the
// supervisor should spawn a replacement: only for a Permanent child that
// stopped without the supervisor, a decision of s, or [Strategy.Stopping]
// asking it to. Call it when the supervisor receives *actor.Terminated for a
// child. s forgets pid, its policy and its failures; a replacement is a new
// child with a new PID, whose restarts are counted afresh.
func (s *Strategy) ChildTerminated(pid *actor.PID) (respawn bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(pid)
	c, ok := s.children[k]
	if !ok {
		return !s.stopping && s.policy.Restart == Permanent
	}
	delete(s.children, k)
	c.cancelRestart()
	return !s.stopping && !c.stopped && c.policy.Restart == Permanent
}

// HandleFailure implements [actor.SupervisorStrategy]. protoactor calls it
// on the supervisor's goroutine when a child panicked. The child's mailbox
// is suspended until the directive is carried out:
//
//   - Resume: the child carries on with its next message.
//   - Restart: the child is restarted in place (same PID), at once or after
//     the backoff delay.
//   - Stop: the child is stopped and not brought back.
//   - Escalate: the child is stopped and the supervisor fails with the same
//     reason, for its own supervisor to decide.
//
// Each decision is published as an [actor.SupervisorEvent] on system's
// event stream, as protoactor's own strategies do, and passed to the
// [Strategy.OnDecision] function. The restart statistics protoactor passes
// are not used: s keeps its own, trimmed to the period.
//
// When a backoff delay ends, s sends the supervisor an *actor.Failure of its
// own making, which protoactor hands back to HandleFailure on the
// supervisor's goroutine; the restart is sent from there. A supervisor must
// therefore pass every failure it receives to s, as a plain delegation does.
func (s *Strategy) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, pid *actor.PID, _ *actor.RestartStatistics, reason, message any) {
	if due, ok := reason.(*restartDue); ok {
		if due.strategy == s && s.takeDue(pid, due.token) {
			supervisor.RestartChildren(pid)
		}
		return
	}
	d, hook := s.decide(pid, reason)
	system.EventStream.Publish(&actor.SupervisorEvent{Child: pid, Reason: d.Reason, Directive: d.Directive})
	if hook != nil {
		hook(d)
	}
	switch d.Directive {
	case actor.ResumeDirective:
		supervisor.ResumeChildren(pid)
	case actor.RestartDirective:
		if d.Delay > 0 {
			s.restartLater(system, supervisor, pid, d.Delay)
		} else {
			supervisor.RestartChildren(pid)
		}
	case actor.StopDirective:
		supervisor.StopChildren(pid)
	case actor.EscalateDirective:
		supervisor.StopChildren(pid)
		supervisor.EscalateFailure(d.Reason, message)
	}
}

// decide turns a failure into a Decision and records it.
func (s *Strategy) decide(pid *actor.PID, reason any) (Decision, func(Decision)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.child(pid)
	p := c.policy
	d := Decision{Child: pid, Reason: reason, Directive: p.decide(reason)}
	switch d.Directive {
	case actor.ResumeDirective, actor.StopDirective, actor.EscalateDirective:
	case actor.RestartDirective:
		if p.Restart == Temporary {
			d.Directive = actor.StopDirective
			break
		}
		if isExpected(reason) {
			// Part of the protocol (a shell reset after a timeout or an
			// exit): restarted at once, never counted against the budget
			// that catches crash loops.
			break
		}
		d.Failures = c.fail(s.now(), p.within())
		if d.Failures > p.maxRestarts() {
			d.Directive = actor.EscalateDirective
			if p.OnLimit == StopChild {
				d.Directive = actor.StopDirective
			}
			break
		}
		d.Delay = p.Backoff.Delay(d.Failures)
	default:
		d.Reason = fmt.Errorf("supervision: decider returned %v, which is not a directive, for failure: %v", d.Directive, reason)
		d.Directive = actor.EscalateDirective
	}
	if s.stopping || c.stopped {
		// Going down already. Restarting the child, or escalating so
		// that our own supervisor restarts us, would turn a stop into a
		// restart (see the package documentation).
		d.Directive, d.Failures, d.Delay = actor.StopDirective, 0, 0
	}
	if d.Directive == actor.StopDirective || d.Directive == actor.EscalateDirective {
		c.stopped = true
		c.failures = nil
		c.cancelRestart()
	}
	return d, s.hook
}

// restartDue is the reason of the *actor.Failure by which a Strategy's
// timer tells the supervisor that a delayed restart is due. Going through
// the supervisor's mailbox puts the restart on the supervisor's goroutine,
// in order with the Stopping, StoppingChild and Terminated it also handles
// there, and it lets the timer's function return without holding the
// strategy's lock while protoactor runs the restart (a dispatcher may run
// actors on the sending goroutine).
type restartDue struct {
	strategy *Strategy
	token    uint64
}

func (r *restartDue) String() string { return "supervision: a delayed restart is due" }

// restartLater restarts pid after delay unless, before the restart reaches
// the supervisor, pid is stopped or terminates, or the supervisor stops.
func (s *Strategy) restartLater(system *actor.ActorSystem, supervisor actor.Supervisor, pid *actor.PID, delay time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.children[keyOf(pid)]
	if !ok || c.stopped || s.stopping {
		return
	}
	c.cancelRestart()
	s.tokens++
	token := s.tokens
	c.due = token
	var self *actor.PID // nil for a supervisor that is no actor
	if a, ok := supervisor.(interface{ Self() *actor.PID }); ok {
		self = a.Self()
	}
	c.timer = time.AfterFunc(delay, func() {
		s.mu.Lock()
		fired := c.due == token && c.timer != nil
		if fired {
			c.timer = nil
		}
		s.mu.Unlock()
		switch {
		case !fired:
		case self != nil:
			// Handled by HandleFailure on the supervisor's goroutine.
			process, _ := system.ProcessRegistry.Get(self)
			process.SendSystemMessage(self, &actor.Failure{Who: pid, Reason: &restartDue{s, token}})
		case s.takeDue(pid, token):
			// A supervisor that is no actor, such as a guardian, which
			// never stops.
			supervisor.RestartChildren(pid)
		}
	})
}

// takeDue reports whether the delayed restart token of pid is still wanted,
// and if so marks it done.
func (s *Strategy) takeDue(pid *actor.PID, token uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.children[keyOf(pid)]
	if !ok || c.due != token || c.stopped || s.stopping {
		return false
	}
	c.due = 0
	return true
}

// child returns what s remembers of pid, creating it if needed. s.mu is held.
func (s *Strategy) child(pid *actor.PID) *child {
	k := keyOf(pid)
	c, ok := s.children[k]
	if !ok {
		c = &child{policy: s.policy}
		s.children[k] = c
	}
	return c
}
