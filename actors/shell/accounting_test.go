package shell_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/actors/shell"
	"github.com/dsh-actors/dsh-actors/config"
)

// Every byte bash writes to its terminal is in exactly one result, in the
// order written, or counted in a "not kept" notice where it was dropped.
//
// A background job prints numbered lines as fast as the terminal takes them
// while calls run; small output caps make both the output since the
// previous call and a call's own output get clipped. The results, read in
// order with their notices as gaps, must give back the stream: every line
// once, in order, and the notices' byte counts exactly what is missing.
func TestEveryByteIsAccountedFor(t *testing.T) {
	for _, c := range []struct {
		limit    int
		headOnly bool
	}{{1500, false}, {16000, false}, {1500, true}} {
		limit := c.limit
		t.Run(fmt.Sprintf("maxOutputChars=%d,keepHeadOnly=%v", limit, c.headOnly), func(t *testing.T) {
			h := newHost(t, func(cfg *config.Config) { cfg.Bash.MaxOutputChars, cfg.Bash.KeepHeadOnly = limit, c.headOnly })
			const lines, calls = 40000, 40
			// No job control: bash prints no notice when the writer ends, so
			// the stream is the writer's lines, the calls' own and the one
			// "[1] PID" bash prints when it starts the writer.
			var results []string
			run := func(command string) {
				res := bash(t, h, "f", command)
				if exitCode(res) != "0" {
					t.Fatalf("%q: %q %+v", command, res.Text, res)
				}
				results = append(results, res.Text)
			}
			run(fmt.Sprintf(`set +m; (for ((i=1;i<=%d;i++)); do printf "L%%07d\n" $i; done) &`, lines))
			for k := 1; k <= calls; k++ {
				cmd := fmt.Sprintf("echo mine%03d", k)
				if k%3 == 0 {
					cmd += "; sleep 0.01" // let more pile up before the next call
				}
				if k%7 == 0 {
					cmd = "seq -f 'S%07g' 1 300; " + cmd // own output long enough to be clipped
				}
				run(cmd)
			}
			run("wait; echo end")
			checkAccounting(t, results, lines, calls)
		})
	}
}

var (
	lineL      = regexp.MustCompile(`^L(\d{7})$`)
	lineMine   = regexp.MustCompile(`^mine(\d{3})$`)
	lineSeq    = regexp.MustCompile(`^S(\d{7})$`)
	lineJob    = regexp.MustCompile(`^\[1\] \d+$`) // bash's own line when the writer starts
	beforeGap  = regexp.MustCompile(`^\[(\d+) more bytes? of it (?:were|was) not kept(, the last line cut)?\]$`)
	clipNotice = regexp.MustCompile(`^\[output clipped: only the first \d+ characters are shown(, the last line cut)?; (\d+) more bytes? (?:were|was) not kept\]$`)
	// clipBetween stands between the head and the end of clipped output.
	clipBetween = regexp.MustCompile(`^\[output clipped: (\d+) bytes? (?:were|was) left out here, between the first \d+ and the last \d+ characters(, the last line cut)?\]$`)
)

// piece is a stretch of the reconstructed stream: text, or a gap of n
// bytes that a notice says were not kept.
type piece struct {
	text string
	gap  int
}

func checkAccounting(t *testing.T, results []string, lines, calls int) {
	t.Helper()
	var stream []piece
	add := func(text string, gapLine string, gap *regexp.Regexp) {
		if gapLine == "" {
			stream = append(stream, piece{text: text})
			return
		}
		m := gap.FindStringSubmatch(gapLine)
		n, cut := 0, false
		for _, g := range m[1:] {
			if strings.HasPrefix(g, ",") {
				cut = true
			} else if g != "" {
				n, _ = strconv.Atoi(g)
			}
		}
		// The notice starts a line of its own: when it says the last line
		// is cut, the newline before it is the renderer's, not the stream's.
		if cut {
			text = strings.TrimSuffix(text, "\n")
		}
		stream = append(stream, piece{text: text}, piece{gap: n})
	}
	mineIn := map[int]int{} // mine number -> result index
	for r, text := range results {
		if rest, ok := strings.CutPrefix(text, "[output since the previous call]\n"); ok {
			block, after, found := strings.Cut(rest, "[end of output since the previous call]\n")
			if !found {
				t.Fatalf("result %d: before-block not closed: %q", r, text)
			}
			notice := ""
			if i := strings.LastIndex(strings.TrimSuffix(block, "\n"), "\n"); i >= 0 && beforeGap.MatchString(strings.TrimSuffix(block[i+1:], "\n")) {
				notice, block = strings.TrimSuffix(block[i+1:], "\n"), block[:i+1]
			} else if beforeGap.MatchString(strings.TrimSuffix(block, "\n")) {
				notice, block = strings.TrimSuffix(block, "\n"), ""
			}
			add(block, notice, beforeGap)
			text = after
		}
		own, notice, end := text, "", ""
		if i := strings.LastIndex(own, "\n[output clipped: "); i >= 0 {
			own, notice = own[:i+1], own[i+1:]
		} else if strings.HasPrefix(own, "[output clipped: ") {
			own, notice = "", own
		}
		gap := clipNotice
		if line, rest, ok := strings.Cut(notice, "\n"); ok && clipBetween.MatchString(line) {
			// Head and end: the end follows the notice's line.
			notice, end, gap = line, rest, clipBetween
		}
		if notice != "" && !gap.MatchString(notice) {
			t.Fatalf("result %d: trailer %q", r, notice)
		}
		add(own, notice, gap)
		if end != "" {
			add(end, "", nil)
			own += end
		}
		for _, l := range strings.Split(own, "\n") {
			if m := lineMine.FindStringSubmatch(l); m != nil {
				k, _ := strconv.Atoi(m[1])
				if prev, dup := mineIn[k]; dup {
					t.Errorf("mine%03d in results %d and %d", k, prev, r)
				}
				mineIn[k] = r
			}
		}
	}
	// Each call's own line is in its own result, unless its output was
	// clipped (its bytes are then in that result's gap).
	for k := 1; k <= calls; k++ {
		if r, ok := mineIn[k]; ok && r != k {
			t.Errorf("mine%d is in result %d, not %d", k, r, k)
		} else if !ok && !strings.Contains(results[k], "[output clipped") {
			t.Errorf("mine%d is missing and result %d is not clipped: %q", k, k, results[k])
		}
	}

	// Walk the stream: the writer's lines in order; across a gap the
	// numbers may jump, and the gap must be exactly the bytes missing.
	text := ""
	var gaps []struct{ at, n int }
	for _, p := range stream {
		if p.gap > 0 {
			gaps = append(gaps, struct{ at, n int }{len(text), p.gap})
		} else {
			text += p.text
		}
	}
	want := 0
	for i := 1; i <= lines; i++ {
		want += len(fmt.Sprintf("L%07d\n", i))
	}
	for k := 1; k <= calls; k++ {
		want += len(fmt.Sprintf("mine%03d\n", k))
		if k%7 == 0 {
			want += 300 * len("S0000001\n")
		}
	}
	want += len("end\n")
	jobSeen := false
	for _, l := range strings.Split(text, "\n") {
		if lineJob.MatchString(l) {
			want += len(l) + 1
			jobSeen = true
		}
	}
	got := len(text)
	for _, g := range gaps {
		got += g.n
	}
	if !jobSeen && got-want >= len("[1] 1\n") && got-want <= len("[1] 4194304\n") {
		// bash's "[1] PID" line fell in a gap: its length is the PID's
		// (small in a PID namespace), which the gap counts but the text
		// cannot show.
		want = got
	}
	if got != want {
		if d := os.Getenv("ACCOUNTING_DUMP"); d != "" {
			_ = os.WriteFile(d, []byte(strings.Join(results, "\n=====RESULT=====\n")), 0o600)
		}
		t.Errorf("kept %d bytes and notices count %d more: %d in all, but %d were written", len(text), got-len(text), got, want)
	}
	// Order: between gaps the writer's numbers grow by exactly one; the
	// first after a gap only grows. Lines cut by a gap are fragments at a
	// region's edges; every other line is a call's own.
	last, start := 0, 0
	for r, g := range append(gaps, struct{ at, n int }{len(text), 0}) {
		parts := strings.Split(text[start:g.at], "\n")
		jump := r > 0
		for j, l := range parts {
			if m := lineL.FindStringSubmatch(l); m != nil {
				n, _ := strconv.Atoi(m[1])
				if (jump && n <= last) || (!jump && n != last+1) {
					t.Errorf("L%07d after L%07d (region %d, gap before it: %v)", n, last, r, jump)
				}
				last, jump = n, false
				continue
			}
			edge := (j == 0 && r > 0) || j == len(parts)-1
			if !wholeLine(l) && !edge {
				t.Errorf("unexpected line %q in region %d", l, r)
			}
		}
		start = g.at
	}
	if len(gaps) == 0 && last != lines {
		t.Errorf("the last writer line seen is %d of %d", last, lines)
	}
}

func wholeLine(l string) bool {
	return lineL.MatchString(l) || lineMine.MatchString(l) || lineSeq.MatchString(l) || lineJob.MatchString(l) || l == "end" || l == ""
}

// The timeout path: a command prints numbered lines as fast as it can until
// the call's time runs out and the shell is killed; it also appends each
// line to a file after printing it. The result, read with its notice as a
// gap, must give back the stream the terminal got: the lines from the first
// on, in order, up to the last the file has (or the one after it, printed
// but not yet appended when the command was stopped), the notice's byte
// count exactly what is missing. Before, a timed-out result lost the last
// thousands of lines written (issue 16 §2).
func TestEveryByteIsAccountedForAtATimeout(t *testing.T) {
	for _, c := range []struct {
		limit    int
		headOnly bool
	}{{1500, false}, {16000, false}, {1500, true}} {
		t.Run(fmt.Sprintf("maxOutputChars=%d,keepHeadOnly=%v", c.limit, c.headOnly), func(t *testing.T) {
			h := newHost(t, func(cfg *config.Config) { cfg.Bash.MaxOutputChars, cfg.Bash.KeepHeadOnly = c.limit, c.headOnly })
			file := filepath.Join(t.TempDir(), "written")
			res := bashArgs(t, h, "a", shell.Args{TimeoutMs: 1500, Command: fmt.Sprintf(
				`for ((i=1;;i++)); do printf "L%%07d\n" $i; printf "L%%07d\n" $i >> %s; done`, file)})
			if !res.TimedOut {
				t.Fatalf("not timed out: %+v", res)
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			appended := strings.Count(string(b), "\n")
			text, trailer, ok := strings.Cut(res.Text, "\n[timed out after ")
			if !ok {
				t.Fatalf("no timeout notice: %q", res.Text)
			}
			text += "\n"
			head, gap, tail := text, 0, ""
			if i := strings.Index(text, "[output clipped: "); i >= 0 {
				line, rest, _ := strings.Cut(text[i:], "\n")
				head = text[:i]
				cut := false
				if m := clipBetween.FindStringSubmatch(line); m != nil {
					gap, _ = strconv.Atoi(m[1])
					tail, cut = rest, m[2] != ""
				} else if m := clipNotice.FindStringSubmatch(line); m != nil && rest == "" {
					gap, _ = strconv.Atoi(m[2]) // only the beginning is kept
					cut = m[1] != ""
				} else {
					t.Fatalf("notice %q, then %q", line, rest)
				}
				if cut {
					head = strings.TrimSuffix(head, "\n") // the renderer's newline after a cut line
				}
			}
			if strings.Contains(trailer, "[output clipped") {
				t.Fatalf("a clip notice after the timeout's: %q", trailer)
			}
			// The stream ends with the last whole line the terminal got;
			// in head-only mode its number comes from the byte count.
			total := len(head) + gap + len(tail)
			if total%9 != 0 {
				t.Fatalf("kept %d+%d bytes and the notices count %d: not whole lines", len(head), len(tail), gap)
			}
			last := total / 9
			if last != appended && last != appended+1 {
				t.Fatalf("the result's stream ends at line %d, the command had appended %d", last, appended)
			}
			var want strings.Builder
			for i := 1; i <= last; i++ {
				fmt.Fprintf(&want, "L%07d\n", i)
			}
			if !strings.HasPrefix(want.String(), head) || !strings.HasSuffix(want.String(), tail) {
				t.Fatalf("head or end is not the stream's (head %d bytes, end %d bytes of %d)", len(head), len(tail), want.Len())
			}
		})
	}
}
