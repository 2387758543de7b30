package limits

import (
	"fmt"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// Kind is what a pool counts.
type Kind string

// The kinds a host counts.
const (
	Agents    Kind = "agents"
	Shells    Kind = "shells"
	Terminals Kind = "terminals"
	Tasks     Kind = "tasks"
)

// Kinds lists every kind, in a fixed order.
var Kinds = []Kind{Agents, Shells, Terminals, Tasks}

// what says what a kind's count is, for error texts: one, and more.
var what = map[Kind][2]string{
	Agents:    {"agent running", "agents running"},
	Shells:    {"bash shell running", "bash shells running"},
	Terminals: {"terminal open (exited ones count until closed)", "terminals open (exited ones count until closed)"},
	Tasks:     {"background task running", "background tasks running"},
}

// Pool counts one kind host-wide. The zero value is not usable; see New.
type Pool struct {
	kind  Kind
	max   int64 // 0: no limit
	inUse atomic.Int64
	// refused counts Takes turned down, for the metrics.
	refused atomic.Uint64
}

// NewPool makes a pool of kind with at most max in use; 0 means no limit.
func NewPool(kind Kind, max int) *Pool { return &Pool{kind: kind, max: int64(max)} }

// Kind is what the pool counts.
func (p *Pool) Kind() Kind { return p.kind }

// InUse is how many holds are out.
func (p *Pool) InUse() int64 { return p.inUse.Load() }

// Max is the limit; 0 means none.
func (p *Pool) Max() int64 { return p.max }

// Refused is how many Takes were turned down.
func (p *Pool) Refused() uint64 { return p.refused.Load() }

// Take takes one from the pool, or returns an *Error when the limit is
// reached. A nil pool has no limit and counts nothing.
func (p *Pool) Take() (*Hold, error) {
	if p == nil {
		return nil, nil
	}
	for {
		n := p.inUse.Load()
		if p.max > 0 && n >= p.max {
			p.refused.Add(1)
			return nil, &Error{Kind: p.kind, Max: p.max}
		}
		if p.inUse.CompareAndSwap(n, n+1) {
			return &Hold{pool: p}, nil
		}
	}
}

// Hold is one taken from a pool.
type Hold struct {
	pool     *Pool
	released atomic.Bool
}

// Release gives the hold back; later calls, and a nil hold, do nothing.
func (h *Hold) Release() {
	if h != nil && h.released.CompareAndSwap(false, true) {
		h.pool.inUse.Add(-1)
	}
}

// ReleaseOnStop is a props option that releases h when the actor has
// stopped, however it stopped.
func ReleaseOnStop(h *Hold) actor.PropsOption {
	return actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Stopped); ok {
				defer h.Release()
			}
			next(c, env)
		}
	})
}

// Error is a limit reached.
type Error struct {
	Kind Kind
	Max  int64
}

func (e *Error) Error() string {
	w := what[e.Kind][1]
	if e.Max == 1 {
		w = what[e.Kind][0]
	}
	return fmt.Sprintf("the host has %d %s, its limit (limits.%s in the configuration); end one, or raise the limit",
		e.Max, w, e.Kind)
}

// Set is a host's pools, one per kind.
type Set struct {
	Agents, Shells, Terminals, Tasks *Pool
}

// Pools lists the set's pools in the order of Kinds; nil pools are left out.
func (s *Set) Pools() []*Pool {
	if s == nil {
		return nil
	}
	var out []*Pool
	for _, p := range []*Pool{s.Agents, s.Shells, s.Terminals, s.Tasks} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// Pool returns the set's pool of kind; nil when the set is nil.
func (s *Set) Pool(k Kind) *Pool {
	if s == nil {
		return nil
	}
	switch k {
	case Agents:
		return s.Agents
	case Shells:
		return s.Shells
	case Terminals:
		return s.Terminals
	case Tasks:
		return s.Tasks
	}
	return nil
}
