package shell

import "testing"

func TestRedrawsCountsScreenSequencesAcrossWrites(t *testing.T) {
	for _, c := range []struct {
		writes []string
		want   int
	}{
		{[]string{"booting in 3\r\x1b[Kbooting in 2\x1b[1A\n"}, 0},
		{[]string{"\x1b[?2004hprompt\x1b[?2004l"}, 0},
		{[]string{"\x1b[H\x1b[2Jtop - 04:00"}, 2},
		{[]string{"\x1b[?10", "49h\x1b[", "12;1", "H"}, 2},
		{[]string{"\x1b[3;4f", "x\x1b", "[J"}, 2},
	} {
		var r redraws
		for _, w := range c.writes {
			r.note([]byte(w))
		}
		if r.n != c.want {
			t.Errorf("%q: %d redraws, want %d", c.writes, r.n, c.want)
		}
	}
}
