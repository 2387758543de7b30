package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Syscall is what /proc/PID/syscall says a task is doing at the moment it is
// read.
type Syscall struct {
	// Running: the task is on a CPU or about to be; nothing else is known.
	Running bool
	// Nr is the system call it is blocked in, or -1 when it is blocked
	// outside one.
	Nr int
	// Args are the call's six arguments.
	Args [6]uint64
	// SP and PC are its user stack and instruction pointers. The stack
	// pointer tells apart two blocking calls that are otherwise alike (the
	// same read made from different depths of a program).
	SP, PC uint64
}

// Blocked reports whether the task is blocked in a system call.
func (s Syscall) Blocked() bool { return !s.Running && s.Nr >= 0 }

func (s Syscall) String() string {
	if s.Running {
		return "running"
	}
	return fmt.Sprintf("%d %#x %#x %#x sp=%#x", s.Nr, s.Args[0], s.Args[1], s.Args[2], s.SP)
}

// ParseSyscall parses the text of /proc/PID/syscall: "running", "-1 SP PC",
// or "NR A0 A1 A2 A3 A4 A5 SP PC" with the numbers in hexadecimal.
func ParseSyscall(b []byte) (Syscall, error) {
	fields := strings.Fields(string(b))
	if len(fields) == 1 && fields[0] == "running" {
		return Syscall{Running: true, Nr: -1}, nil
	}
	bad := fmt.Errorf("procfs: unexpected syscall line %q", b)
	if len(fields) == 0 {
		return Syscall{}, bad
	}
	nr, err := strconv.Atoi(fields[0])
	if err != nil {
		return Syscall{}, bad
	}
	hex := func(s string) (uint64, error) { return strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64) }
	s := Syscall{Nr: nr}
	rest := fields[1:]
	if nr >= 0 {
		if len(rest) != 8 {
			return Syscall{}, bad
		}
		for i := range s.Args {
			if s.Args[i], err = hex(rest[i]); err != nil {
				return Syscall{}, bad
			}
		}
		rest = rest[6:]
	} else {
		s.Nr = -1
	}
	if len(rest) != 2 {
		return Syscall{}, bad
	}
	if s.SP, err = hex(rest[0]); err != nil {
		return Syscall{}, bad
	}
	if s.PC, err = hex(rest[1]); err != nil {
		return Syscall{}, bad
	}
	return s, nil
}

// SyscallReader reads one process's /proc/PID/syscall again and again
// through a descriptor it keeps open: one pread per look instead of an open,
// a read and a close. It is not safe for concurrent use.
type SyscallReader struct {
	f   *os.File
	fd  int
	buf [256]byte
}

// OpenSyscall opens /proc/PID/syscall of pid's main thread.
func OpenSyscall(pid int) (*SyscallReader, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/syscall")
	if err != nil {
		return nil, fmt.Errorf("procfs: %w", err)
	}
	return &SyscallReader{f: f, fd: int(f.Fd())}, nil
}

// Read returns what the process is doing now.
func (r *SyscallReader) Read() (Syscall, error) {
	n, err := unix.Pread(r.fd, r.buf[:], 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return Syscall{}, fmt.Errorf("procfs: process gone: %w", err)
		}
		return Syscall{}, fmt.Errorf("procfs: reading syscall: %w", err)
	}
	return ParseSyscall(r.buf[:n])
}

// Close closes the descriptor.
func (r *SyscallReader) Close() error { return r.f.Close() }
