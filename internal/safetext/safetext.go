package safetext

import (
	"strconv"
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

// shownSize is how many bytes String shows for the character or invalid
// byte at the start of b, and how many bytes of b that is.
func shownSize(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return len("\uFFFD")
	case r == 0:
		return len("\u2400")
	}
	return size
}

// HeadFitting returns the longest prefix of b whose safe text (String) is
// at most n bytes. It ends on a character boundary.
func HeadFitting(b []byte, n int) []byte {
	shown, i := 0, 0
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		w := shownSize(r, size)
		if shown+w > n {
			break
		}
		shown += w
		i += size
	}
	return b[:i]
}

// TailFitting returns the longest suffix of b whose safe text (String) is
// at most n bytes. It starts on a character boundary.
func TailFitting(b []byte, n int) []byte {
	shown, i := 0, len(b)
	for i > 0 {
		r, size := utf8.DecodeLastRune(b[:i])
		w := shownSize(r, size)
		if shown+w > n {
			break
		}
		shown += w
		i -= size
	}
	return b[i:]
}

// Clip returns s whole when it is at most n bytes, and otherwise its first
// n bytes (on a character boundary) and a note of how many more there were:
// for values echoed back in errors and listings, which must not carry a
// megabyte of command into a bounded result.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h := Head(s, n)
	return h + "… [" + strconv.Itoa(len(s)-len(h)) + " more bytes]"
}

// Unfinished is how many bytes at the end of b begin a character that has
// not all arrived yet: output read from a terminal in chunks can end within
// a character, and a result that cut it there would show its halves as two
// U+FFFD. 0 when b ends on a whole character or on bytes that are invalid
// anyway.
func Unfinished(b []byte) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if c := b[len(b)-i]; utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// CharStart is i, or where the character that i falls inside begins: an
// index inside a valid multi-byte character moves back to its first byte.
func CharStart(b []byte, i int) int {
	for s := i - 1; s >= 0 && s >= i-(utf8.UTFMax-1) && i < len(b); s-- {
		if utf8.RuneStart(b[s]) {
			if r, size := utf8.DecodeRune(b[s:]); (r != utf8.RuneError || size > 1) && s+size > i {
				return s
			}
			return i
		}
	}
	return i
}
