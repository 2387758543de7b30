package sandbox

// UseCgroupV2 points the cgroup code at a cgroup2 mounted at root, with
// controllers for the sandboxes' cgroups, for a test process of its own (the
// v2 set-up moves the process and is done once).
func UseCgroupV2(root string, controllers []string) {
	cgroupRoot, v2Controllers = root, controllers
}

// SweepStale is sweepStale.
func SweepStale() { sweepStale() }
