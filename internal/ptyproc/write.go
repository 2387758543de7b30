package ptyproc

import "golang.org/x/sys/unix"

// Write queues b for the program's input. It never blocks: what the
// terminal cannot take at once is written by the writer goroutine.
func (p *Process) Write(b []byte) {
	if len(b) == 0 {
		return
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if len(p.writeQueue) == 0 {
		// Fast path: try the whole write now.
		var n int
		_ = p.rc.Control(func(fd uintptr) {
			n, _ = unix.Write(int(fd), b)
		})
		if n < 0 {
			n = 0
		}
		p.bytesWritten.Add(int64(n))
		if n == len(b) {
			return
		}
		b = b[n:]
	}
	p.writeQueue = append(p.writeQueue, b...)
	select {
	case p.writeWake <- struct{}{}:
	default:
	}
}

func (p *Process) writeLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.writeWake:
		case <-p.done:
			return
		}
		for p.writeSome() {
		}
	}
}

// writeSome writes what the queue holds with one write(2), parking in the
// poller while the terminal's input queue is full (Close wakes it). It
// reports whether more is left to write. Each attempt takes writeMu and
// looks at the queue afresh, so nothing discardInput dropped is written.
func (p *Process) writeSome() bool {
	var n int
	var werr error
	err := p.rc.Write(func(fd uintptr) bool {
		p.writeMu.Lock()
		defer p.writeMu.Unlock()
		if len(p.writeQueue) == 0 {
			n, werr = 0, nil
			return true
		}
		n, werr = unix.Write(int(fd), p.writeQueue)
		if werr == unix.EAGAIN {
			return false
		}
		if n > 0 {
			p.bytesWritten.Add(int64(n))
			p.writeQueue = p.writeQueue[n:]
		}
		if werr != nil || len(p.writeQueue) == 0 {
			p.writeQueue = nil // a failed write fails for the rest too
		}
		return true
	})
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if err != nil {
		p.writeQueue = nil // closed, or woken by Close
	}
	return len(p.writeQueue) > 0
}

// discardInput drops the input not yet read by the program, as the line
// discipline does when it turns ^C, ^\ or ^Z into a signal (unless the
// program set NOFLSH): what is still queued here, and what the terminal
// holds unread. Output is never dropped.
func (p *Process) discardInput() error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	t, err := unix.IoctlGetTermios(p.slaveFD, unix.TCGETS)
	if err != nil {
		return err
	}
	if t.Lflag&unix.NOFLSH != 0 {
		return nil
	}
	p.writeQueue = nil
	return unix.IoctlSetInt(p.slaveFD, unix.TCFLSH, unix.TCIFLUSH)
}
