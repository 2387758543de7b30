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
}
