package terminal

import (
	"unicode/utf8"

	"github.com/dsh-actors/dsh-actors/internal/safetext"
)

// history is a terminal's retained output: the last limit bytes, addressed
// by absolute offsets counted from the terminal's first byte, so that offsets
// stay valid while the start is dropped. "\r\n" is stored as "\n": the
// terminal's line discipline adds the "\r", and a model reads it as noise.
type history struct {
	limit int
	buf   []byte
	start int64 // offset of buf[0]; the bytes before it were dropped
	cr    bool  // the last byte written was a '\r', held back until the next
}

func newHistory(limit int) *history { return &history{limit: limit} }

func (h *history) write(p []byte) {
	if h.cr {
		h.cr = false
		if len(p) == 0 || p[0] != '\n' {
			h.buf = append(h.buf, '\r')
		}
	}
	for len(p) > 0 {
		i := indexCRLF(p)
		if i < 0 {
			if p[len(p)-1] == '\r' {
				h.buf = append(h.buf, p[:len(p)-1]...)
				h.cr = true
			} else {
				h.buf = append(h.buf, p...)
			}
			break
		}
		h.buf = append(h.buf, p[:i]...)
		h.buf = append(h.buf, '\n')
		p = p[i+2:]
	}
	// Drop the oldest bytes in batches, so a busy terminal does not copy
	// its whole history on every chunk.
	if over := len(h.buf) - h.limit; over > h.limit/4 {
		h.start += int64(over)
		h.buf = append(h.buf[:0], h.buf[over:]...)
	}
}

func indexCRLF(p []byte) int {
	for i := 0; i+1 < len(p); i++ {
		if p[i] == '\r' && p[i+1] == '\n' {
			return i
		}
	}
	return -1
}

// end is the offset just past the last byte.
func (h *history) end() int64 { return h.start + int64(len(h.buf)) }

// first is the offset of the oldest byte still retained (within the limit).
func (h *history) first() int64 {
	if over := len(h.buf) - h.limit; over > 0 {
		return h.start + int64(over)
	}
	return h.start
}

// slice returns the retained bytes in [from, to) and the offset where they
// really start: later than from when the bytes before were dropped.
func (h *history) slice(from, to int64) ([]byte, int64) {
	if f := h.first(); from <= f {
		// The history drops whole batches of bytes, not characters.
		from = f
		for i := 0; i < utf8.UTFMax-1 && from < h.end() && !utf8.RuneStart(h.buf[from-h.start]); i++ {
			from++
		}
	}
	if to > h.end() {
		to = h.end()
	}
	if from >= to {
		return nil, from
	}
	return h.buf[from-h.start : to-h.start], from
}

// settled is the end less the first bytes of a character whose rest has
// not arrived.
func (h *history) settled() int64 {
	return h.end() - int64(safetext.Unfinished(h.buf))
}

// charStart moves off, within the retained history, back to the start of
// the character it falls inside, so that a page never splits one.
func (h *history) charStart(off int64) int64 {
	if off <= h.first() || off >= h.end() {
		return off
	}
	return h.start + int64(safetext.CharStart(h.buf, int(off-h.start)))
}

// charEnd is the offset just past the character that starts at off.
func (h *history) charEnd(off int64) int64 {
	if off < h.first() || off >= h.end() {
		return off
	}
	_, size := utf8.DecodeRune(h.buf[off-h.start:])
	return off + int64(size)
}
