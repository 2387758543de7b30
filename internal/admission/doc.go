// Package admission bounds how many calls run their first milliseconds at
// once, host-wide, and lets the waiting ones in the order they came.
//
// # Why
//
// A thousand agents that each type a short command in a closed loop put a
// thousand bash processes on the kernel's run queue at once. Linux does not
// serve them evenly: measured on this machine with bash on plain PTYs, no
// runtime in between (bench/fairness_test.go), one shell got 36 round trips
// in ten seconds while another got 1,066, and the slowest percent waited a
// second. Letting a few calls in at a time, first come first served, keeps
// the run queue short and makes every agent wait about as long as any other.
//
// # Slots and leases
//
// A Gate has a fixed number of slots. A call takes a Ticket before it types
// anything and gives it back when it is answered. A call that is still
// running when its lease ends (a build, a sleep, a program waiting for
// input) gives its slot up then: the gate bounds the crowd of short
// commands, never how many long ones may run. Leases are enforced only while
// somebody waits, by one timer armed for the oldest lease, so an idle or
// uncontended gate costs a mutex and no timer.
//
// The gate counts its slots itself instead of using
// golang.org/x/sync/semaphore: an actor must not block in Acquire, and a
// goroutine calling Acquire for each waiter would lose the arrival order
// (goroutines start in no set order), which is the point of the gate.
//
// # Concurrency
//
// A Gate is safe for concurrent use. Enter answers at once when a slot is
// free; otherwise the admission is announced later by calling the function
// given to Enter (an actor passes one that sends itself a message), on the
// goroutine that freed the slot and outside the gate's lock, since the
// message may be handled right there and use the gate again (protoactor's
// synchronized dispatcher runs the receiver on the sender's goroutine). A
// Leave racing with the grant may come first; Ticket.Holds tells.
// Ticket.Leave may be called at any moment, from any goroutine, any number
// of times: it gives the slot back, or withdraws from the queue, exactly
// once. A nil *Gate admits everything at once.
package admission
