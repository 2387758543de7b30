package bench

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/sandbox"
)

// cpuMeter measures, from startCPU to stop, the CPU time of the host's
// process, of its children (the shells; but not the server, when this
// process is the host), of this process when it is not the host (the
// clients), and the machine's busy time.
type cpuMeter struct {
	host, notShell int
	t0             time.Time
	self, hostCPU  time.Duration
	shells, busy   time.Duration
}

func startCPU(host, notShell int) *cpuMeter {
	m := &cpuMeter{host: host, notShell: notShell, t0: time.Now()}
	m.self, m.hostCPU, m.shells, m.busy = selfCPU(), procCPU(host), m.childrenCPU(), machineBusy()
	return m
}

// stop fills in p's CPU figures for the calls of p.Load.
func (m *cpuMeter) stop(p *ServePath) {
	self, hostCPU, shells, busy := selfCPU()-m.self, procCPU(m.host)-m.hostCPU, m.childrenCPU()-m.shells, machineBusy()-m.busy
	elapsed := time.Since(m.t0)
	if m.host == os.Getpid() {
		self = 0 // the client is the host
	}
	if p.Calls > 0 {
		perCall := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(p.Calls) }
		p.HostCPUus, p.ClientCPUus, p.ShellsCPUus = perCall(hostCPU), perCall(self), perCall(shells)
	}
	if elapsed > 0 {
		p.MachineBusy = busy.Seconds() / elapsed.Seconds()
		p.OtherBusy = (busy - hostCPU - self - shells).Seconds() / elapsed.Seconds()
	}
}

// childrenCPU is the CPU time of the host's live children but notShell,
// and of the children of its sandboxes' inits (the shells of sandboxed
// agents are init's children, not the host's).
func (m *cpuMeter) childrenCPU() time.Duration {
	procs, _ := procfs.List()
	parents := map[int]bool{m.host: true}
	mark := "/dsh-actors-" + strconv.Itoa(m.host) + "-"
	for _, p := range procs {
		if p.Comm == sandbox.InitName {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/cgroup"); err == nil && strings.Contains(string(b), mark) {
				parents[p.PID] = true
			}
		}
	}
	// The host's executable run again is a sandbox being made (its stage),
	// a spare one or an agent's: not a shell.
	hostExe, _ := os.Readlink("/proc/" + strconv.Itoa(m.host) + "/exe")
	var sum time.Duration
	for _, p := range procs {
		if !parents[p.PPID] || p.PID == m.notShell || parents[p.PID] {
			continue
		}
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/exe"); hostExe != "" && exe == hostExe {
			continue
		}
		sum += procCPU(p.PID)
	}
	return sum
}

// selfCPU is this process's user and system time.
func selfCPU() time.Duration { return procCPU(os.Getpid()) }

// procCPU is the time process pid's threads have run, in nanoseconds: the
// sum of /proc/PID/task/*/schedstat (a shell takes a few ticks in a whole
// run, too few for the ticks of /proc/PID/stat). A thread that ended is not
// counted; Go programs keep theirs.
func procCPU(pid int) time.Duration {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/schedstat")
		if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}

// clockTick is the unit of /proc/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// machineBusy is the time the machine's CPUs were not idle, in all, since
// boot (the cpu line of /proc/stat, less idle and iowait).
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * clockTick
}

// server is the server process.
type server struct {
	cmd     *exec.Cmd
	url     string
	mark    string
	log     *serverLog
	exited  chan struct{} // closed when waitErr is set
	waitErr error
}

// startServer starts command with a mark in its environment (its shells
// inherit it) and waits for the address it prints.
func startServer(ctx context.Context, command []string) (*server, error) {
	if len(command) == 0 {
		return nil, errors.New("bench serve: no server command")
	}
	var tok [8]byte
	_, _ = crand.Read(tok[:])
	s := &server{
		mark:   serveMark + "=" + hex.EncodeToString(tok[:]),
		log:    &serverLog{addr: make(chan string, 1)},
		exited: make(chan struct{}),
	}
	s.cmd = exec.Command(command[0], command[1:]...)
	s.cmd.Env = append(os.Environ(), s.mark)
	s.cmd.Stderr = s.log
	// A process group of its own: a ^C at the terminal reaches the
	// benchmark, which stops the server in order. Pdeathsig: a benchmark
	// killed outright takes the server with it.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.cmd.WaitDelay = 5 * time.Second // for its standard error to close
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench serve: starting the server: %w", err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	var err error
	select {
	case s.url = <-s.log.addr:
		return s, nil
	case <-s.exited:
		err = fmt.Errorf("bench serve: the server exited before serving (%v): %s", s.waitErr, s.log.text())
	case <-deadline.C:
		err = fmt.Errorf("bench serve: the server printed no address within 30s: %s", s.log.text())
	case <-ctx.Done():
		err = ctx.Err()
	}
	var rep ServeReport
	return nil, errors.Join(err, s.stop(&rep))
}

// stop sends SIGTERM and waits for the server to exit (SIGKILL past a
// deadline), then for its processes to go, and kills those left. It fills in
// the report's stop figures.
func (s *server) stop(rep *ServeReport) error {
	t0 := time.Now()
	var errs []error
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		errs = append(errs, fmt.Errorf("bench serve: stopping the server: %w", err))
	}
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	select {
	case <-s.exited:
	case <-deadline.C:
		rep.ServerKilled = true
		_ = s.cmd.Process.Kill()
		<-s.exited
		errs = append(errs, fmt.Errorf("bench serve: the server did not exit within a minute of SIGTERM; killed"))
	}
	rep.StopMs = float64(time.Since(t0).Microseconds()) / 1e3
	rep.ServerLog = s.log.text()
	if s.waitErr != nil && !rep.ServerKilled {
		errs = append(errs, fmt.Errorf("bench serve: the server exited with %v", s.waitErr))
	}
	// A shell SIGKILLed by the server lingers a moment before it is gone.
	if left := waitGone(marked(s.mark), 10*time.Second); len(left) > 0 {
		rep.ProcessesLeft = len(left)
		for _, pid := range left {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		waitGone(left, 10*time.Second)
		errs = append(errs, fmt.Errorf("bench serve: %d of the server's processes outlived it (killed now): %v", len(left), left))
	}
	return errors.Join(errs...)
}

// waitGone waits, on pidfds, until each process has exited, and returns
// those alive at the deadline.
func waitGone(pids []int, timeout time.Duration) []int {
	var left []int
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := 0, unix.EINTR
		for err == unix.EINTR { // the Go runtime's own signals interrupt poll
			n, err = unix.Poll(fds, max(int(time.Until(deadline)/time.Millisecond), 0))
		}
		unix.Close(fd)
		if n <= 0 {
			left = append(left, pid)
		}
	}
	return left
}

// serverLog takes the server's standard error: it sends the address of its
// first "serving MCP at" line on addr, and keeps the rest (clipped).
type serverLog struct {
	mu      sync.Mutex
	partial []byte
	kept    bytes.Buffer
	clipped int
	addr    chan string
	found   bool
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i+1]
		if rest, ok := strings.CutPrefix(string(line), serveLinePrefix); ok && !l.found {
			l.found = true
			l.addr <- strings.TrimSpace(rest)
		} else if l.kept.Len()+len(line) <= serverLogMax {
			l.kept.Write(line)
		} else {
			l.clipped++
		}
		l.partial = l.partial[:copy(l.partial, l.partial[i+1:])]
	}
	return len(p), nil
}

func (l *serverLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.kept.String() + string(l.partial)
	if l.clipped > 0 {
		s += fmt.Sprintf("(%d more lines)\n", l.clipped)
	}
	return s
}

// vmRSS is process pid's resident memory in KiB (VmRSS in
// /proc/PID/status: that process only, not its children).
func vmRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("bench serve: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bench serve: /proc/%d/status: VmRSS %q: %w", pid, rest, err)
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("bench serve: no VmRSS in /proc/%d/status (%v)", pid, sc.Err())
}

// raiseOpenFiles raises this process's open-file limit to its hard limit if
// the sessions need more, and says so when even that is too low. Measured
// at 1,000 sessions: the server holds about 9 descriptors a session (its
// two connections, the shell's terminal and what watches the shell), this
// process about 6 an agent of the Go API phase; a Go server raises its own
// limit to the same hard limit.
func raiseOpenFiles(sessions int) error {
	need := uint64(9*sessions + 256)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("bench serve: reading the open-file limit: %w", err)
	}
	if rl.Cur >= need {
		return nil
	}
	if rl.Cur < rl.Max {
		raised := rl
		raised.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &raised); err == nil {
			rl = raised
		}
	}
	if rl.Cur < need {
		return fmt.Errorf("bench serve: %d sessions need about %d open files in the server and in this process, which may have %d (ulimit -n; hard limit %d): raise the limit (ulimit -n %d) or run fewer sessions",
			sessions, need, rl.Cur, rl.Max, need)
	}
	return nil
}
