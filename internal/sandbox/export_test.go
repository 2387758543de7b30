package sandbox

// UseCgroupV2 points the cgroup code at a cgroup2 mounted at root, with
// controllers for the sandboxes' cgroups, for a test process of its own (the
// v2 set-up moves the process and is done once).
func UseCgroupV2(root string, controllers []string) {
	cgroupRoot, v2Controllers = root, controllers
}

// SweepStale is sweepStale.
func SweepStale() { sweepStale() }

// SpareInitPID is the init pid of the spare ready to be taken; 0 when none.
func (s *Spares) SpareInitPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spare == nil {
		return 0
	}
	return s.spare.InitPID()
}

// SpareDone is the Done channel of the spare ready to be taken; nil when
// none.
func (s *Spares) SpareDone() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spare == nil {
		return nil
	}
	return s.spare.Done()
}
