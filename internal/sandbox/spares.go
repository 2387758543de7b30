package sandbox

import (
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Spares keeps a sandbox made ahead for the next agent whose sandbox is
// asked alike, so that an agent's first call does not wait the tens of
// milliseconds a sandbox takes to make (a host's agents mostly share one
// Want). Each spare taken starts the next. One spare is an idle init (about
// 2 MiB) and, with limits, a cgroup, named "spare" in its path.
type Spares struct {
	want Want
	log  *slog.Logger
	made func(Report, time.Duration)

	mu      sync.Mutex
	spare   *Sandbox
	report  Report
	making  chan struct{} // closed when the spare being made is ready
	claimed bool          // a taker waits for the spare being made
	stopped bool          // closed
	// After a spare could not be made, none is tried before retryAt; the
	// wait doubles with each failure in a row (agents make their own
	// meanwhile, and report why).
	retryAt time.Time
	backoff time.Duration
	wg      sync.WaitGroup
}

const (
	sparesFirstBackoff = time.Second
	sparesMaxBackoff   = time.Minute
)

// NewSpares starts making a spare sandbox as w asks (its Name is ignored).
// made is called with each sandbox made, as for a Holder.
func NewSpares(w Want, log *slog.Logger, made func(Report, time.Duration)) *Spares {
	if log == nil {
		log = slog.Default()
	}
	w.Name = "spare"
	s := &Spares{want: w, log: log, made: made}
	if w.Level == LevelOff || w.Level == "" {
		s.stopped = true
		return s
	}
	s.mu.Lock()
	s.startLocked()
	s.mu.Unlock()
	return s
}

func (s *Spares) startLocked() {
	if s.stopped || s.making != nil || s.spare != nil || time.Now().Before(s.retryAt) {
		return
	}
	ready := make(chan struct{})
	s.making = ready
	s.wg.Go(func() {
		t0 := time.Now()
		sb, r, err := Start(s.want)
		if s.made != nil && err == nil {
			s.made(r, time.Since(t0))
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.making, s.claimed = nil, false
		close(ready)
		switch {
		case err != nil || sb == nil:
			// The agents' holders make their own and report why.
			s.backoff = min(max(2*s.backoff, sparesFirstBackoff), sparesMaxBackoff)
			s.retryAt = time.Now().Add(s.backoff)
			s.log.Debug("sandbox: no spare", "err", err, "report", r.String(), "retry_in", s.backoff)
		case s.stopped:
			_ = sb.Close()
		default:
			s.spare, s.report, s.backoff = sb, r, 0
		}
	})
}

// take returns the spare, or the one being made, when w asks what the
// spares are made as; ok is false otherwise (the caller makes its own).
// The next spare is started either way.
func (s *Spares) take(w Want) (sb *Sandbox, r Report, ok bool) {
	if s == nil || !alike(s.want, w) {
		return nil, Report{}, false
	}
	s.mu.Lock()
	if s.spare == nil && s.making != nil && !s.claimed {
		// Being made: waiting for it is shorter than making another (and
		// two makes would share the processors). One taker waits.
		s.claimed = true
		ready := s.making
		s.mu.Unlock()
		<-ready
		s.mu.Lock()
	}
	sb, r = s.spare, s.report
	s.spare = nil
	s.startLocked()
	s.mu.Unlock()
	if sb == nil {
		return nil, Report{}, false
	}
	if sb.Ended() {
		// Its init was killed while it waited: not worth handing out.
		// (Killed a moment ago, its end not noticed yet, it is handed out
		// and its first request fails with ErrEnded: see ptyproc.StartIn.)
		_ = sb.Close()
		return nil, Report{}, false
	}
	return sb, r, true
}

// Close ends the spare, and any being made; none is made after it.
func (s *Spares) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.stopped = true
	sb := s.spare
	s.spare = nil
	s.mu.Unlock()
	s.wg.Wait()
	if sb != nil {
		return sb.Close()
	}
	return nil
}

// alike reports whether sandboxes asked as a and b are interchangeable.
func alike(a, b Want) bool {
	same := a.Level == b.Level && a.Require == b.Require && a.Disable == b.Disable && a.Limits == b.Limits
	if a.Level == LevelFS {
		same = same && slices.Equal(a.Writable, b.Writable) && slices.Equal(a.Hide, b.Hide)
	}
	return same
}
