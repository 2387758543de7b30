package ptyproc

import (
	"context"
	"errors"
	"sync"
)

// Reaper closes processes in the background and lets their owner wait until
// every one of them is gone.
//
// Close kills a whole session and joins the process's goroutines, which
// takes milliseconds and may not be done from one of those goroutines. An
// actor that owns a process hands it to a Reaper instead of closing it in
// Receive: its Receive stays short, it may run on any goroutine (a
// synchronized dispatcher runs it on the sender's), and the owner of the
// actor tree waits for the Reaper when it must know that nothing is left.
//
// The zero value is ready to use.
type Reaper struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// Close closes p in a goroutine of its own and returns at once.
func (r *Reaper) Close(p *Process) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := p.Close(); err != nil {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		}
	}()
}

// Wait returns when every process handed to Close so far is gone, with the
// errors their closing met, or ctx's error if it ends first (a goroutine
// then goes on waiting and ends when the closes do).
func (r *Reaper) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := errors.Join(r.errs...)
	r.errs = nil
	return err
}
