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

// Close closes p in the background and returns at once. Processes handed
// over while others are being closed, by any Reaper, are closed together,
// with one look at /proc for all of them: a host stopping a thousand shells
// kills them in one sweep.
func (r *Reaper) Close(p *Process) { r.CloseThen(p, nil) }

// CloseThen is Close, and calls gone (if not nil) once p's session is gone,
// on the reaper's goroutine: it must not block.
func (r *Reaper) CloseThen(p *Process, gone func()) {
	r.wg.Add(1)
	sweep.submit(closeJob{p: p, done: func(err error) {
		if gone != nil {
			gone()
		}
		if err != nil {
			r.mu.Lock()
			r.errs = append(r.errs, err)
			r.mu.Unlock()
		}
		r.wg.Done()
	}})
}

// Hold counts one more piece of work that whoever waits for the Reaper
// waits for too (a goroutine that outlives the actor that started it); the
// returned function ends it, once.
func (r *Reaper) Hold() (done func()) {
	r.wg.Add(1)
	return sync.OnceFunc(r.wg.Done)
}

// sweep is the one worker that closes what every Reaper hands over.
var sweep sweeper

type closeJob struct {
	p    *Process
	done func(error)
}

type sweeper struct {
	mu      sync.Mutex
	queue   []closeJob
	working bool
}

func (s *sweeper) submit(j closeJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, j)
	if !s.working {
		s.working = true
		go s.work()
	}
}

func (s *sweeper) work() {
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		if len(batch) == 0 {
			s.working = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		ps := make([]*Process, len(batch))
		for i, j := range batch {
			ps[i] = j.p
		}
		killErr := closeAll(ps)
		for _, j := range batch {
			j.done(errors.Join(killErr, j.p.closeErr))
		}
	}
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
