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
	idle     chan struct{} // closed when the last call leaves while draining
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
		if len(d.inFlight) == 0 && d.idle != nil {
			close(d.idle)
			d.idle = nil
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
	if d.idle == nil {
		d.idle = make(chan struct{})
	}
	idle := d.idle
	d.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// isDraining tells whether calls are refused.
func (d *drainer) isDraining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}
