package inband

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// RS is the byte that opens and closes a marker.
const RS = 0x1e

// Scanner finds markers that start with Lead (which begins with RS) and whose
// whole length is at most MaxLen. The lead's letters match in either case
// (a terminal or a shell option may change the case of output).
type Scanner struct {
	Lead   []byte
	MaxLen int
	// Valid, if set, rejects bodies that are not well formed; a rejected
	// candidate is treated as ordinary output.
	Valid func(body []byte) bool
}

// Find looks for the first complete marker in b. It returns its body (the
// bytes between Lead and the closing RS) and the span [start, end) it covers.
// When b ends with what may be the beginning of a marker, partial is where
// that begins, so the caller can keep those bytes for the next read;
// otherwise partial is -1.
//
// An RS that begins a lead opens a marker, never closes one: a lead left
// open (by anyone printing one) is output, and the marker after it is found.
func (s Scanner) Find(b []byte) (body []byte, start, end, partial int, found bool) {
	from := 0
	for {
		i := bytes.IndexByte(b[from:], RS)
		if i < 0 {
			return nil, 0, 0, -1, false
		}
		i += from
		rest := b[i:]
		if len(rest) < len(s.Lead) {
			if s.leads(rest) {
				return nil, 0, 0, i, false
			}
			from = i + 1
			continue
		}
		if !s.leads(rest[:len(s.Lead)]) {
			from = i + 1
			continue
		}
		j := bytes.IndexByte(rest[len(s.Lead):], RS)
		if j < 0 {
			if len(rest) < s.MaxLen {
				return nil, 0, 0, i, false
			}
			from = i + 1 // too long to be a marker
			continue
		}
		// An RS at the very end of b closes: a marker is the last thing its
		// writer writes, and one write brings a lead's RS and the rest of
		// it together. An RS followed by part of a lead waits for the rest.
		closing := rest[len(s.Lead)+j:]
		if len(closing) > 1 && len(closing) < len(s.Lead) && s.leads(closing) {
			return nil, 0, 0, i, false
		}
		if len(closing) >= len(s.Lead) && s.leads(closing[:len(s.Lead)]) {
			from = i + len(s.Lead) + j // this lead was left open
			continue
		}
		body = rest[len(s.Lead) : len(s.Lead)+j]
		if s.Valid != nil && !s.Valid(body) {
			from = i + 1
			continue
		}
		return body, i, i + len(s.Lead) + j + 1, -1, true
	}
}

// leads reports whether b is the lead, or its beginning, ignoring the case
// of letters.
func (s Scanner) leads(b []byte) bool {
	return len(b) <= len(s.Lead) && bytes.EqualFold(b, s.Lead[:len(b)])
}

// Stream finds markers in a stream that arrives in chunks: a marker split
// across chunks is found once the rest arrives. The zero value with a
// Scanner set is ready to use.
type Stream struct {
	Scanner
	carry []byte
}

// Feed splits data into text and markers, in order: text is called with
// runs of ordinary output, marker with each marker's body and its bytes as
// they came (lead and end included). When marker
// returns false, Feed stops and drops the rest (the stream's owner has
// thrown the stream away). Bytes that may begin a marker are kept for the
// next Feed.
func (s *Stream) Feed(data []byte, text func([]byte), marker func(body, raw []byte) bool) {
	buf := data
	if len(s.carry) > 0 {
		buf = append(s.carry, data...)
		s.carry = nil
	}
	for len(buf) > 0 {
		body, start, end, partial, found := s.Find(buf)
		if !found {
			if partial >= 0 {
				text(buf[:partial])
				s.carry = append([]byte(nil), buf[partial:]...)
			} else {
				text(buf)
			}
			return
		}
		text(buf[:start])
		raw := buf[start:end]
		buf = buf[end:]
		if !marker(body, raw) {
			return
		}
	}
}

// Carry returns the bytes kept from earlier chunks (what may begin a
// marker), and forgets them: a caller whose stream ends without the rest
// hands them on as text.
func (s *Stream) Carry() []byte {
	b := s.carry
	s.carry = nil
	return b
}

// Reset forgets bytes kept from earlier chunks.
func (s *Stream) Reset() { s.carry = nil }

// NewNonce returns 16 random upper-case hexadecimal digits: a marker's
// nonce, or a query's token. Upper case survives a terminal that upper-cases
// output (stty olcuc). crypto/rand does not fail on Linux; if it ever did,
// no marker could be trusted, so it panics.
func NewNonce() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("inband: no randomness for a nonce: %v", err))
	}
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
