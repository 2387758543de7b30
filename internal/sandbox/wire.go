package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// The host and init speak in datagrams on a SOCK_SEQPACKET socket pair: one
// JSON object a message, descriptors beside it (SCM_RIGHTS).

// request is a message from the host to init.
type request struct {
	Op opName `json:"op"`
	ID uint64 `json:"id"`
	// For opExec.
	PTY  uint64   `json:"pty,omitempty"`
	Path string   `json:"path,omitempty"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
}

// reply is a message from init to the host.
type reply struct {
	Op opName `json:"op"`
	ID uint64 `json:"id,omitempty"`
	// Err says why a request failed; Errno is its number, when it has one.
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"`
	// TTY is a new terminal's path inside the sandbox (opPTY).
	TTY string `json:"tty,omitempty"`
	// PID is a program's pid inside the sandbox (opExec, opExited).
	PID int `json:"pid,omitempty"`
	// Status is the wait status of a program that ended (opExited).
	Status uint32 `json:"status,omitempty"`
	// Notes are what init's set-up could not do (opHello).
	Notes []string `json:"notes,omitempty"`
}

type opName string

const (
	// opHello: init is ready; a pidfd of init comes with it.
	opHello opName = "hello"
	// opPTY: open a terminal in the sandbox's devpts; the answer carries
	// the master and the slave.
	opPTY opName = "pty"
	// opExec: start a program in a new session on terminal PTY; the answer
	// carries a pidfd of it.
	opExec opName = "exec"
	// opClosePTY: init drops its copy of terminal PTY (the host closes
	// its own).
	opClosePTY opName = "closepty"
	// opAck: the host has read the pid of the program opExec started;
	// until then init reaps nothing, so that pid still names it.
	opAck opName = "ack"
	// opExited: a program started by opExec has ended (init reaped it).
	opExited opName = "exited"
)

// maxMessage bounds a message: a program's arguments and environment
// together may not pass it (the kernel's own limit for both is 2 MiB).
const maxMessage = 4 << 20

// conn is one end of the socket pair.
type conn struct{ uc *net.UnixConn }

func newConn(f *os.File) (*conn, error) {
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("sandbox: control descriptor is a %T, not a unix socket", c)
	}
	// A big environment is one datagram; let it through when the system
	// allows (the buffer is capped at twice net.core.wmem_max otherwise).
	_ = uc.SetWriteBuffer(maxMessage)
	if raw, err := uc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, maxMessage)
		})
	}
	return &conn{uc: uc}, nil
}

// socketPair returns the host's end and init's end.
func socketPair() (host, init *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: socket pair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "sandbox-host"), os.NewFile(uintptr(fds[1]), "sandbox-init"), nil
}

func (c *conn) send(v any, files ...*os.File) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	_, _, err = c.uc.WriteMsgUnix(b, oob, nil)
	if errors.Is(err, syscall.EMSGSIZE) {
		return fmt.Errorf("a message of %d bytes is more than the socket to the sandbox takes (arguments and environment too large?): %w", len(b), err)
	}
	return err
}

// errLostFDs: descriptors sent with a message were lost on the way, the
// receiver's open-file limit reached (the kernel drops what it cannot
// install, MSG_CTRUNC). The message itself is whole.
var errLostFDs = fmt.Errorf("descriptors sent by the sandbox were dropped: %w", syscall.EMFILE)

// recv reads one message into v and returns the descriptors that came with
// it, each close-on-exec. When some were dropped (errLostFDs), v is still
// read, with the ones that came.
func (c *conn) recv(buf []byte, v any) ([]*os.File, error) {
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := c.uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				unix.CloseOnExec(fd)
				files = append(files, os.NewFile(uintptr(fd), "sandbox-fd"))
			}
		}
	}
	if n == 0 && oobn == 0 {
		return nil, errEOF
	}
	if flags&unix.MSG_TRUNC != 0 {
		closeAll(files)
		return nil, errors.New("sandbox: a message was cut short")
	}
	if err := json.Unmarshal(buf[:n], v); err != nil {
		closeAll(files)
		return nil, fmt.Errorf("sandbox: reading a message: %w", err)
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return files, errLostFDs
	}
	return files, nil
}

var errEOF = errors.New("sandbox: the other end closed")

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
