// Package executor is the one way a plugin runs a short command: a policy
// step (Policy.Resolve, which may rewrite or refuse the request) and a run
// step (the program's standard output, exit status, a timeout and
// cancellation). Plugins never start processes themselves, and the executor
// never uses an agent's persistent shell: each run is a fresh process of its
// own, in a process group of its own.
//
// The default policy (AllowAll) allows every request. A host installs its own
// to sandbox or forbid what plugins run.
//
// # Cancellation and cleanup
//
// A run whose timeout passes is killed, with everything in its process group
// (SIGKILL), and reported as TimedOut. A run whose context is cancelled is
// killed the same way and returns the context's error. Output beyond
// MaxOutput is dropped and counted. A run that ended by itself just as its
// time ran out is reported as it ended, not as timed out.
//
// A process group does not hold a program that leaves it: a child that
// calls setsid (or setpgid) escapes the kill, and Run returns after
// os/exec's WaitDelay if it kept the output pipe open. Containing that needs
// a cgroup or a subreaper, which a policy can provide by rewriting the
// request.
//
// # Concurrency
//
// An Executor is safe for concurrent use. Run starts the goroutines os/exec
// uses to copy output; they end before Run returns.
package executor
