package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// Proc is one line of /proc/PID/stat, reduced to what this project uses.
type Proc struct {
	PID     int
	PPID    int
	PGRP    int
	Session int
	// State is the one-letter state: R, S, D, Z, T, ...
	State byte
	// TTYNr is the controlling terminal's device number, encoded as the
	// kernel shows it (0 for none).
	TTYNr int
	// Comm is the executable name as the kernel keeps it (at most 15 bytes).
	Comm string
	// Start is when the process started, in clock ticks after boot.
	Start uint64
	// CPU is the processor time it has used, user and system, in clock
	// ticks.
	CPU uint64
}

// Zombie reports whether the process has exited and only waits to be reaped.
func (p Proc) Zombie() bool { return p.State == 'Z' || p.State == 'X' }

// ErrNoProcess is returned when the process does not exist (any more).
var ErrNoProcess = errors.New("procfs: no such process")

// Stat reads /proc/PID/stat.
func Stat(pid int) (Proc, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errSRCH) {
			return Proc{}, ErrNoProcess
		}
		return Proc{}, err
	}
	return parseStat(b)
}

// parseStat parses "pid (comm) state ppid pgrp session ...". The comm field
// may itself contain spaces and parentheses, so it ends at the last ')'.
func parseStat(b []byte) (Proc, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Proc{}, fmt.Errorf("procfs: malformed stat line %q", b)
	}
	var p Proc
	var err error
	if p.PID, err = strconv.Atoi(string(bytes.TrimSpace(b[:open]))); err != nil {
		return Proc{}, fmt.Errorf("procfs: malformed pid in stat line %q", b)
	}
	p.Comm = string(b[open+1 : closing])
	fields := bytes.Fields(b[closing+1:])
	// state ppid pgrp session tty_nr ... starttime is the 20th field after
	// the name.
	if len(fields) < 20 || len(fields[0]) != 1 {
		return Proc{}, fmt.Errorf("procfs: malformed stat line %q", b)
	}
	p.State = fields[0][0]
	nums := [4]*int{&p.PPID, &p.PGRP, &p.Session, &p.TTYNr}
	for i, dst := range nums {
		if *dst, err = strconv.Atoi(string(fields[i+1])); err != nil {
			return Proc{}, fmt.Errorf("procfs: malformed stat line %q", b)
		}
	}
	if p.Start, err = strconv.ParseUint(string(fields[19]), 10, 64); err != nil {
		return Proc{}, fmt.Errorf("procfs: malformed stat line %q", b)
	}
	// utime and stime, the 14th and 15th fields.
	utime, err1 := strconv.ParseUint(string(fields[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return Proc{}, fmt.Errorf("procfs: malformed stat line %q", b)
	}
	p.CPU = utime + stime
	return p, nil
}

// Marked reports whether process pid was started with the environment
// variable name holding token among its colon-separated values. The
// environment is the one the process was executed with; a process that
// cannot be read (gone, another user's) is not marked.
func Marked(pid int, name, token string) bool {
	m, _ := marked(pid, name, token)
	return m
}

// marked is Marked, and whether the answer is sure: a process caught in
// execve reads with an empty environment (or not at all) for a moment.
func marked(pid int, name, token string) (ok, sure bool) {
	tokens, sure := markTokens(pid, name)
	for _, t := range tokens {
		if t == token {
			return true, true
		}
	}
	return false, sure
}

// markTokens returns the colon-separated values of variable name in pid's
// environment. sure is false when the environment could not be read for a
// reason that may pass (a process in the middle of execve shows an empty
// one).
func markTokens(pid int, name string) (tokens []string, sure bool) {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		gone := errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
		return nil, gone || errors.Is(err, fs.ErrPermission)
	}
	if len(env) == 0 {
		return nil, false
	}
	prefix := []byte(name + "=")
	for entry := range bytes.SplitSeq(env, []byte{0}) {
		if value, ok := bytes.CutPrefix(entry, prefix); ok {
			for t := range bytes.SplitSeq(value, []byte{':'}) {
				tokens = append(tokens, string(t))
			}
			return tokens, true
		}
	}
	return nil, true
}

// List returns every process that exists while /proc is read. Processes that
// exit during the scan are skipped.
func List() ([]Proc, error) {
	procs, _, err := list()
	return procs, err
}

// list is List, and how many processes were listed but gone (or
// unreadable) when their stat was read.
func list() (procs []Proc, vanished int, err error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, 0, err
	}
	procs = make([]Proc, 0, len(names))
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		p, err := Stat(pid)
		if err != nil {
			vanished++
			continue // exited meanwhile, or unreadable: not ours
		}
		procs = append(procs, p)
	}
	return procs, vanished, nil
}

// ErrBadID is returned for a session or group id that cannot be one of ours:
// 0 would match kernel threads and 1 is init's.
var ErrBadID = errors.New("procfs: session and group ids must be greater than 1")

// Session returns the live (not zombie) members of session sid.
func Session(sid int) ([]Proc, error) {
	if sid <= 1 {
		return nil, fmt.Errorf("%w (got %d)", ErrBadID, sid)
	}
	return filter(func(p Proc) bool { return p.Session == sid && !p.Zombie() })
}

// Group returns the live members of process group pgrp.
func Group(pgrp int) ([]Proc, error) {
	if pgrp <= 1 {
		return nil, fmt.Errorf("%w (got %d)", ErrBadID, pgrp)
	}
	return filter(func(p Proc) bool { return p.PGRP == pgrp && !p.Zombie() })
}

// GroupCPU sums what the members of process group pgrp now alive have run:
// their processor time in clock ticks (every thread, but charged a tick at
// a time, so a process that runs little can go a while without one) and
// their main threads' time on a CPU in nanoseconds (/proc/PID/schedstat,
// exact). Two sums that differ mean a member ran between them. It reads
// every process's stat.
func GroupCPU(pgrp int) (uint64, error) {
	members, err := Group(pgrp)
	var cpu uint64
	for _, m := range members {
		cpu += m.CPU
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(m.PID) + "/schedstat"); err == nil {
			if f := bytes.Fields(b); len(f) > 0 {
				ns, _ := strconv.ParseUint(string(f[0]), 10, 64)
				cpu += ns
			}
		}
	}
	return cpu, err
}

func filter(keep func(Proc) bool) ([]Proc, error) {
	all, err := List()
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, p := range all {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// IOCounter reads a process's read count (rchar in /proc/PID/io, its
// children not included) through a descriptor kept open: one pread a look.
type IOCounter struct {
	f   *os.File
	buf [512]byte
}

// OpenIOCounter opens pid's counter.
func OpenIOCounter(pid int) (*IOCounter, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return nil, err
	}
	return &IOCounter{f: f}, nil
}

// ReadChars is how many bytes the process has read with read(2) and its
// kind so far.
func (c *IOCounter) ReadChars() (uint64, error) {
	n, err := c.f.ReadAt(c.buf[:], 0)
	if n == 0 && err != nil {
		return 0, err
	}
	b := c.buf[:n]
	const key = "rchar: "
	if len(b) < len(key) || string(b[:len(key)]) != key {
		return 0, fmt.Errorf("procfs: %s does not start with rchar", c.f.Name())
	}
	var v uint64
	for _, d := range b[len(key):] {
		if d < '0' || d > '9' {
			break
		}
		v = v*10 + uint64(d-'0')
	}
	return v, nil
}

// Close closes the descriptor.
func (c *IOCounter) Close() error { return c.f.Close() }
