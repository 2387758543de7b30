// Package hosttest starts a host.Host for a test and checks, when the test
// ends, that it stopped cleanly and left nothing behind: no process the test
// started (found by an environment mark every process inherits) and no
// pseudo-terminal descriptor.
//
// It starts no goroutine of its own; the host's are ended by its Stop, which
// the cleanup calls.
package hosttest
