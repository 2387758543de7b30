package mcpserve

import (
	"context"
	"sync"
)

// drainer keeps the tool calls in flight: a shutdown lets them finish
// (refusing new ones meanwhile), then cancels those still running. The SDK
// does neither: closing a session waits for its calls, however long they
// run.
type drainer struct {
	mu       sync.Mutex
	next     uint64
	inFlight map[uint64]context.CancelFunc
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
		d.inFlight = map[uint64]context.CancelFunc{}
	}
	d.next++
	id := d.next
	callCtx, cancel := context.WithCancel(ctx)
	d.inFlight[id] = cancel
	return callCtx, func() {
		cancel()
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

// cancelAll refuses new calls and cancels those in flight: each is
// answered with its cancellation (a bash call resets its shell).
func (d *drainer) cancelAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = true
	for _, cancel := range d.inFlight {
		cancel()
	}
}
