package mcpserve

import (
	"context"
	"errors"
	"sync"
)

// drainer keeps the tool calls in flight: a shutdown lets them finish
// (refusing new ones meanwhile), then cancels those still running. The SDK
// does neither: closing a session waits for its calls, however long they
// run.
type drainer struct {
	mu       sync.Mutex
	next     uint64
	inFlight map[uint64]context.CancelCauseFunc
	draining bool
	idle     idleSignal // the last call left
}

// enter counts a call in and gives it a context that cancelAll cancels;
// ok is false when draining (the call must be refused).
func (d *drainer) enter(ctx context.Context) (callCtx context.Context, leave func(), ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining {
		return nil, nil, false
	}
	if d.inFlight == nil {
		d.inFlight = map[uint64]context.CancelCauseFunc{}
	}
	d.next++
	id := d.next
	callCtx, cancel := context.WithCancelCause(ctx)
	d.inFlight[id] = cancel
	return callCtx, func() {
		cancel(nil)
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.inFlight, id)
		if len(d.inFlight) == 0 {
			d.idle.reached()
		}
	}, true
}

// drain refuses new calls from now on and waits until none is in flight,
// or ctx ends (its error is returned then).
func (d *drainer) drain(ctx context.Context) error {
	d.mu.Lock()
	d.draining = true
	if len(d.inFlight) == 0 {
		d.mu.Unlock()
		return nil
	}
	idle := d.idle.waiting()
	d.mu.Unlock()
	return waitIdle(ctx, idle)
}

// cancelAll refuses new calls and cancels those in flight with cause: each
// is answered with an error result that says so (a bash call resets its
// shell).
func (d *drainer) cancelAll(cause error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = true
	for _, cancel := range d.inFlight {
		cancel(cause)
	}
}

// Why the server cancels calls.
var (
	errShuttingDown  = errors.New("the server is shutting down")
	errSessionEnding = errors.New("the client ended the session")
)

// reopen takes calls again after cancelAll (an end that did not happen).
func (d *drainer) reopen() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = false
}

// count is how many calls are in flight.
func (d *drainer) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.inFlight)
}

// isDraining tells whether calls are refused.
func (d *drainer) isDraining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}

// idleSignal tells waiters that a count its owner keeps has dropped to
// zero. The owner's mutex guards it; the zero value is ready.
type idleSignal struct{ ch chan struct{} }

// waiting is the channel reached closes; call it with the owner's lock
// held, when the count is not zero.
func (i *idleSignal) waiting() <-chan struct{} {
	if i.ch == nil {
		i.ch = make(chan struct{})
	}
	return i.ch
}

// reached wakes the waiters; call it with the owner's lock held, when the
// count is zero.
func (i *idleSignal) reached() {
	if i.ch != nil {
		close(i.ch)
		i.ch = nil
	}
}

// waitIdle waits for ch to close, or ctx to end (its error is returned).
func waitIdle(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
