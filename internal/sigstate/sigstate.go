package sigstate

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// State is the signal state a child of this process starts with, beyond the
// defaults: signals blocked in its mask and signals set to SIG_IGN.
type State struct {
	Blocked []syscall.Signal
	Ignored []syscall.Signal
}

// Clean reports whether a child starts with no signal blocked or ignored.
func (s State) Clean() bool { return len(s.Blocked) == 0 && len(s.Ignored) == 0 }

// String names the signals, e.g. "SIGWINCH blocked; SIGINT, SIGPIPE ignored".
func (s State) String() string {
	var parts []string
	if len(s.Blocked) > 0 {
		parts = append(parts, names(s.Blocked)+" blocked")
	}
	if len(s.Ignored) > 0 {
		parts = append(parts, names(s.Ignored)+" ignored")
	}
	if len(parts) == 0 {
		return "no signal blocked or ignored"
	}
	return strings.Join(parts, "; ")
}

func names(sigs []syscall.Signal) string {
	s := make([]string, len(sigs))
	for i, sig := range sigs {
		if name := unix.SignalName(sig); name != "" {
			s[i] = name
		} else {
			s[i] = "signal " + strconv.Itoa(int(sig))
		}
	}
	return strings.Join(s, ", ")
}

// Inherited reads the state children would start with from /proc. Ignored
// signals are process-wide (SigIgn). The mask is per thread: every thread the
// Go runtime creates starts with the process's start-up mask, which is what
// a child gets, while a thread may add signals for a moment (the runtime
// blocks all of them around fork) or for good (the os/signal thread). So the
// signals blocked in every thread are the ones a child inherits.
func Inherited() (State, error) {
	var st State
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return st, fmt.Errorf("sigstate: %w", err)
	}
	ign, err := statusMask(status, "SigIgn")
	if err != nil {
		return st, err
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return st, fmt.Errorf("sigstate: %w", err)
	}
	blocked := ^uint64(0)
	seen := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err != nil {
			continue // the thread ended
		}
		m, err := statusMask(b, "SigBlk")
		if err != nil {
			return st, err
		}
		blocked &= m
		seen++
	}
	if seen == 0 {
		return st, fmt.Errorf("sigstate: no thread of this process found in /proc/self/task")
	}
	st.Blocked = signals(blocked)
	st.Ignored = signals(ign)
	return st, nil
}

// statusMask parses the hexadecimal signal set on the line "field:\t..." of
// a /proc status file; bit n-1 stands for signal n.
func statusMask(status []byte, field string) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if ok && name == field {
			m, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("sigstate: /proc status %s %q: %w", field, value, err)
			}
			return m, nil
		}
	}
	return 0, fmt.Errorf("sigstate: no %s line in /proc status", field)
}

// signals lists the standard signals in a mask. Real-time signals (32 and
// up) are left out: the C library reserves the first of them for itself and
// blocks them in its own threads, and no terminal program relies on them.
func signals(mask uint64) []syscall.Signal {
	var sigs []syscall.Signal
	for n := 1; n < 32; n++ {
		if mask&(1<<(n-1)) == 0 {
			continue
		}
		if n == int(unix.SIGKILL) || n == int(unix.SIGSTOP) {
			continue // can be neither blocked nor ignored; never reported
		}
		sigs = append(sigs, syscall.Signal(n))
	}
	return sigs
}

// reexecMark is set in the environment of the re-executed program, so that
// a state Reexec cannot clean never becomes an exec loop. Reexec removes it.
const reexecMark = "DSH_ACTORS_SIGNALS_RESET"

// Reexec executes the program again with no signal blocked or ignored, when
// its children would otherwise inherit some. It returns nil at once when the
// state is clean. In the re-executed program it returns nil when the state is
// now clean, and an error naming what is still blocked or ignored when not;
// it never executes twice. On success of the exec it does not return.
//
// Call it first thing in main (or TestMain): the exec ends every goroutine
// and discards everything the program did before.
func Reexec() error {
	again := os.Getenv(reexecMark) != ""
	if again {
		_ = os.Unsetenv(reexecMark)
		// Executed as /proc/self/exe, the kernel named us "exe": give the
		// program its own name back for ps, pgrep and top.
		name := filepath.Base(os.Args[0])
		if len(name) > 15 {
			name = name[:15] // the kernel's limit (TASK_COMM_LEN - 1)
		}
		_ = os.WriteFile("/proc/self/comm", []byte(name), 0)
	}
	st, err := Inherited()
	if err != nil {
		return err
	}
	if st.Clean() {
		return nil
	}
	if again {
		return fmt.Errorf("sigstate: programs started from here get %s, even after re-executing with a clean state", st)
	}
	// The running binary itself, even if its file was replaced since.
	const exe = "/proc/self/exe"

	// exec keeps the calling thread's mask, so clear it on a thread that
	// stays ours until the exec.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if len(st.Ignored) > 0 {
		// A caught signal is reset to the default by exec; an ignored one
		// would stay ignored. The channel is never read: a signal that
		// arrives before the exec is dropped, as it was when ignored.
		sigs := make([]os.Signal, len(st.Ignored))
		for i, s := range st.Ignored {
			sigs[i] = s
		}
		signal.Notify(make(chan os.Signal, 1), sigs...)
	}
	var old unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &unix.Sigset_t{}, &old); err != nil {
		return fmt.Errorf("sigstate: clearing the signal mask: %w", err)
	}
	err = syscall.Exec(exe, os.Args, append(os.Environ(), reexecMark+"=1"))
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	return fmt.Errorf("sigstate: re-executing %s to clear %s: %w", exe, st, err)
}

// Ignores reports whether process pid ignores sig: its disposition is
// SIG_IGN, as bash's trap with an empty action sets it.
func Ignores(pid int, sig syscall.Signal) (bool, error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, fmt.Errorf("sigstate: %w", err)
	}
	ign, err := statusMask(status, "SigIgn")
	if err != nil {
		return false, err
	}
	return sig >= 1 && sig < 64 && ign&(1<<(sig-1)) != 0, nil
}

// Pending reports whether sig is pending for process pid (sent to it or to
// its group and not taken yet, or blocked), and whether pid ignores it.
// Both come from one read of /proc/PID/status: SigPnd (the main thread's)
// and ShdPnd (the process's), and SigIgn. A process seen blocked in a
// system call while a caught signal was sent before the look has taken it:
// the signal woke it, so it was not blocked meanwhile.
func Pending(pid int, sig syscall.Signal) (pending, ignored bool, err error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false, false, fmt.Errorf("sigstate: %w", err)
	}
	if sig < 1 || sig > 64 {
		return false, false, fmt.Errorf("sigstate: no signal %d", sig)
	}
	bit := uint64(1) << (sig - 1)
	for _, field := range []string{"SigPnd", "ShdPnd"} {
		m, err := statusMask(status, field)
		if err != nil {
			return false, false, err
		}
		pending = pending || m&bit != 0
	}
	ign, err := statusMask(status, "SigIgn")
	if err != nil {
		return false, false, err
	}
	return pending, ign&bit != 0, nil
}
