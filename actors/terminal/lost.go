package terminal

import (
	"cmp"
	"fmt"
	"slices"
)

// LostOutput is output that answers carried to callers who had gone
// (withdrawn after they were answered), as merged ranges of a terminal's
// history, for the next result to name. Terminals and tasks both keep one.
type LostOutput struct{ ranges [][2]int64 }

// Add notes the bytes from to.
func (l *LostOutput) Add(from, to int64) {
	if to <= from {
		return
	}
	l.ranges = append(l.ranges, [2]int64{from, to})
	slices.SortFunc(l.ranges, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	merged := l.ranges[:1]
	for _, r := range l.ranges[1:] {
		if last := &merged[len(merged)-1]; r[0] <= last[1] {
			last[1] = max(last[1], r[1])
		} else {
			merged = append(merged, r)
		}
	}
	l.ranges = merged
}

// AddAll notes what o names.
func (l *LostOutput) AddAll(o LostOutput) {
	for _, r := range o.ranges {
		l.Add(r[0], r[1])
	}
}

// lostLines bounds the notices a result carries, so that they fit any cap;
// the rest wait for the results after it.
const lostLines = 3

// Take returns what the next result names, at most lostLines ranges, and
// forgets it.
func (l *LostOutput) Take() LostOutput {
	n := min(len(l.ranges), lostLines)
	o := LostOutput{ranges: slices.Clone(l.ranges[:n])}
	l.ranges = slices.Delete(l.ranges, 0, n)
	return o
}

// Notes are the notices that name what is noted.
func (l LostOutput) Notes(terminalID string) []string {
	var notes []string
	for _, r := range l.ranges {
		notes = append(notes, fmt.Sprintf("[output bytes %d-%d went to a call cancelled as it was answered: terminal_read on %s with offset %d and limit %d pages them]",
			r[0], r[1], terminalID, r[0], r[1]-r[0]))
	}
	return notes
}
