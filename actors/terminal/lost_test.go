package terminal

import (
	"fmt"
	"testing"
)

// Lost output is named in merged ranges, a few a result, until all are.
func TestLostOutputIsNamedAFewRangesAResult(t *testing.T) {
	var l LostOutput
	for _, r := range [][2]int64{{86, 91}, {81, 86}, {200, 210}, {300, 301}, {205, 220}, {400, 400}, {500, 510}} {
		l.Add(r[0], r[1])
	}
	var got []string
	for range 3 {
		notes := l.Take().Notes("t1")
		if len(notes) > lostLines {
			t.Fatalf("%d notices in one result", len(notes))
		}
		for _, n := range notes {
			var from, to int64
			if _, err := fmt.Sscanf(n, "[output bytes %d-%d", &from, &to); err != nil {
				t.Fatalf("%q: %v", n, err)
			}
			got = append(got, fmt.Sprintf("%d-%d", from, to))
		}
	}
	if fmt.Sprint(got) != "[81-91 200-220 300-301 500-510]" {
		t.Fatalf("named %v", got)
	}
	if n := l.Take().Notes("t1"); len(n) != 0 {
		t.Fatalf("left over: %v", n)
	}
}
