// Package safetext turns program output into text that every consumer down
// the line can take: valid UTF-8 (each byte that is not part of a valid
// character becomes U+FFFD) with no NUL (it becomes U+2400, the visible
// symbol for NUL), and cuts it to a size without splitting a character.
package safetext
