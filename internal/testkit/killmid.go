package testkit

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Acked maps an agent to the sequence numbers a child acknowledged, and
// the text of each.
type Acked map[string]map[uint64]string

// KillMidStream runs the test binary again as a child with env added (the
// child's TestMain sees it and appends, printing "agent seq text" for each
// acknowledged append), reads n such lines, kills the child with SIGKILL
// while it goes on appending, and returns what it acknowledged.
func KillMidStream(t testing.TB, env string, n int) Acked {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := Acked{}
	sc := bufio.NewScanner(out)
	got := 0
	for got < n && sc.Scan() {
		f := strings.Fields(sc.Text())
		seq, err := strconv.ParseUint(f[min(1, len(f)-1)], 10, 64)
		if len(f) != 3 || err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child: %q", sc.Text())
		}
		if acked[f[0]] == nil {
			acked[f[0]] = map[uint64]string{}
		}
		acked[f[0]][seq] = f[2]
		got++
	}
	cmd.Process.Signal(syscall.SIGKILL) // mid-stream: appends in flight
	cmd.Wait()
	if got < n {
		t.Fatalf("the child stopped after %d acknowledged appends", got)
	}
	return acked
}
