package shell

import (
	"bytes"
	"unicode/utf8"

	"github.com/dsh-actors/dsh-actors/internal/safetext"
)

// collector keeps the earliest output of a stream up to a number of
// characters and counts what it drops. Characters are Unicode code points;
// an invalid byte counts as one. Memory is bounded by 4 bytes per kept
// character.
type collector struct {
	limit int // characters kept; <= 0 means none
	head  []byte
	chars int
	// decoded is how far head has been decoded; at most 3 bytes of an
	// incomplete sequence lie after it.
	decoded int
	full    bool
	dropped int64 // bytes not kept
	// markerBytes counts bytes shaped like a marker of ours that were
	// taken out of the stream but were no answer of bash's.
	markerBytes int64
	// cycleBytes counts bytes of bash's prompt cycle after a status query
	// that were left out without being a repeat of what came before.
	cycleBytes int64
	// tailKeep, when positive, is how many characters of the stream's end
	// are kept after the head is full (head and tail share the limit);
	// tail holds the latest bytes, at most 4 a character and a sequence's
	// worth more. dropped then counts the bytes between head and tail.
	tailKeep int
	tail     []byte
}

func newCollector(limit int) collector { return collector{limit: limit} }

// newEndsCollector keeps the first and the last half of the limit: a
// command's verdict (a test summary, RESULT: 42) is at its end.
func newEndsCollector(limit int) collector {
	if limit < 2 {
		return newCollector(limit)
	}
	keep := limit / 2
	return collector{limit: limit - keep, tailKeep: keep}
}

// toTail keeps p at the end of the tail, dropping (and counting) what falls
// out of its front.
func (c *collector) toTail(p []byte) {
	c.tail = append(c.tail, p...)
	if over := len(c.tail) - (4*c.tailKeep + 4); over > 0 {
		c.dropped += int64(over)
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
}

func (c *collector) write(p []byte) {
	if len(p) == 0 {
		return
	}
	if c.full || c.limit <= 0 {
		c.full = true
		if c.tailKeep > 0 {
			c.toTail(p)
			return
		}
		c.dropped += int64(len(p))
		return
	}
	c.head = append(c.head, p...)
	for c.decoded < len(c.head) {
		rest := c.head[c.decoded:]
		if !utf8.FullRune(rest) {
			return // wait for the rest of the sequence
		}
		_, size := utf8.DecodeRune(rest)
		c.decoded += size
		c.chars++
		if c.chars == c.limit {
			if c.tailKeep > 0 {
				c.toTail(c.head[c.decoded:])
			} else {
				c.dropped += int64(len(c.head) - c.decoded)
			}
			c.head = c.head[:c.decoded]
			c.full = true
			return
		}
	}
}

// end is called when no more output comes: the bytes of a sequence cut off
// at the end are shown as one U+FFFD each, so they count as characters
// against the limit.
func (c *collector) end() {
	for c.decoded < len(c.head) {
		if c.chars >= c.limit {
			c.dropped += int64(len(c.head) - c.decoded)
			c.head = c.head[:c.decoded]
			c.full = true
			break
		}
		c.decoded++
		c.chars++
	}
	if len(c.tail) == 0 {
		return
	}
	// The tail shows at most tailKeep characters, from a line's start when
	// one begins in its first half.
	kept := c.tail
	for i, n := len(c.tail), 0; i > 0 && n < c.tailKeep; n++ {
		_, size := utf8.DecodeLastRune(c.tail[:i])
		i -= size
		kept = c.tail[i:]
	}
	if i := bytes.IndexByte(kept, '\n'); i >= 0 && i < len(kept)/2 && c.dropped+int64(len(c.tail)-len(kept)) > 0 {
		kept = kept[i+1:]
	}
	c.dropped += int64(len(c.tail) - len(kept))
	c.tail = append(c.tail[:0], kept...)
}

// tailStart is where the tail begins in the stream's bytes (see len).
func (c *collector) tailStart() int { return len(c.head) + int(c.dropped) }

func (c *collector) empty() bool {
	return len(c.head) == 0 && c.dropped == 0 && len(c.tail) == 0 && c.markerBytes == 0 && c.cycleBytes == 0
}

// len is how many bytes have come: positions in the stream that cutFrom
// and dropLinesWith take (the head's, then the dropped ones', then the
// tail's).
func (c *collector) len() int { return len(c.head) + int(c.dropped) + len(c.tail) }

// splitLastLine returns c without the partial line at its end, and that
// partial line. Nothing is split off once c has dropped bytes: the notice of
// what was not kept goes where the cut is.
func (c *collector) splitLastLine() (collector, []byte) {
	i := bytes.LastIndexByte(c.head, '\n')
	if c.dropped > 0 || len(c.tail) > 0 || i == len(c.head)-1 {
		return *c, nil
	}
	whole := newCollector(c.limit)
	whole.markerBytes, whole.cycleBytes = c.markerBytes, c.cycleBytes
	whole.write(c.head[:i+1])
	return whole, append([]byte(nil), c.head[i+1:]...)
}

// add appends what o kept, and counts what it dropped, after c's own.
func (c *collector) add(o collector) {
	c.write(o.head)
	c.write(o.tail)
	c.dropped += o.dropped
	c.markerBytes += o.markerBytes
	c.cycleBytes += o.cycleBytes
	if o.dropped > 0 {
		c.full = true
	}
}

// dropLinesWith removes, from byte from on, every line that holds s (the
// runtime's own lines echoed by bash), unless bytes were dropped.
func (c *collector) dropLinesWith(from int, s string) {
	if len(c.tail) > 0 {
		if at := from - c.tailStart(); at >= 0 && at <= len(c.tail) {
			c.tail = dropLines(c.tail, at, s)
		}
		return
	}
	if c.dropped > 0 || from > len(c.head) {
		return
	}
	if kept := dropLines(c.head, from, s); len(kept) != len(c.head) {
		c.rewrite(kept)
	}
}

// dropFirstLineWith drops the first line, from byte from on, that holds s
// (see dropLinesWith for where it looks).
func (c *collector) dropFirstLineWith(from int, s string) {
	if len(c.tail) > 0 {
		if at := from - c.tailStart(); at >= 0 && at <= len(c.tail) {
			c.tail = dropFirstLine(c.tail, at, s)
		}
		return
	}
	if c.dropped > 0 || from > len(c.head) {
		return
	}
	if kept := dropFirstLine(c.head, from, s); len(kept) != len(c.head) {
		c.rewrite(append([]byte(nil), kept...))
	}
}

// dropFirstLine is b without the first line, from at on, that holds s.
func dropFirstLine(b []byte, at int, s string) []byte {
	i := bytes.Index(b[at:], []byte(s))
	if i < 0 {
		return b
	}
	i += at
	start := bytes.LastIndexByte(b[at:i], '\n') + 1 + at
	end := len(b)
	if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
		end = i + j + 1
	}
	return append(append([]byte(nil), b[:start]...), b[end:]...)
}

// dropLines is b without the lines, from at on, that hold s.
func dropLines(b []byte, at int, s string) []byte {
	if !bytes.Contains(b[at:], []byte(s)) {
		return b
	}
	kept := append([]byte(nil), b[:at]...)
	for rest := b[at:]; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		if !bytes.Contains(line, []byte(s)) {
			kept = append(kept, line...)
		}
	}
	return kept
}

// trimSuffix drops s from the end of the kept bytes, if they end with it
// and nothing was dropped after them.
func (c *collector) trimSuffix(s string) bool {
	if len(c.tail) > 0 {
		if s == "" || !bytes.HasSuffix(c.tail, []byte(s)) {
			return false
		}
		c.tail = c.tail[:len(c.tail)-len(s)]
		return true
	}
	if c.dropped > 0 || s == "" || !bytes.HasSuffix(c.head, []byte(s)) {
		return false
	}
	c.rewrite(c.head[:len(c.head)-len(s)])
	return true
}

// cutBefore removes s where it ends at byte end, if it is there and
// nothing was dropped after it; it reports whether it did.
func (c *collector) cutBefore(end int, s string) bool {
	if s == "" {
		return false
	}
	if len(c.tail) > 0 {
		i := end - c.tailStart()
		if i < len(s) || i > len(c.tail) || string(c.tail[i-len(s):i]) != s {
			return false
		}
		c.tail = append(c.tail[:i-len(s)], c.tail[i:]...)
		return true
	}
	if c.dropped > 0 || end < len(s) || end > len(c.head) || string(c.head[end-len(s):end]) != s {
		return false
	}
	c.rewrite(append(append([]byte(nil), c.head[:end-len(s)]...), c.head[end:]...))
	return true
}

// cutFrom removes and returns the bytes from at on, unless bytes were
// dropped (then what is kept is not where at points).
func (c *collector) cutFrom(at int) []byte {
	if len(c.tail) > 0 {
		i := at - c.tailStart()
		if i < 0 || i >= len(c.tail) {
			return nil
		}
		cut := append([]byte(nil), c.tail[i:]...)
		c.tail = c.tail[:i]
		return cut
	}
	if c.dropped > 0 || at < 0 || at >= len(c.head) {
		return nil
	}
	cut := append([]byte(nil), c.head[at:]...)
	c.rewrite(c.head[:at])
	return cut
}

func (c *collector) endsWith(s string) bool {
	if len(c.tail) > 0 {
		return bytes.HasSuffix(c.tail, []byte(s))
	}
	return bytes.HasSuffix(c.head, []byte(s))
}

// rewrite makes kept (nothing was dropped) the collector's bytes; what it
// counted of markers stays.
func (c *collector) rewrite(kept []byte) {
	markers, cycle, tailKeep := c.markerBytes, c.cycleBytes, c.tailKeep
	*c = newCollector(c.limit)
	c.markerBytes, c.cycleBytes, c.tailKeep = markers, cycle, tailKeep
	c.write(kept)
}

// text renders the kept head as safe text (see package safetext).
func (c *collector) text() string { return safetext.String(c.head) }

// tailText renders the kept tail (empty unless output was clipped).
func (c *collector) tailText() string { return safetext.String(c.tail) }
