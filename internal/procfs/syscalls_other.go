//go:build linux && !amd64 && !arm64

package procfs

// On other architectures no system call is recognised, so TTYWait never
// proves a wait and callers fall back to silence.
var syscallKinds = map[int]syscallKind{}

var timeoutArgs = map[int]timeoutArg{}

// futexSyscall is unknown here: no futex's timeout is read.
const futexSyscall = -1
