//go:build linux

package procfs

// System call numbers of linux/amd64 that matter for the wait proof.
var syscallKinds = map[int]syscallKind{
	0:   kindRead,      // read
	19:  kindRead,      // readv
	23:  kindSelect,    // select
	270: kindSelect,    // pselect6
	7:   kindPoll,      // poll
	271: kindPoll,      // ppoll
	232: kindEpoll,     // epoll_wait
	281: kindEpoll,     // epoll_pwait
	441: kindEpoll,     // epoll_pwait2
	61:  kindWaitChild, // wait4
	247: kindWaitChild, // waitid
	// A leader waiting for a signal is a supervisor (timeout, a shell's
	// wait builtin, tini): the work is a child's too.
	130: kindWaitChild, // rt_sigsuspend
	34:  kindWaitChild, // pause
	128: kindWaitChild, // rt_sigtimedwait
	// An idle thread of a runtime (node's pool, V8's, Python's executors).
	202: kindFutex, // futex
	449: kindFutex, // futex_waitv
	35:  kindSleep, // nanosleep
	230: kindSleep, // clock_nanosleep
}

// Where select, poll and epoll keep their timeouts on linux/amd64.
var timeoutArgs = map[int]timeoutArg{
	23:  {4, timeval},  // select
	270: {4, timespec}, // pselect6
	7:   {2, millis},   // poll
	271: {2, timespec}, // ppoll
	232: {3, millis},   // epoll_wait
	281: {3, millis},   // epoll_pwait
	441: {3, timespec}, // epoll_pwait2
}

// futexSyscall is futex(2)'s number.
const futexSyscall = 202
