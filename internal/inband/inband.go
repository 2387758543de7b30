// Package inband finds in-band markers in a byte stream: RS (0x1e), a lead
// that includes a per-process nonce, a short body, RS. The shell and
// terminal actors use it to see their prompt markers in program output that
// may contain any bytes, split at any point across reads.
package inband

import "bytes"

// RS is the byte that opens and closes a marker.
const RS = 0x1e

// Scanner finds markers that start with Lead (which begins with RS) and whose
// whole length is at most MaxLen.
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
			if bytes.HasPrefix(s.Lead, rest) {
				return nil, 0, 0, i, false
			}
			from = i + 1
			continue
		}
		if !bytes.HasPrefix(rest, s.Lead) {
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
		body = rest[len(s.Lead) : len(s.Lead)+j]
		if s.Valid != nil && !s.Valid(body) {
			from = i + 1
			continue
		}
		return body, i, i + len(s.Lead) + j + 1, -1, true
	}
}
