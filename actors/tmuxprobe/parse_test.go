package tmuxprobe

import "testing"

func TestParseRefusesWhatIsNotAReading(t *testing.T) {
	good := "0\t1\t%3\t1\t0\tb25d,80x24,0,0,0\n\x00my session\n\x00a\tname\nwith lines\n"
	loc, ok := parse(good)
	if !ok || loc.Session != "my session" || loc.WindowName != "a\tname\nwith lines" || loc.PaneID != "%3" || loc.PaneIndex != 1 || !loc.WindowActive || loc.PaneActive {
		t.Fatalf("a good reading: %+v %v", loc, ok)
	}
	for name, out := range map[string]string{
		"empty":               "",
		"too few fields":      "0\t1\t%3\t1\tb25d\n\x00s\n\x00w\n",
		"too many fields":     "0\t1\t%3\t1\t0\tb25d\textra\n\x00s\n\x00w\n",
		"empty pane id":       "0\t1\t\t1\t0\tb25d\n\x00s\n\x00w\n",
		"pane id of one char": "0\t1\t%\t1\t0\tb25d\n\x00s\n\x00w\n",
		"names missing":       "0\t1\t%3\t1\t0\tb25d\n",
		"not a number":        "x\t1\t%3\t1\t0\tb25d\n\x00s\n\x00w\n",
		"a flag of 2":         "0\t1\t%3\t2\t0\tb25d\n\x00s\n\x00w\n",
		"no final newline":    "0\t1\t%3\t1\t0\tb25d\n\x00s\n\x00w",
	} {
		if _, ok := parse(out); ok {
			t.Errorf("%s: taken for a reading", name)
		}
	}
}
