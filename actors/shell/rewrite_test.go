package shell

import "testing"

func TestCollapseRewrites(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"plain", "a\nb\n", "a\nb\n"},
		{"progress", "  0%\r 50%\r100%\ndone\n", "100%\ndone\n"},
		{"a shorter state overwrites the start", "downloading 10 files\rdone\n", "doneloading 10 files\n"},
		{"erase to the end", "downloading 10 files\r\x1b[Kdone\n", "done\n"},
		{"erase, then the state", "step 1/3\r\x1b[2Kstep 2/3\r\x1b[2Kstep 3/3\n", "step 3/3\n"},
		{"column 1", "10%\x1b[1G20%\x1b[G30%\n", "30%\n"},
		{"CR LF is a line end", "one\r\ntwo\r\n", "one\ntwo\n"},
		{"colours stay", "\x1b[32mok\x1b[0m\n", "\x1b[32mok\x1b[0m\n"},
		{"a coloured bar", "\x1b[32m[=>  ]\x1b[0m\r\x1b[32m[===>]\x1b[0m\n", "\x1b[0m\x1b[32m[===>]\x1b[0m\n"},
		{"utf-8", "█░░\r██░\r███ done\n", "███ done\n"},
		{"unfinished line", "50%\r60%", "60%"},
		{"RESULT after a bar", "[#   ] 25%\r[##  ] 50%\r[####] 100%\nRESULT: 42\n", "[####] 100%\nRESULT: 42\n"},
	} {
		if got := collapseRewrites(tt.in); got != tt.want {
			t.Errorf("%s: collapseRewrites(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}
