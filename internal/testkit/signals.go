package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// DirtySignals is how [sigstate.State] names the state [DirtySignalsCommand]
// leaves its program in.
const DirtySignals = "SIGWINCH blocked; SIGHUP, SIGINT ignored"

// DirtySignalsCommand runs this test binary again, running no test, with
// env added, from a python3 trampoline that first blocks SIGWINCH and
// ignores SIGHUP, SIGINT and SIGPIPE: what a careless parent (some CI
// runners, nohup, `&` in a script) leaves, and what Go cannot set up for a
// child itself. The caller's TestMain acts on env before calling [Main]. (Go
// catches SIGPIPE whatever it inherited, so of the three only SIGHUP and
// SIGINT stay ignored.)
func DirtySignalsCommand(t testing.TB, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Python3(t), "-c", `
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGWINCH])
for s in (signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])
`, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}
