package shell

import "testing"

// The line a progress report shows: the last one with text, a progress
// bar's \r rewrites collapsed, \r\n line ends (however the chunks split
// them) taken as line ends.
func TestLatestLine(t *testing.T) {
	for _, tc := range []struct {
		chunks []string
		want   string
	}{
		{[]string{"one\ntwo\n"}, "two"},
		{[]string{"one\r\ntwo\r\n"}, "two"},
		{[]string{"one\r", "\ntwo\r", "\n"}, "two"},
		{[]string{"10%\r20%\r", "30%"}, "30%"},
		{[]string{"done\n", "  \n"}, "done"},
		{[]string{"half a li", "ne"}, "half a line"},
		{[]string{"x\n\r", "y"}, "y"},
	} {
		var l latestLine
		for _, c := range tc.chunks {
			l.note([]byte(c))
		}
		if got := l.String(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.chunks, got, tc.want)
		}
	}
}
