// Package procfs reads the few facts about processes that the shell and
// terminal actors need from Linux's /proc, and acts on them.
//
// It answers three questions:
//
//   - Which processes belong to a session or a process group? ([List], [Session])
//   - Is a process group blocked reading a given terminal, so that a program is
//     waiting for input rather than working? ([TTYWait])
//   - How do we make sure nothing of a session survives, including what left
//     it with setsid? ([KillTree], [KillSession])
//
// The wait proof follows the kernel, not output silence: a task whose
// /proc/PID/task/TID/syscall shows read or readv on the terminal's slave, or
// select, pselect6, poll or ppoll with the slave among the descriptors it
// watches (read from /proc/PID/mem), is waiting for terminal input. Programs
// that wait in epoll cannot be proven this way; TTYWait reports them as
// [WaitUnknown] so callers can fall back to a silence heuristic.
//
// # Concurrency
//
// Every function is safe for concurrent use and starts no goroutine. All of
// them do blocking file I/O on /proc, which is fast (no disk) but is still a
// system call per file: call them from a goroutine of your own, not from an
// actor's Receive.
package procfs
