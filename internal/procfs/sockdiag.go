package procfs

import (
	"encoding/binary"
	"errors"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// unixPeer returns the inode of the socket at the other end of the Unix
// domain socket with inode ino, asking the kernel through sock_diag
// (NETLINK_SOCK_DIAG, one exact lookup, UDIAG_SHOW_PEER). /proc shows a
// socket's inode but never its peer, and the peer is what tells a
// socketpair a program made for itself (asyncio's self-pipe) from a
// connection to another program. Sockets of another network namespace are
// not found: the answer is then an error, and the socket counts as foreign.
//
// Peers never change once connected, so answers are cached by inode, and so
// are the sockets that have none (0).
func unixPeer(ino uint32) (uint32, error) {
	peerCache.Lock()
	peer, ok := peerCache.m[ino]
	peerCache.Unlock()
	if ok {
		if peer == 0 {
			return 0, errNoPeer
		}
		return peer, nil
	}
	peer, err := askUnixPeer(-1, ino)
	if err != nil {
		peer, err = askForeignPeer(ino)
	}
	if err != nil {
		// Not a Unix socket (a TCP connection), or one without a peer:
		// that does not change either, and is asked about at every look.
		peer = 0
	}
	peerCache.Lock()
	if len(peerCache.m) >= maxPeerCache {
		clear(peerCache.m) // inodes are reused; a bounded cache forgets all at once
	}
	peerCache.m[ino] = peer
	peerCache.Unlock()
	if peer == 0 {
		return 0, errNoPeer
	}
	return peer, nil
}

const maxPeerCache = 4096

var peerCache = struct {
	sync.Mutex
	m map[uint32]uint32
}{m: map[uint32]uint32{}}

var errNoPeer = errors.New("procfs: sock_diag: no peer for this socket")

// Constants of linux/unix_diag.h not in x/sys/unix.
const (
	udiagShowPeer = 0x4 // UDIAG_SHOW_PEER
	unixDiagPeer  = 2   // UNIX_DIAG_PEER, the attribute holding the peer's inode
)

// foreignDiag holds sock_diag sockets opened in other network namespaces
// (a sandbox's, by its init): a socket of a process there is found only by
// asking in its namespace. Socket inodes are unique on the machine, so each
// is asked in turn.
var foreignDiag = struct {
	sync.Mutex // also serializes the requests on the shared sockets
	fds        map[string]int
}{fds: map[string]int{}}

// RegisterNetDiag adds fd, a NETLINK_SOCK_DIAG socket opened in another
// network namespace, under name; procfs owns it from then on.
func RegisterNetDiag(name string, fd int) {
	foreignDiag.Lock()
	defer foreignDiag.Unlock()
	if old, ok := foreignDiag.fds[name]; ok {
		unix.Close(old)
	}
	foreignDiag.fds[name] = fd
}

// UnregisterNetDiag closes the socket registered under name.
func UnregisterNetDiag(name string) {
	foreignDiag.Lock()
	defer foreignDiag.Unlock()
	if fd, ok := foreignDiag.fds[name]; ok {
		unix.Close(fd)
		delete(foreignDiag.fds, name)
	}
}

func askForeignPeer(ino uint32) (uint32, error) {
	foreignDiag.Lock()
	defer foreignDiag.Unlock()
	for _, fd := range foreignDiag.fds {
		if peer, err := askUnixPeer(fd, ino); err == nil {
			return peer, nil
		}
	}
	return 0, errNoPeer
}

// askUnixPeer asks on fd, or on a socket of its own in this process's
// network namespace when fd is -1.
func askUnixPeer(fd int, ino uint32) (uint32, error) {
	if fd < 0 {
		own, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
		if err != nil {
			return 0, err
		}
		defer unix.Close(own)
		fd = own
	}
	// struct nlmsghdr, then struct unix_diag_req.
	req := make([]byte, unix.NLMSG_HDRLEN+24)
	le := binary.LittleEndian // netlink speaks the host's order; linux/amd64 and arm64 are little-endian
	le.PutUint32(req[0:], uint32(len(req)))
	le.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	le.PutUint16(req[6:], unix.NLM_F_REQUEST)
	le.PutUint32(req[8:], 1) // sequence
	b := req[unix.NLMSG_HDRLEN:]
	b[0] = unix.AF_UNIX
	le.PutUint32(b[4:], 0xffffffff) // every state
	le.PutUint32(b[8:], ino)
	le.PutUint32(b[12:], udiagShowPeer)
	le.PutUint32(b[16:], 0xffffffff) // no cookie
	le.PutUint32(b[20:], 0xffffffff)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	buf := make([]byte, 8192)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return 0, err
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if code := int32(le.Uint32(m.Data)); code != 0 {
					return 0, unix.Errno(-code)
				}
			}
			return 0, errNoPeer
		case unix.SOCK_DIAG_BY_FAMILY:
			// struct unix_diag_msg is 16 bytes; attributes follow.
			if len(m.Data) < 16 || le.Uint32(m.Data[4:]) != ino {
				continue
			}
			attrs := m.Data[16:]
			for len(attrs) >= unix.SizeofRtAttr {
				l := int(le.Uint16(attrs[0:]))
				typ := le.Uint16(attrs[2:])
				if l < unix.SizeofRtAttr || l > len(attrs) {
					break
				}
				if typ == unixDiagPeer && l >= unix.SizeofRtAttr+4 {
					return le.Uint32(attrs[unix.SizeofRtAttr:]), nil
				}
				attrs = attrs[min(len(attrs), (l+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1)):]
			}
		}
	}
	return 0, errNoPeer
}
