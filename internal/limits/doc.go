// Package limits counts what a host runs (agents, shells, terminals,
// background tasks) against the host-wide limits of its configuration.
//
// Each kind has a Pool; whoever starts one takes a Hold from it, and the
// hold goes back when the thing ends. For an actor that is its Stopped
// message (ReleaseOnStop), which protoactor delivers however the actor
// ends: stopped by its parent, by its parent's restart, or failing for good.
// A restart of the actor itself keeps its hold, since the PID lives on.
// Release is idempotent, so an owner that knows the end earlier (a task
// that finished but keeps its output) may give the hold back then too.
package limits
