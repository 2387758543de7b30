package host_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/host"
	"github.com/dsh-actors/dsh-actors/internal/hosttest"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// The tests of this file attack the host from an agent's shell, with the
// default configuration (sandbox level auto). Each runs contained (see
// testkit.Contained): should the sandbox fail, the attack reaches only a
// throwaway pid namespace and cgroup.

// containedBound is the hard time limit of each contained test.
const containedBound = 3 * time.Minute

// sandboxed starts a host with the default sandbox level (auto), whatever
// level the sandbox matrix runs the other tests at: these tests are of the
// default.
func sandboxed(t *testing.T, tweak func(*config.Config)) *host.Host {
	t.Helper()
	return hosttest.Start(t, func(c *config.Config) {
		c.Sandbox.Level = config.DefaultSandbox().Level
		if tweak != nil {
			tweak(c)
		}
	}, host.Options{})
}

func run(t *testing.T, h *host.Host, agent, command string) shell.Result {
	t.Helper()
	res, err := h.Bash(ctxT(t), agent, shell.Args{Command: command})
	if err != nil {
		t.Fatalf("%s: %q: %v", agent, command, err)
	}
	return res
}

func unique(t *testing.T) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(uint64(b[0])<<24|uint64(b[1])<<16|uint64(b[2])<<8|uint64(b[3]), 10)
}

// An agent that kills or stops its parent, or signals every process it
// can, reaches only its own processes: the host answers, and another
// agent's shell and job live on.
func TestAnAgentCannotKillOrStopTheHost(t *testing.T) {
	if !testkit.Contained(t, containedBound) {
		return
	}
	h := sandboxed(t, nil)
	run(t, h, "b", "export B=kept; sleep 1000 &")
	bShell := testkit.HostPID(t, run(t, h, "b", testkit.ShellPID).Text)
	for _, attack := range []string{"kill -9 $PPID", "kill -STOP $PPID", "kill -9 -1", "kill -STOP 1; kill -9 1"} {
		_, _ = h.Bash(ctxT(t), "a", shell.Args{Command: attack})
		res := run(t, h, "b", `echo "$B $(jobs | wc -l)"; `+testkit.ShellPID)
		if !strings.HasPrefix(res.Text, "kept 1\n") {
			t.Fatalf("after %q in agent a, agent b's shell says %q: want its variable and its job kept", attack, res.Text)
		}
		if got := testkit.HostPID(t, res.Text); got != bShell {
			t.Fatalf("after %q in agent a, agent b's shell is %d, was %d", attack, got, bShell)
		}
		// The attacker itself gets a working shell again.
		if res := run(t, h, "a", "echo back"); !strings.HasSuffix(res.Text, "back\n") {
			t.Fatalf("after %q, agent a's next call: %q", attack, res.Text)
		}
	}
	// The host process itself was never signalled: a stopped host would not
	// have answered above, a killed one would have ended this test.
}

// An agent sees nothing of the host or of other agents: not their
// processes, environments, terminals or secrets.
func TestAnAgentSeesNothingOfTheHostOrOtherAgents(t *testing.T) {
	if !testkit.Contained(t, containedBound) {
		return
	}
	secret := "sk-" + unique(t)
	t.Setenv("DSH_TEST_API_KEY", secret)
	t.Setenv("DSH_TEST_DB_PASSWORD", secret)
	h := sandboxed(t, nil)
	job := "sleep 1001." + unique(t)
	run(t, h, "b", "export BSECRET="+secret+"; "+job+" &")
	open, err := h.Call(ctxT(t), "b", "terminal_open", json.RawMessage(`{}`))
	if err != nil || open.IsError {
		t.Fatalf("terminal_open in b: %v %v", open, err)
	}
	checks := []struct{ what, command, want string }{
		{"the host's secrets in its environment", "env | grep -c " + secret + " || true", "0\n"},
		{"its parent's environment", "cat /proc/$PPID/environ >/dev/null 2>&1 && echo read || echo denied", "denied\n"},
		{"pid 1's memory", "head -c 1 /proc/1/mem >/dev/null 2>&1 && echo read || echo denied", "denied\n"},
		{"another agent's job", "pgrep -f '" + job + "' | wc -l", "0\n"},
		{"another agent's environment", "grep -l " + secret + " /proc/[0-9]*/environ 2>/dev/null | wc -l", "0\n"},
		{"another agent's terminals", "ls /dev/pts | grep -v ptmx | wc -l", "1\n"},
		{"the processes of the machine", "ps -e -o comm= | grep -v -x -e bash -e ps -e grep -e wc -e dsh-sandbox -e sleep | wc -l", "0\n"},
	}
	for _, c := range checks {
		if res := run(t, h, "a", c.command); res.Text != c.want {
			t.Errorf("%s: %q gives %q, want %q", c.what, c.command, res.Text, c.want)
		}
	}
	// Nothing a signals, and nothing it writes to every terminal it can
	// name, reaches b.
	run(t, h, "a", "pkill -f '"+job+"'; pkill -9 sleep; for p in /dev/pts/[0-9]*; do echo FORGED > $p; done 2>/dev/null; true")
	if res := run(t, h, "b", "jobs | wc -l"); res.Text != "1\n" {
		t.Errorf("agent b's job after a's pkill: %q jobs, want 1", res.Text)
	}
	read, err := h.Call(ctxT(t), "b", "terminal_read", json.RawMessage(`{"terminal_id":"t1"}`))
	if err != nil || strings.Contains(read.Text, "FORGED") {
		t.Errorf("agent b's terminal after a's writes: %q %v", read.Text, err)
	}
}

// Nothing an agent starts outlives its stop, whatever it did to escape:
// setsid, nohup, a dropped or rewritten session variable, an empty
// environment.
func TestNothingOutlivesAnAgentsStop(t *testing.T) {
	if !testkit.Contained(t, containedBound) {
		return
	}
	h := sandboxed(t, nil)
	u := unique(t)
	escapes := []string{
		"sleep 1002." + u,
		"sleep 1003." + u,
		"sleep 1004." + u,
		"sleep 1005." + u,
		"sleep 1006." + u,
	}
	run(t, h, "a", fmt.Sprintf(`(setsid %s &); nohup %s >/dev/null 2>&1 & (unset DSH_ACTORS_SESSION; setsid %s &); (DSH_ACTORS_SESSION=x setsid %s &); (env -i setsid %s </dev/null >/dev/null 2>&1 &); sleep 0.1`,
		escapes[0], escapes[1], escapes[2], escapes[3], escapes[4]))
	testkit.Eventually(t, "the escapes started", func() (bool, string) {
		got := testkit.CommandsRunning(escapes...)
		return len(got) == len(escapes), strings.Join(got, "; ")
	})
	if err := h.StopAgent(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	// StopAgent returns once the sandbox is gone: look right away.
	if left := testkit.CommandsRunning(escapes...); len(left) > 0 {
		t.Fatalf("survived the agent's stop: %v", left)
	}
}

// sandboxHelperEnv makes the test binary a host that starts escaping
// processes in two agents, says "ready" and waits to be killed.
const sandboxHelperEnv = "HOST_TEST_SANDBOX_HOST"

func sandboxHost(jobs string) int {
	h, err := host.Start(host.Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	for i, job := range strings.Split(jobs, ",") {
		cmd := fmt.Sprintf("(env -i setsid %s </dev/null >/dev/null 2>&1 &); nohup %s1 >/dev/null 2>&1 &", job, job)
		if _, err := h.Bash(context.Background(), "a"+strconv.Itoa(i), shell.Args{Command: cmd}); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	fmt.Println("ready")
	select {}
}

// Nothing an agent starts outlives a host killed with SIGKILL.
func TestNothingOutlivesAKill9OfTheHost(t *testing.T) {
	if !testkit.Contained(t, containedBound) {
		return
	}
	u := unique(t)
	jobs := []string{"sleep 1007." + u, "sleep 1008." + u}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sandboxHelperEnv+"="+strings.Join(jobs, ","))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper host: %q", line)
	}
	all := append(jobs, jobs[0]+"1", jobs[1]+"1")
	testkit.Eventually(t, "every agent's job started", func() (bool, string) {
		got := testkit.CommandsRunning(all...)
		return len(got) == len(all), strings.Join(got, "; ")
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	testkit.Eventually(t, "every agent's process gone after kill -9 of the host", func() (bool, string) {
		got := testkit.CommandsRunning(all...)
		return len(got) == 0, strings.Join(got, "; ")
	})
}

// A fork bomb fills its own agent's pids limit; other agents start shells
// and run commands as before.
func TestAForkBombStaysInItsAgent(t *testing.T) {
	if !testkit.Contained(t, containedBound) {
		return
	}
	h := sandboxed(t, func(c *config.Config) { c.Sandbox.PidsMax = 200 })
	run(t, h, "b", "true")
	u := unique(t)
	run(t, h, "a", `bomb`+u+`() { bomb`+u+` | bomb`+u+` & }; bomb`+u)
	// The bomb is at its limit: the agent's processes are as many as it
	// may have (a few threads of init's count too).
	bashPath, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	shells := bashPath + " --norc --noprofile --noediting -i"
	testkit.Eventually(t, "the bomb at its limit", func() (bool, string) {
		n := len(testkit.CommandsRunning(shells))
		return n > 150, fmt.Sprintf("%d shells", n)
	})
	for _, agent := range []string{"b", "c"} {
		if res := run(t, h, agent, "sh -c 'echo forked'"); !strings.HasSuffix(res.Text, "forked\n") {
			t.Fatalf("agent %s during a's fork bomb: %q", agent, res.Text)
		}
	}
	if err := h.StopAgent(ctxT(t), "a"); err != nil {
		t.Fatal(err)
	}
	if n := len(testkit.CommandsRunning(shells)); n > 2 {
		t.Fatalf("%d shells left after the bomb's agent stopped, want b's and c's", n)
	}
}

// A memory hog is killed inside its own agent; the others run on.
func TestAMemoryHogStaysInItsAgent(t *testing.T) {
	if !testkit.Contained(t, containedBound) {
		return
	}
	py := testkit.Python3(t)
	h := sandboxed(t, func(c *config.Config) { c.Sandbox.MemoryMax = "256MiB" })
	run(t, h, "b", "export B=kept")
	res := run(t, h, "a", py+` -c 'b = bytearray(1 << 30); print("allocated", len(b))'; echo "status $?"`)
	if strings.Contains(res.Text, "allocated") || !strings.Contains(res.Text, "status 137") {
		t.Fatalf("a 1 GiB hog in an agent limited to 256 MiB: %q, want it killed (status 137)", res.Text)
	}
	if res := run(t, h, "b", "echo $B"); res.Text != "kept\n" {
		t.Fatalf("agent b after a's hog: %q", res.Text)
	}
	if res := run(t, h, "a", "echo after"); !strings.HasSuffix(res.Text, "after\n") {
		t.Fatalf("agent a after its hog: %q", res.Text)
	}
}

// An agent that opens terminals until it cannot runs out of its own, not
// of the machine's: the others open theirs.
func TestTerminalsRunOutPerAgent(t *testing.T) {
	if !testkit.Contained(t, containedBound) {
		return
	}
	py := testkit.Python3(t)
	h := sandboxed(t, nil)
	res := run(t, h, "a", py+` -c '
import os
n = 0
held = []
try:
    while n < 1000:
        held.append(os.openpty()); n += 1
except OSError as e:
    pass
print(n)
'`)
	n, err := strconv.Atoi(strings.TrimSpace(res.Text))
	if err != nil || n >= 1000 {
		t.Fatalf("agent a opened %q terminals, want its own limit to stop it", res.Text)
	}
	open, err := h.Call(ctxT(t), "b", "terminal_open", json.RawMessage(`{"command":"echo opened"}`))
	if err != nil || open.IsError || !strings.Contains(open.Text, "opened") {
		t.Fatalf("agent b's terminal_open after a ran out: %v %v", open, err)
	}
}

// A level the machine or the configuration does not allow falls back to
// what is allowed and says so, once, in the agent's first result; with
// require it is refused.
func TestSandboxFallbacksAreReportedAndRequireRefuses(t *testing.T) {
	for _, c := range []struct {
		disable, level string
		want           string
	}{
		{"process", "auto", "[sandbox: limits (asked auto); no process: disabled by configuration"},
		{"limits", "auto", "[sandbox: process (asked auto); no limits: disabled by configuration"},
		{"process,limits", "auto", "[sandbox: off (asked auto); no process: disabled by configuration"},
		{"nonet", "nonet", "[sandbox: process+limits (asked nonet); no nonet: disabled by configuration"},
	} {
		t.Run(c.disable, func(t *testing.T) {
			h := hosttest.Start(t, func(cfg *config.Config) { cfg.Sandbox.Disable = c.disable; cfg.Sandbox.Level = c.level }, host.Options{})
			res := run(t, h, "a", "echo one")
			if !strings.HasPrefix(res.Text, "one\n") || !strings.Contains(res.Text, c.want) {
				t.Fatalf("first result %q, want the output and %q", res.Text, c.want)
			}
			if res := run(t, h, "a", "echo two"); res.Text != "two\n" {
				t.Fatalf("second result %q: the notice is said once", res.Text)
			}
			h2 := hosttest.Start(t, func(cfg *config.Config) {
				cfg.Sandbox.Disable = c.disable
				cfg.Sandbox.Level = c.level
				cfg.Sandbox.Require = true
			}, host.Options{})
			res, err := h2.Bash(ctxT(t), "a", shell.Args{Command: "echo ran"})
			if err != nil || !res.IsError || !strings.Contains(res.Text, "is required") || !strings.Contains(res.Text, "disabled by configuration") {
				t.Fatalf("with require: %q %v, want a refusal naming the cause", res.Text, err)
			}
			if strings.Contains(res.Text, "\nran") || strings.HasPrefix(res.Text, "ran") {
				t.Fatalf("with require, the command ran: %q", res.Text)
			}
		})
	}
}

// A host chooses an agent's level; an unknown one is refused by name.
func TestHostChoosesAnAgentsSandboxLevel(t *testing.T) {
	h := start(t, host.Options{SandboxLevel: func(id string) string {
		if id == "trusted" {
			return "off"
		}
		if id == "bad" {
			return "walls"
		}
		return ""
	}})
	if res := run(t, h, "trusted", "test $$ -gt 100 && echo host-pid"); res.Text != "host-pid\n" {
		t.Errorf("level off: %q", res.Text)
	}
	if res := run(t, h, "other", "ps -e --no-headers | wc -l"); strings.TrimSpace(res.Text) == "" {
		t.Errorf("default level: %q", res.Text)
	}
	_, err := h.Bash(ctxT(t), "bad", shell.Args{Command: "true"})
	if err == nil || !strings.Contains(err.Error(), "walls") || !errorsIs(err, host.ErrInvalidSandboxLevel) {
		t.Errorf("unknown level: %v", err)
	}
}
