package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"

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
// or "NR A0 A1 A2 A3 A4 A5 SP PC" with the numbers in hexadecimal. It does
// not allocate unless the text is malformed: a probe reads it per command.
func ParseSyscall(b []byte) (Syscall, error) {
	var fields [9][]byte
	n := 0
	for i := 0; i < len(b); {
		for i < len(b) && (b[i] == ' ' || b[i] == '\n') {
			i++
		}
		j := i
		for j < len(b) && b[j] != ' ' && b[j] != '\n' {
			j++
		}
		if j > i {
			if n == len(fields) {
				return Syscall{}, badSyscall(b)
			}
			fields[n] = b[i:j]
			n++
		}
		i = j
	}
	if n == 1 && string(fields[0]) == "running" {
		return Syscall{Running: true, Nr: -1}, nil
	}
	if n == 0 {
		return Syscall{}, badSyscall(b)
	}
	nr, ok := decimal(fields[0])
	if !ok {
		return Syscall{}, badSyscall(b)
	}
	s := Syscall{Nr: nr}
	rest := fields[1:n]
	if nr >= 0 {
		if len(rest) != 8 {
			return Syscall{}, badSyscall(b)
		}
		for i := range s.Args {
			if s.Args[i], ok = hexNumber(rest[i]); !ok {
				return Syscall{}, badSyscall(b)
			}
		}
		rest = rest[6:]
	} else {
		s.Nr = -1
	}
	if len(rest) != 2 {
		return Syscall{}, badSyscall(b)
	}
	var ok1, ok2 bool
	s.SP, ok1 = hexNumber(rest[0])
	s.PC, ok2 = hexNumber(rest[1])
	if !ok1 || !ok2 {
		return Syscall{}, badSyscall(b)
	}
	return s, nil
}

func badSyscall(b []byte) error { return fmt.Errorf("procfs: unexpected syscall line %q", b) }

// decimal parses an optionally negative decimal number.
func decimal(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// hexNumber parses "0x..." (the prefix is optional).
func hexNumber(b []byte) (uint64, bool) {
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		b = b[2:]
	}
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
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

// errGone is what a nil SyscallReader reads: a process that ended before
// it could be opened.
var errGone = fmt.Errorf("procfs: process gone: %w", unix.ESRCH)

// Read returns what the process is doing now. A nil reader reads a
// process gone.
func (r *SyscallReader) Read() (Syscall, error) {
	if r == nil {
		return Syscall{}, errGone
	}
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
func (r *SyscallReader) Close() error {
	if r == nil {
		return nil
	}
	return r.f.Close()
}
