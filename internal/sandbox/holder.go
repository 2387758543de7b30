package sandbox

import (
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Holder is an agent's sandbox, made at its first use and made again when
// the one before has ended (its init was killed from outside): the agent's
// shell, terminals and tasks all get theirs here, so they share it.
type Holder struct {
	want   Want
	spares *Spares // may be nil
	log    *slog.Logger
	// made is called with each sandbox made (for metrics); it may be nil.
	made func(Report, time.Duration)

	mu       sync.Mutex
	sb       *Sandbox
	closed   bool
	off      bool // nothing could be had; programs run on the host
	notified bool
	notice   string
}

// NewHolder returns a holder that makes sandboxes as w asks, or takes one
// of spares (which may be nil) made alike. Level off makes none: Get
// returns nil.
func NewHolder(w Want, spares *Spares, log *slog.Logger, made func(Report, time.Duration)) *Holder {
	if log == nil {
		log = slog.Default()
	}
	return &Holder{want: w, spares: spares, log: log, made: made}
}

// ErrClosed is returned by Get once the holder is closed.
var ErrClosed = errors.New("sandbox: the agent has stopped")

// Get returns the agent's sandbox, making it if there is none (or it has
// ended); nil with level off. It blocks while a sandbox is made (tens of
// milliseconds).
func (h *Holder) Get() (*Sandbox, error) {
	if h == nil || h.want.Level == LevelOff || h.want.Level == "" {
		return nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if h.sb != nil {
		if !h.sb.Ended() {
			return h.sb, nil
		}
		h.log.Warn("sandbox: the agent's sandbox ended; making a new one", "init", h.sb.InitPID())
		_ = h.sb.Close()
		h.sb = nil
	}
	if h.off {
		return nil, nil
	}
	sb, r, spare := h.spares.take(h.want)
	if !spare {
		t0 := time.Now()
		var err error
		sb, r, err = Start(h.want)
		if err != nil {
			h.log.Error("sandbox: none could be made", "asked", h.want.Level, "err", err)
			return nil, err
		}
		if h.made != nil {
			h.made(r, time.Since(t0))
		}
	}
	if len(r.Missing) > 0 || len(r.Notes) > 0 {
		h.log.Warn("sandbox: weaker than asked", "obtained", r.Obtained.String(), "report", r.String())
		if !h.notified {
			h.notice = "[sandbox: " + r.String() + "]"
		}
	} else {
		h.log.Info("sandbox: made", "obtained", r.Obtained.String(), "init", sb.InitPID(), "spare", spare)
	}
	if sb == nil {
		// Nothing could be had: the agent runs on the host, and this is
		// not tried again.
		h.off = true
		return nil, nil
	}
	h.sb = sb
	return sb, nil
}

// Notice returns, once, what the model should be told about a sandbox
// weaker than asked; "" otherwise.
func (h *Holder) Notice() string {
	if h == nil {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.notice
	if n != "" {
		h.notice = ""
		h.notified = true
	}
	return n
}

// Close ends the sandbox, if there is one, and every process in it; no
// sandbox is made after it.
func (h *Holder) Close() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	sb := h.sb
	h.sb = nil
	h.closed = true
	h.mu.Unlock()
	if sb == nil {
		return nil
	}
	return sb.Close()
}
