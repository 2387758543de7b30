//go:build linux

package procfs

// System call numbers of linux/arm64 (the generic table) that matter for the
// wait proof. arm64 has no select or poll, only pselect6 and ppoll.
var syscallKinds = map[int]syscallKind{
	63:  kindRead,      // read
	65:  kindRead,      // readv
	72:  kindSelect,    // pselect6
	73:  kindPoll,      // ppoll
	22:  kindEpoll,     // epoll_pwait
	441: kindEpoll,     // epoll_pwait2
	260: kindWaitChild, // wait4
	95:  kindWaitChild, // waitid
	// A leader waiting for a signal is a supervisor: the work is a child's.
	133: kindWaitChild, // rt_sigsuspend
	137: kindWaitChild, // rt_sigtimedwait
	// An idle thread of a runtime (node's pool, V8's, Python's executors).
	98:  kindFutex, // futex
	449: kindFutex, // futex_waitv
	101: kindSleep, // nanosleep
	115: kindSleep, // clock_nanosleep
}

// Where pselect6, ppoll and epoll keep their timeouts on linux/arm64.
var timeoutArgs = map[int]timeoutArg{
	72:  {4, timespec}, // pselect6
	73:  {2, timespec}, // ppoll
	22:  {3, millis},   // epoll_pwait
	441: {3, timespec}, // epoll_pwait2
}

// futexSyscall is futex(2)'s number.
const futexSyscall = 98
