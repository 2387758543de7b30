package supervision

import "time"

// SetClock makes s read the time from now, so that tests can move failures
// out of the period without waiting for it.
func SetClock(s *Strategy, now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// PendingRestarts returns how many delayed restarts s is waiting to send.
func PendingRestarts(s *Strategy) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.children {
		if c.due != 0 {
			n++
		}
	}
	return n
}
