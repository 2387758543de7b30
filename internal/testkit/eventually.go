package testkit

import (
	"testing"
	"time"
)

// Eventually polls cond every millisecond until it holds, failing the test
// at Timeout with what cond last saw. For states the kernel offers no event
// for (a process's /proc entries); wait for an event wherever there is one.
func Eventually(t testing.TB, what string, cond func() (ok bool, seen string)) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last seen: %s", what, Timeout, seen)
		}
		<-tick.C
	}
}
