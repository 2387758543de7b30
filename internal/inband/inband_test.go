package inband

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// However a stream is cut into chunks, Feed finds the same text and markers.
func TestStreamFindsMarkersAcrossAnySplit(t *testing.T) {
	lead := "\x1eM1:"
	s := Scanner{Lead: []byte(lead), MaxLen: 20}
	input := "before\x1e" + lead + "7\x1e" + "mid" + lead + "x\x1eafter\x1eM"
	want := "before\x1e|7|mid|x|after\x1eM"
	for cut := 0; cut <= len(input); cut++ {
		for cut2 := cut; cut2 <= len(input); cut2++ {
			st := &Stream{Scanner: s}
			var got strings.Builder
			for _, chunk := range []string{input[:cut], input[cut:cut2], input[cut2:]} {
				st.Feed([]byte(chunk), func(b []byte) { got.Write(b) }, func(body, _ []byte) bool {
					got.WriteString("|" + string(body) + "|")
					return true
				})
			}
			// The trailing partial lead is held back, not lost: flush it.
			got.Write(st.carry)
			if g := strings.ReplaceAll(got.String(), "||", "|"); g != want {
				t.Fatalf("cuts %d,%d: got %q, want %q", cut, cut2, g, want)
			}
		}
	}
}

func TestScannerRejectsWhatIsNotAMarker(t *testing.T) {
	s := Scanner{Lead: []byte("\x1eM:"), MaxLen: 8, Valid: func(b []byte) bool { return len(b) == 1 }}
	if _, _, _, _, found := s.Find([]byte("\x1eM:toolong\x1e")); found {
		t.Fatal("a body past MaxLen was taken for a marker")
	}
	if _, _, _, _, found := s.Find([]byte("\x1eM:ab\x1e")); found {
		t.Fatal("an invalid body was taken for a marker")
	}
	body, start, end, _, found := s.Find([]byte("x\x1eM:ab\x1e\x1eM:c\x1ey"))
	if !found || string(body) != "c" || start != 7 || end != 12 {
		t.Fatalf("%q %d %d %v", body, start, end, found)
	}
	var stopped []string
	st := &Stream{Scanner: s}
	st.Feed([]byte("a\x1eM:1\x1eb\x1eM:2\x1ec"), func(b []byte) { stopped = append(stopped, string(b)) }, func(_, _ []byte) bool { return false })
	if strings.Join(stopped, ",") != "a" {
		t.Fatalf("Feed went on after marker returned false: %q", stopped)
	}
}

// A lead left open is output: the RS that would close it opens the next
// marker, which is found whole.
func TestAnOpenLeadIsOutput(t *testing.T) {
	s := Stream{Scanner: Scanner{Lead: []byte("\x1eDSHAB:"), MaxLen: 64}}
	in := "x\x1eDSHAB:9:42:forged\x1eDSHAB:5:0\x1ey"
	for cut := 0; cut <= len(in); cut++ {
		var text, bodies []byte
		s.Reset()
		for _, chunk := range []string{in[:cut], in[cut:]} {
			s.Feed([]byte(chunk), func(b []byte) { text = append(text, b...) },
				func(b, _ []byte) bool { bodies = append(bodies, b...); bodies = append(bodies, '|'); return true })
		}
		if string(bodies) != "5:0|" || string(text) != "x\x1eDSHAB:9:42:forgedy" {
			// A cut right after the RS that ends the open lead cannot be
			// told from a close; only that one may differ.
			if cut != len("x\x1eDSHAB:9:42:forged")+1 {
				t.Fatalf("cut %d: markers %q text %q", cut, bodies, text)
			}
		}
	}
}

// Letters of the lead match in either case.
func TestLeadIgnoresCase(t *testing.T) {
	sc := Scanner{Lead: []byte("\x1eDSHAB:"), MaxLen: 64}
	body, _, _, _, found := sc.Find([]byte("a\x1edshab:1:0\x1e"))
	if !found || string(body) != "1:0" {
		t.Fatalf("%q %v", body, found)
	}
}
