package sigstate_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/sigstate"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// helperEnv makes the test binary act as the program under test: it reports
// the state it finds (after calling Reexec when the value is "reexec") and
// what a child it starts really gets, as one JSON object on stdout.
const helperEnv = "SIGSTATE_TEST_HELPER"

type report struct {
	Before    string `json:"before"`     // Inherited() at start
	ReexecErr string `json:"reexec_err"` // Reexec's error, if called
	After     string `json:"after"`      // Inherited() after Reexec
	Child     string `json:"child"`      // SigBlk and SigIgn of a child, from its /proc
	Mark      string `json:"mark"`       // the re-exec mark still in our environment
	Comm      string `json:"comm"`       // the kernel's name for this process
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	testkit.Main(m)
}

func helper(mode string) int {
	var r report
	st, err := sigstate.Inherited()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	r.Before = st.String()
	if mode == "reexec" {
		if err := sigstate.Reexec(); err != nil {
			r.ReexecErr = err.Error()
		}
	}
	if st, err = sigstate.Inherited(); err != nil {
		fmt.Println(err)
		return 1
	}
	r.After = st.String()
	r.Mark = os.Getenv("DSH_ACTORS_SIGNALS_RESET")
	comm, _ := os.ReadFile("/proc/self/comm")
	r.Comm = strings.TrimSpace(string(comm))
	out, err := exec.Command("grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status").Output()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	r.Child = strings.Join(strings.Fields(string(out)), " ")
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 1
	}
	return 0
}

// runHelper runs the helper in a program started with testkit.DirtySignals.
func runHelper(t *testing.T, mode string, env ...string) report {
	t.Helper()
	cmd := testkit.DirtySignalsCommand(t, append(env, helperEnv+"="+mode)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v; output %q", err, out)
	}
	var r report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	return r
}

const dirty = testkit.DirtySignals

// Without Reexec, a child inherits the mask and the ignored signals, and
// Inherited says so.
func TestInheritedNamesWhatChildrenGet(t *testing.T) {
	r := runHelper(t, "report")
	if r.Before != dirty || r.After != dirty {
		t.Errorf("Inherited() = %q, then %q; want %q", r.Before, r.After, dirty)
	}
	// Signal n is bit n-1.
	if want := fmt.Sprintf("SigBlk: %016x SigIgn: %016x", 1<<(syscall.SIGWINCH-1), 1<<(syscall.SIGHUP-1)|1<<(syscall.SIGINT-1)); r.Child != want {
		t.Errorf("a child got %q, want %q", r.Child, want)
	}
}

// After Reexec, the program runs again with a clean state, its children get
// nothing blocked or ignored, and the mark is gone from the environment.
func TestReexecCleansWhatChildrenGet(t *testing.T) {
	r := runHelper(t, "reexec")
	const clean = "no signal blocked or ignored"
	if r.Before != clean || r.After != clean || r.ReexecErr != "" {
		t.Errorf("after the re-exec: before %q, after %q, error %q; want both clean and no error", r.Before, r.After, r.ReexecErr)
	}
	if want := "SigBlk: 0000000000000000 SigIgn: 0000000000000000"; r.Child != want {
		t.Errorf("a child got %q, want %q", r.Child, want)
	}
	if r.Mark != "" {
		t.Errorf("the re-exec mark %q is left in the environment", r.Mark)
	}
	// Executed through /proc/self/exe, yet named as before.
	if want := filepath.Base(os.Args[0]); !strings.HasPrefix(want, r.Comm) || len(r.Comm) < min(len(want), 15) {
		t.Errorf("after the re-exec the process is named %q, want %q", r.Comm, want)
	}
}

// A program that still finds a dirty state after it was re-executed gets an
// error naming the signals, not a second exec.
func TestReexecNeverLoops(t *testing.T) {
	r := runHelper(t, "reexec", "DSH_ACTORS_SIGNALS_RESET=1")
	if !strings.Contains(r.ReexecErr, dirty) || r.After != dirty {
		t.Errorf("error %q, state %q; want an error naming %q", r.ReexecErr, r.After, dirty)
	}
}

// testkit.Main called Reexec before the tests ran, whatever state this test
// binary was started in (CI starts it with SIGWINCH blocked): from here on
// nothing is inherited.
func TestTestProcessIsClean(t *testing.T) {
	st, err := sigstate.Inherited()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Clean() || st.String() != "no signal blocked or ignored" {
		t.Errorf("after testkit.Main: %s", st)
	}
}

// Pending sees a signal sent and not taken (blocked), and an ignored one.
func TestPendingSeesBlockedAndIgnoredSignals(t *testing.T) {
	py := testkit.Python3(t)
	cmd := exec.Command(py, "-c", `import signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
signal.signal(signal.SIGINT, signal.SIG_IGN)
print("ready", flush=True)
sys.stdin.read()`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	buf := make([]byte, 6)
	// A pipe may hand the line over in pieces: read all six bytes.
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("%q %v", buf, err)
	}
	pid := cmd.Process.Pid
	if pending, _, err := sigstate.Pending(pid, syscall.SIGUSR1); err != nil || pending {
		t.Fatalf("before the signal: pending %v, %v", pending, err)
	}
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if pending, ignored, err := sigstate.Pending(pid, syscall.SIGUSR1); err != nil || !pending || ignored {
		t.Fatalf("blocked SIGUSR1: pending %v ignored %v, %v", pending, ignored, err)
	}
	if pending, ignored, err := sigstate.Pending(pid, syscall.SIGINT); err != nil || pending || !ignored {
		t.Fatalf("ignored SIGINT: pending %v ignored %v, %v", pending, ignored, err)
	}
}
