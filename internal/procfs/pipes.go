package procfs

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
)

// A shell whose output goes through a pipe (exec > >(tee -a log) 2>&1, the
// logging idiom) has it written to the terminal by another process, later:
// bash is back at its prompt while tee still copies what the command
// printed. These functions find those writers and say whether they have
// copied everything, so that a caller can wait for them before it answers.

// OutputPipes returns the pipes ("pipe:[N]") that process pid's standard
// output and standard error go to; none when both are files or terminals.
func OutputPipes(pid int) []string {
	var pipes []string
	for _, fd := range []string{"1", "2"} {
		target, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd)
		if err == nil && strings.HasPrefix(target, "pipe:[") && !slices.Contains(pipes, target) {
			pipes = append(pipes, target)
		}
	}
	return pipes
}

// PipeReader is a process that reads one of the pipes asked about.
type PipeReader struct {
	PID  int
	Comm string
	// Idle: blocked reading one of the pipes, so that pipe is empty and
	// whatever it read before has been written on.
	Idle bool

	ppid          int
	waitsForChild bool
}

// PipeReaders lists the processes of session sid that hold the read end of
// one of pipes, and, in turn, those reading the pipes their own output goes
// to (tee log | grep x), however long the chain: each exec > >(tee -a log)
// in a shell whose output is a pipe already adds a hop. Every round lists
// members not seen before, or ends. It reads every process's stat and each
// member's descriptors.
func PipeReaders(sid int, pipes []string) ([]PipeReader, error) {
	members, err := Session(sid)
	if err != nil {
		return nil, err
	}
	var readers []PipeReader
	seen := map[int]bool{}
	for len(pipes) > 0 {
		var next []string
		for _, m := range members {
			if seen[m.PID] || m.Zombie() {
				continue
			}
			base := "/proc/" + strconv.Itoa(m.PID)
			fds := readsPipe(base, pipes)
			if len(fds) == 0 {
				continue
			}
			seen[m.PID] = true
			reading, waiting := blockedReading(m, base, fds)
			readers = append(readers, PipeReader{PID: m.PID, Comm: currentComm(m), Idle: reading, ppid: m.PPID, waitsForChild: waiting})
			next = append(next, OutputPipes(m.PID)...)
		}
		pipes = next
	}
	// A holder that waits for its children (the subshell of >(tee log |
	// cat)) reads nothing itself: it is idle if a child of its holds the
	// pipe too. Without one (the child just forked, not yet listed), it is
	// not known to be.
	for i, r := range readers {
		if r.waitsForChild {
			readers[i].Idle = slices.ContainsFunc(readers, func(o PipeReader) bool { return o.ppid == r.PID })
		}
	}
	return readers, nil
}

// readsPipe returns the descriptors of the process at base that are the
// read end of one of pipes.
func readsPipe(base string, pipes []string) []int {
	names, err := readDirNames(base + "/fd")
	if err != nil {
		return nil
	}
	var fds []int
	for _, n := range names {
		target, err := os.Readlink(base + "/fd/" + n)
		if err != nil || !slices.Contains(pipes, target) {
			continue
		}
		info, err := os.ReadFile(base + "/fdinfo/" + n)
		if err != nil {
			continue
		}
		if flags, ok := fdFlags(info); ok && flags&3 == 0 { // O_RDONLY
			if fd, err := strconv.Atoi(n); err == nil {
				fds = append(fds, fd)
			}
		}
	}
	return fds
}

// fdFlags reads the octal "flags:" line of an fdinfo file.
func fdFlags(info []byte) (uint64, bool) {
	for line := range bytes.Lines(info) {
		if rest, ok := bytes.CutPrefix(line, []byte("flags:")); ok {
			v, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 8, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// blockedReading reports whether the main thread of p is blocked in a read
// of one of fds, or in a wait for a child.
func blockedReading(p Proc, base string, fds []int) (reading, waiting bool) {
	if p.State == 'T' || p.State == 't' {
		return false, false
	}
	raw, err := os.ReadFile(base + "/syscall")
	if err != nil {
		return false, false
	}
	call, err := ParseSyscall(raw)
	if err != nil || !call.Blocked() {
		return false, false
	}
	kind, known := syscallKinds[call.Nr]
	return known && kind == kindRead && slices.Contains(fds, int(call.Args[0])), known && kind == kindWaitChild
}
