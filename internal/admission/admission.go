package admission

import (
	"container/list"
	"sync"
	"time"
)

// Gate admits at most its number of slots of calls at once (see the package
// documentation).
type Gate struct {
	slots int
	lease time.Duration

	mu    sync.Mutex
	free  int
	held  list.List   // of *Ticket holding a slot, oldest admission first (leases are equal)
	queue list.List   // of *Ticket waiting, in arrival order
	timer *time.Timer // ends leases; armed only while the queue is not empty
}

// New returns a gate with the given number of slots (at least 1) and lease
// (positive).
func New(slots int, lease time.Duration) *Gate {
	slots = max(slots, 1)
	return &Gate{slots: slots, lease: lease, free: slots}
}

// Slots is the number of calls admitted at once; 0 for a nil gate.
func (g *Gate) Slots() int {
	if g == nil {
		return 0
	}
	return g.slots
}

// state is where a Ticket is in its life.
type state int

const (
	stateWaiting  state = iota // in the queue
	stateAdmitted              // holds a slot
	stateLapsed                // was admitted; its lease ended, and it holds nothing
	stateLeft                  // given back or withdrawn: holds nothing
)

// A Ticket is one call's place at the gate.
type Ticket struct {
	g        *Gate
	admitted func(*Ticket)
	// Guarded by g.mu:
	state      state
	admittedAt time.Time
	elem       *list.Element // in g.queue while waiting, in g.held while admitted
}

// Enter asks for a slot. When one is free and nobody waits, it returns a
// ticket holding it and true. Otherwise it returns a waiting ticket and
// false, and later calls admitted (if not nil) with that ticket, from the
// goroutine that freed the slot, when it gets its slot. admitted may use the
// gate (an actor's message can be handled on the sender's goroutine, by a
// synchronized dispatcher, and end in another Enter or Leave), so it runs
// outside the gate's lock: a Leave of the ticket that races with the grant
// can come before it, and the receiver must tell (Ticket.Holds). A nil gate
// admits at once.
func (g *Gate) Enter(admitted func(*Ticket)) (*Ticket, bool) {
	if g == nil {
		return nil, true
	}
	t := &Ticket{g: g, admitted: admitted}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.free > 0 && g.queue.Len() == 0 {
		g.free--
		g.admit(t)
		return t, true
	}
	t.state = stateWaiting
	t.elem = g.queue.PushBack(t)
	if g.queue.Len() == 1 {
		g.armLocked(time.Now())
	}
	return t, false
}

// Leave gives the ticket's slot back, or withdraws it from the queue. Only
// the first call does anything; a nil ticket is a no-op.
func (t *Ticket) Leave() {
	if t == nil {
		return
	}
	g := t.g
	g.mu.Lock()
	switch t.state {
	case stateAdmitted:
		g.held.Remove(t.elem)
		g.free++
	case stateWaiting:
		g.queue.Remove(t.elem)
	}
	t.state, t.elem = stateLeft, nil
	grants := g.grantLocked()
	g.mu.Unlock()
	tell(grants)
}

// Holds reports whether the ticket holds a slot now: admitted, not left,
// and its lease not over.
func (t *Ticket) Holds() bool {
	if t == nil {
		return true
	}
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	return t.state == stateAdmitted
}

// Lapsed reports whether the ticket's lease ended while it was admitted.
func (t *Ticket) Lapsed() bool {
	if t == nil {
		return false
	}
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	return t.state == stateLapsed
}

// admit records t as holding a slot; g.mu is held.
func (g *Gate) admit(t *Ticket) {
	t.state = stateAdmitted
	t.admittedAt = time.Now()
	t.elem = g.held.PushBack(t)
}

// grantLocked gives free slots to the front of the queue and returns the
// tickets to tell; g.mu is held.
func (g *Gate) grantLocked() []*Ticket {
	var grants []*Ticket
	for g.free > 0 && g.queue.Len() > 0 {
		t := g.queue.Remove(g.queue.Front()).(*Ticket)
		g.free--
		g.admit(t)
		if t.admitted != nil {
			grants = append(grants, t)
		}
	}
	return grants
}

// tell calls the admitted functions of grants, without g.mu.
func tell(grants []*Ticket) {
	for _, t := range grants {
		t.admitted(t)
	}
}

// expire ends the leases that are over and lets waiting calls in.
func (g *Gate) expire() {
	g.mu.Lock()
	now := time.Now()
	for e := g.held.Front(); e != nil; e = g.held.Front() {
		t := e.Value.(*Ticket)
		if t.admittedAt.Add(g.lease).After(now) {
			break
		}
		g.held.Remove(e)
		t.state, t.elem = stateLapsed, nil
		g.free++
	}
	grants := g.grantLocked()
	if g.queue.Len() > 0 {
		g.armLocked(now)
	}
	g.mu.Unlock()
	tell(grants)
}

// armLocked sets the timer to the end of the oldest lease; g.mu is held.
func (g *Gate) armLocked(now time.Time) {
	d := g.lease
	if e := g.held.Front(); e != nil {
		d = max(e.Value.(*Ticket).admittedAt.Add(g.lease).Sub(now), 0)
	}
	if g.timer == nil {
		g.timer = time.AfterFunc(d, g.expire)
		return
	}
	g.timer.Reset(d)
}
