package procfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"os"
	"slices"
	"strconv"
	"strings"
)

// An event loop (select, poll or epoll) that watches the terminal may watch
// other things too. Those a program made for itself (an eventfd, a signalfd,
// a timerfd, a pipe or socketpair whose both ends it holds) can only be made
// ready by the program itself: its own threads, its own signals, its own
// timers. Anything else (a socket, a pipe from another program, the master
// side of another terminal, inotify) can wake it from outside: a relay such
// as ssh, script or docker exec sits in such a wait while the program it
// relays for works, so the wait is no proof that input is wanted.

// watchedSources reads what a blocked select, poll or epoll call watches.
// ok is false when the set could not be read (another process's memory).
func watchedSources(p Proc, base string, kind syscallKind, call Syscall) (fds []int, ok bool) {
	switch kind {
	case kindSelect:
		return selectSet(p, call)
	case kindPoll:
		return pollSet(p, call)
	case kindEpoll:
		return epollSet(base, int(call.Args[0]))
	}
	return nil, false
}

// sourceKinds splits fds into whether one is the terminal and descriptions
// of those that something outside the process can make ready.
func sourceKinds(p Proc, base string, fds []int, tty terminal) (hasTTY bool, foreign []string) {
	var own *ownFDs
	for _, fd := range fds {
		if tty.is(p, base, fd) {
			hasTTY = true
			continue
		}
		target, err := os.Readlink(base + "/fd/" + strconv.Itoa(fd))
		if err != nil {
			continue // closed meanwhile
		}
		if own == nil {
			own = readOwnFDs(base)
		}
		if d := foreignSource(target, own); d != "" && !slices.Contains(foreign, d) {
			foreign = append(foreign, d)
		}
	}
	return hasTTY, foreign
}

// ownFDs is what a process's descriptors point at: how many of them point
// at each target, and the inodes of its sockets.
type ownFDs struct {
	count   map[string]int
	sockets map[uint32]bool
}

func readOwnFDs(base string) *ownFDs {
	o := &ownFDs{count: map[string]int{}, sockets: map[uint32]bool{}}
	names, err := readDirNames(base + "/fd")
	if err != nil {
		return o
	}
	for _, n := range names {
		target, err := os.Readlink(base + "/fd/" + n)
		if err != nil {
			continue
		}
		o.count[target]++
		if ino, ok := socketInode(target); ok {
			o.sockets[ino] = true
		}
	}
	return o
}

func socketInode(target string) (uint32, bool) {
	s, ok := strings.CutPrefix(target, "socket:[")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 32)
	return uint32(n), err == nil
}

// foreignSource describes target if something outside the process can make
// it ready, and returns "" if only the process itself can.
func foreignSource(target string, own *ownFDs) string {
	switch {
	case target == "anon_inode:[eventfd]", target == "anon_inode:[signalfd]", target == "/dev/null":
		return "" // a child's exit, which a signalfd may report, is looked for apart (liveChild)
	case target == "anon_inode:[timerfd]":
		return "a timer of its own (timerfd)"
	case strings.HasPrefix(target, "pipe:["):
		if own.count[target] >= 2 {
			return "" // both ends held here: a self-pipe (the other end is not always open for writing, but then nothing writes it)
		}
		return "a pipe from another program"
	case strings.HasPrefix(target, "socket:["):
		ino, _ := socketInode(target)
		if peer, err := unixPeer(ino); err == nil && own.sockets[peer] {
			return "" // a socketpair it made for itself
		}
		return "a socket (a connection or a server)"
	case target == "/dev/ptmx", target == "/dev/pts/ptmx":
		return "the master side of another terminal (a relay, as script, ssh -t and docker exec -it are)"
	case target == "anon_inode:inotify", target == "anon_inode:[fanotify]":
		return "file changes (inotify)"
	case target == "anon_inode:[pidfd]":
		return "another process's exit"
	case target == "anon_inode:[eventpoll]":
		return "another epoll set"
	}
	return target
}

// selectSet reads the read set of select/pselect6(nfds, readfds, ...).
func selectSet(p Proc, call Syscall) ([]int, bool) {
	nfds := int(call.Args[0])
	addr := call.Args[1]
	if nfds <= 0 || addr == 0 {
		return nil, true
	}
	nfds = min(nfds, maxWatchedFDs)
	set, err := readMem(p.PID, addr, (nfds+7)/8)
	if err != nil {
		return nil, false
	}
	// fd_set is an array of longs; on little-endian machines bit n of the set
	// is bit n%8 of byte n/8.
	var fds []int
	for fd := 0; fd < nfds; fd++ {
		if set[fd/8]&(1<<(fd%8)) != 0 {
			fds = append(fds, fd)
		}
	}
	return fds, true
}

// pollSet reads the pollfd array of poll/ppoll(fds, nfds, ...): the
// descriptors watched for input.
func pollSet(p Proc, call Syscall) ([]int, bool) {
	addr := call.Args[0]
	nfds := int(call.Args[1])
	if nfds <= 0 || addr == 0 {
		return nil, true
	}
	nfds = min(nfds, maxWatchedFDs)
	const pollfdSize = 8 // int fd; short events; short revents
	raw, err := readMem(p.PID, addr, nfds*pollfdSize)
	if err != nil {
		return nil, false
	}
	const wantsInput = 0x001 | 0x002 | 0x040 // POLLIN | POLLPRI | POLLRDNORM
	var fds []int
	for i := 0; i < nfds; i++ {
		rec := raw[i*pollfdSize:]
		fd := int32(binary.LittleEndian.Uint32(rec[0:4]))
		events := binary.LittleEndian.Uint16(rec[4:6])
		if fd >= 0 && events&wantsInput != 0 {
			fds = append(fds, int(fd))
		}
	}
	return fds, true
}

// epollSet lists the targets of an epoll descriptor watched for input,
// shown as "tfd: N events: HEX ..." lines in /proc/PID/fdinfo/EPFD (a
// target whose one-shot event fired, or watched for output only, is left
// out).
func epollSet(base string, epfd int) ([]int, bool) {
	raw, err := os.ReadFile(base + "/fdinfo/" + strconv.Itoa(epfd))
	if err != nil {
		return nil, false
	}
	var fds []int
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("tfd:")) {
			continue
		}
		// "tfd:        21 events:       19 data: ..." (events in hex)
		fields := bytes.Fields(line)
		if len(fields) < 4 || string(fields[2]) != "events:" {
			continue
		}
		fd, err1 := strconv.Atoi(string(fields[1]))
		events, err2 := strconv.ParseUint(string(fields[3]), 16, 32)
		const wantsInput = 0x001 | 0x002 | 0x2000 // EPOLLIN | EPOLLPRI | EPOLLRDHUP
		if err1 == nil && err2 == nil && events&wantsInput != 0 {
			fds = append(fds, fd)
		}
	}
	return fds, true
}
