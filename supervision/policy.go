package supervision

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// RestartType says whether a child is brought back after it fails or stops,
// with the meaning OTP gives the names.
type RestartType int

const (
	// Permanent children are restarted after a failure and respawned after
	// they stop without failing.
	Permanent RestartType = iota
	// Transient children are restarted after a failure and left stopped
	// after they stop without failing.
	Transient
	// Temporary children are never brought back: a Restart decision for
	// them becomes Stop.
	Temporary
)

func (r RestartType) String() string {
	switch r {
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	case Temporary:
		return "temporary"
	}
	return fmt.Sprintf("RestartType(%d)", int(r))
}

// LimitAction is what a [Strategy] does with a failure that would take a
// child past MaxRestarts within the period.
type LimitAction int

const (
	// Escalate stops the child and fails the supervisor itself (through
	// [actor.Supervisor.EscalateFailure]), so that the supervisor's own
	// supervisor decides. This is OTP's behaviour and the default.
	Escalate LimitAction = iota
	// StopChild stops the child and leaves it stopped; the supervisor carries
	// on. For supervisors that must never fail, such as a host.
	StopChild
)

func (a LimitAction) String() string {
	switch a {
	case Escalate:
		return "escalate"
	case StopChild:
		return "stop child"
	}
	return fmt.Sprintf("LimitAction(%d)", int(a))
}

// Defaults for the zero values of [Policy.MaxRestarts] and [Policy.Within]:
// OTP's default intensity and period, one restart in five seconds.
const (
	DefaultMaxRestarts = 1
	DefaultWithin      = 5 * time.Second
)

// Policy is how a [Strategy] treats one child. The zero Policy is a
// Permanent child, restarted at once on any failure, at most once in five
// seconds, escalating past that.
type Policy struct {
	// Restart is the child's restart type.
	Restart RestartType

	// MaxRestarts is how many restarts the child may have within the
	// period Within; the failure after that is handled by OnLimit. Zero
	// means DefaultMaxRestarts. To never restart a child, make it Temporary.
	MaxRestarts int
	// Within is the period over which restarts are counted. Zero means
	// DefaultWithin.
	Within time.Duration

	// Backoff delays restarts. The zero Backoff restarts at once.
	Backoff Backoff

	// Decider maps a failure (the value the child panicked with) to a
	// directive. Nil restarts on every failure. See [Decide].
	Decider actor.DeciderFunc

	// OnLimit is what happens to a failure past MaxRestarts within Within.
	OnLimit LimitAction
}

// Backoff spaces out restarts of a child that keeps failing. The n-th restart
// in the current period waits min(Min·2ⁿ⁻¹, Max), shortened by a random
// fraction of itself below Jitter.
type Backoff struct {
	// Min is the delay before the first restart in a period. Zero restarts
	// at once, whatever Max and Jitter say.
	Min time.Duration
	// Max caps the delay. Zero means no cap.
	Max time.Duration
	// Jitter, between 0 and 1, is the largest fraction by which a delay is
	// shortened at random, so that siblings that fail together do not
	// restart together. Zero gives exact delays.
	Jitter float64
}

// Delay returns the delay before the n-th restart in a period (n counts
// from 1). It is zero when Min is zero or n is less than 1.
func (b Backoff) Delay(n int) time.Duration {
	if b.Min <= 0 || n < 1 {
		return 0
	}
	d := b.Min
	for i := 1; i < n && (b.Max <= 0 || d < b.Max); i++ {
		if d > math.MaxInt64/2 {
			d = math.MaxInt64
			break
		}
		d *= 2
	}
	if b.Max > 0 && d > b.Max {
		d = b.Max
	}
	if b.Jitter > 0 {
		d -= time.Duration(float64(d) * b.Jitter * rand.Float64())
	}
	return d
}

// A PolicyError reports a [Policy] field whose value breaks a rule.
type PolicyError struct {
	Field string // the field's name, as in "Backoff.Jitter"
	Value any    // the value it has
	Rule  string // the rule it breaks
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("supervision: Policy.%s is %v: %s", e.Field, e.Value, e.Rule)
}

// Validate reports every field of p that breaks a rule, as [*PolicyError]
// values joined with [errors.Join]; nil if there is none.
func (p Policy) Validate() error {
	var errs []error
	bad := func(field string, value any, rule string) {
		errs = append(errs, &PolicyError{Field: field, Value: value, Rule: rule})
	}
	if p.Restart < Permanent || p.Restart > Temporary {
		bad("Restart", int(p.Restart), "must be Permanent, Transient or Temporary")
	}
	if p.MaxRestarts < 0 {
		bad("MaxRestarts", p.MaxRestarts, "must not be negative (zero means the default, 1)")
	}
	if p.Within < 0 {
		bad("Within", p.Within, "must not be negative (zero means the default, 5s)")
	}
	if p.Backoff.Min < 0 {
		bad("Backoff.Min", p.Backoff.Min, "must not be negative")
	}
	if p.Backoff.Max < 0 {
		bad("Backoff.Max", p.Backoff.Max, "must not be negative")
	} else if p.Backoff.Max > 0 && p.Backoff.Max < p.Backoff.Min {
		bad("Backoff.Max", p.Backoff.Max, fmt.Sprintf("must be zero (no cap) or at least Backoff.Min (%v)", p.Backoff.Min))
	}
	if !(p.Backoff.Jitter >= 0 && p.Backoff.Jitter <= 1) {
		bad("Backoff.Jitter", p.Backoff.Jitter, "must be between 0 and 1")
	}
	if p.OnLimit < Escalate || p.OnLimit > StopChild {
		bad("OnLimit", int(p.OnLimit), "must be Escalate or StopChild")
	}
	return errors.Join(errs...)
}

func (p Policy) maxRestarts() int {
	if p.MaxRestarts == 0 {
		return DefaultMaxRestarts
	}
	return p.MaxRestarts
}

func (p Policy) within() time.Duration {
	if p.Within == 0 {
		return DefaultWithin
	}
	return p.Within
}

func (p Policy) decide(reason any) actor.Directive {
	if p.Decider == nil {
		return actor.RestartDirective
	}
	return p.Decider(reason)
}
