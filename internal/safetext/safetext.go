package safetext

import (
	"strings"
	"unicode/utf8"
)

// String returns b as safe text.
func String(b []byte) string {
	s := string(b)
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\u2400")
	}
	if !utf8.ValidString(s) {
		s = replaceInvalid(s)
	}
	return s
}

// replaceInvalid writes U+FFFD for every byte that is not part of a valid
// character (strings.ToValidUTF8 writes one for a whole run), so that the
// text shows as many characters as there were bytes to show.
func replaceInvalid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Tail returns the longest suffix of s of at most n bytes that starts on a
// character boundary.
func Tail[T ~string | ~[]byte](s T, n int) T {
	if n <= 0 {
		return s[:0]
	}
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Head returns the longest prefix of s of at most n bytes that ends on a
// character boundary.
func Head[T ~string | ~[]byte](s T, n int) T {
	if n <= 0 {
		return s[:0]
	}
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
