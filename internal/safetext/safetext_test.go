package safetext

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestString(t *testing.T) {
	if got := String([]byte("a\x00b\xffc\xe2\x9c")); got != "a\u2400b\uFFFDc\uFFFD\uFFFD" {
		t.Fatalf("%q", got)
	}
	if got := String([]byte("plain ✓")); got != "plain ✓" {
		t.Fatalf("%q", got)
	}
}

func TestHeadAndTailNeverSplitACharacter(t *testing.T) {
	s := "a✓b✓c" // ✓ is 3 bytes
	for n := -1; n <= len(s)+1; n++ {
		h, tl := Head(s, n), Tail(s, n)
		if !utf8.ValidString(h) || !utf8.ValidString(tl) || len(h) > max(n, 0) || len(tl) > max(n, 0) {
			t.Fatalf("n=%d: head %q tail %q", n, h, tl)
		}
		if hb := Head([]byte(s), n); string(hb) != h {
			t.Fatalf("n=%d: []byte head %q, string head %q", n, hb, h)
		}
	}
	if Head(s, 2) != "a" || Tail(s, 2) != "c" || Tail(s, 4) != "✓c" {
		t.Fatalf("%q %q %q", Head(s, 2), Tail(s, 2), Tail(s, 4))
	}
}

// Every invalid byte shows as one U+FFFD, so a run of them is counted.
func TestEveryInvalidByteShows(t *testing.T) {
	if got := String([]byte("\xff\xff\xffok\xc3")); got != "\uFFFD\uFFFD\uFFFDok\uFFFD" {
		t.Fatalf("%q", got)
	}
}

// Bytes that grow when made safe (NUL, invalid UTF-8) are fitted by what
// they show, never by their own count.
func TestFittingCountsWhatIsShown(t *testing.T) {
	for _, b := range [][]byte{
		bytes.Repeat([]byte{0}, 1000),
		bytes.Repeat([]byte{0xff}, 1000),
		[]byte(strings.Repeat("a✓\x00\xff", 300)),
	} {
		for _, n := range []int{0, 1, 2, 3, 4, 100, 2999, 5000} {
			h, tl := HeadFitting(b, n), TailFitting(b, n)
			if len(String(h)) > n || len(String(tl)) > n {
				t.Fatalf("n=%d: head shows %d, tail %d", n, len(String(h)), len(String(tl)))
			}
			// Longest: one more character would not fit.
			if len(h) < len(b) && len(String(b[:len(h)+1])) <= n && utf8.FullRune(b[len(h):len(h)+1]) {
				t.Fatalf("n=%d: head of %d bytes is not the longest", n, len(h))
			}
			if !bytes.HasPrefix(b, h) || !bytes.HasSuffix(b, tl) {
				t.Fatal("not a prefix or suffix")
			}
			if n >= 3 && len(b) > 0 && (len(h) == 0 || len(tl) == 0) {
				t.Fatalf("n=%d: nothing shown though a character fits", n)
			}
		}
	}
}

func TestUnfinishedAndCharStart(t *testing.T) {
	e := []byte("aé€😀") // 1, 2, 3 and 4 bytes
	for _, c := range []struct {
		b    []byte
		want int
	}{
		{e, 0}, {e[:len(e)-1], 3}, {e[:len(e)-3], 1}, {e[:3], 0}, {e[:2], 1},
		{[]byte{}, 0}, {[]byte{0x80}, 0}, {[]byte("a\xff"), 0}, {[]byte("\xe2\x82"), 2},
	} {
		if got := Unfinished(c.b); got != c.want {
			t.Errorf("Unfinished(%q) = %d, want %d", c.b, got, c.want)
		}
	}
	// Every index inside a character moves to its start; others stay.
	starts := map[int]int{0: 0, 1: 1, 2: 1, 3: 3, 4: 3, 5: 3, 6: 6, 7: 6, 8: 6, 9: 6, 10: 10}
	for i, want := range starts {
		if got := CharStart(e, i); got != want {
			t.Errorf("CharStart(%q, %d) = %d, want %d", e, i, got, want)
		}
	}
	for _, c := range []struct {
		b    string
		i    int
		want int
	}{{"\x80\x80", 1, 1}, {"\xe2\x82a", 1, 1}, {"a\xc3", 1, 1}} {
		if got := CharStart([]byte(c.b), c.i); got != c.want {
			t.Errorf("CharStart(%q, %d) = %d, want %d", c.b, c.i, got, c.want)
		}
	}
}
