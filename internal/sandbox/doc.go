// Package sandbox contains one agent's processes: its shells, terminals and
// tasks run in a sandbox of their own, and nothing in it reaches the host,
// another agent, or outlives the agent.
//
// # How a sandbox is made
//
// A sandbox is a small init process, started from the running executable
// (see [Init]), that starts every program of the agent on the host's
// request and reports their ends. Which walls it stands behind is chosen per
// sandbox ([Want]) and reported as obtained ([Report]):
//
//   - Process: new user, pid, mount, ipc and uts namespaces. The host and
//     other agents are invisible; `kill -9 -1` reaches only the agent's own
//     processes; init is pid 1, so its death kills everything inside. /dev
//     is a tmpfs with the harmless devices bound from the host's, a devpts of
//     the agent's own and a private /dev/shm: no console, no other terminal.
//     The agent is root in its namespace but without CAP_SYS_PTRACE and
//     CAP_SYS_ADMIN, and init is not dumpable, so no agent process can trace
//     init, read its memory or descriptors, or undo the mounts. Root maps to
//     the host's root (files keep their owners), and the kernel lets uid 0
//     write much of /proc/sys and /sys: they are read-only.
//   - Limits: a cgroup per agent (pids, memory, CPU weight), which also
//     kills whatever is left at the end.
//   - Network: a network namespace with loopback only.
//   - Files: the system read-only, only the agent's directories writable,
//     a private /tmp and /var/tmp, configured directories hidden; and
//     Landlock behind the mounts, where the kernel has it.
//
// The namespaces are never made by forking the host: with CLONE_NEWUSER Go
// cannot use vfork, and copying a host with a large heap costs tens of
// milliseconds per sandbox. The host starts a small copy of itself (a
// stage that only clones init with the namespaces and exits), so the cost
// is independent of the host's heap.
//
// # Nothing outlives the host
//
// Init holds one end of a socket pair whose other end only the host holds.
// When the host dies, however it dies, the kernel closes its end, init reads
// end-of-file and exits, and the kernel kills the rest of the pid namespace.
//
// # Pids
//
// The host reads /proc by host pid for its proofs. Init passes a pidfd of
// every program it starts; the host learns the host pid from the pidfd's
// fdinfo, and keeps the pid inside the sandbox for what the model is shown.
//
// # Concurrency
//
// A Sandbox is safe for concurrent use. It owns one goroutine, which reads
// init's messages until the sandbox ends; Close joins it.
package sandbox
