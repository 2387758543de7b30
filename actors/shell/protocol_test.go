package shell

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/inband"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/messages"
)

func TestNonceSurvivesUpperCasingOutput(t *testing.T) {
	p := newProtocol("/dev/pts/0")
	if p.nonce != strings.ToUpper(p.nonce) || len(p.nonce) != 16 {
		t.Fatalf("nonce %q: stty olcuc would change it", p.nonce)
	}
	if bytes.ContainsAny(p.lead, "abcdefghijklmnopqrstuvwxyz") {
		t.Fatalf("lead %q has lower-case letters", p.lead)
	}
}

func TestParseMarker(t *testing.T) {
	cases := []struct {
		body string
		want marker
	}{
		{"7:0:183:=", marker{kind: markPS1, seq: 7, status: 0, ps1Len: 183, ps2Ours: true}},
		{"12:130:183:", marker{kind: markPS1, seq: 12, status: 130, ps1Len: 183}},
		{"3:2:9:> :x", marker{kind: markPS1, seq: 3, status: 2, ps1Len: 9}}, // a foreign PS2 with a colon
		{"c", marker{kind: markPS2}},
		{"q:1:r::e:$ ", marker{kind: markQuery, status: 1, ps1ReadOnly: true, stderrElsewhere: true, prompt: "$ "}},
		{"q:0:::: a:b ", marker{kind: markQuery, prompt: " a:b "}},
		{"q:x::::", marker{}},
		{"7:0", marker{}},
		{"x:0:1:=", marker{}},
		{"", marker{}},
	}
	for _, c := range cases {
		if got := parseMarker([]byte(c.body)); got != c.want {
			t.Errorf("%q: got %+v, want %+v", c.body, got, c.want)
		}
	}
}

// Markers are found across chunk boundaries and removed; anything else,
// other shells' markers included, is output.
func TestMarkersAreFoundAcrossChunks(t *testing.T) {
	p := newProtocol("/dev/pts/0")
	mk := "\x1eDSH" + p.nonce + ":4:0:183:=\x1e"
	in := "out" + mk + "x\x1eDSH0000000000000000:1:0:1:=\x1ey"
	for cut := 0; cut <= len(in); cut++ {
		var text, bodies []byte
		var s = streamOf(p)
		for _, chunk := range []string{in[:cut], in[cut:]} {
			s.Feed([]byte(chunk), func(b []byte) { text = append(text, b...) },
				func(b []byte) bool { bodies = append(bodies, b...); bodies = append(bodies, '|'); return true })
		}
		if string(text) != "outx\x1eDSH0000000000000000:1:0:1:=\x1ey" || string(bodies) != "4:0:183:=|" {
			t.Fatalf("cut %d: text %q markers %q", cut, text, bodies)
		}
	}
}

func TestFrame(t *testing.T) {
	cases := []struct {
		text  string
		typed string
		lines int
	}{
		{"echo hi", "echo hi\n", 1},
		{"echo hi\n", "echo hi\n", 1},
		{"a\nb", "{\na\nb\n}\n", 4},
		{"a\r\nb\r\n", "{\na\nb\n}\n", 4},
		{"", "\n", 1},
		{"\n  \n\t", "\n", 1},
		{"# only\n  # comments", "\n", 1},
		{"# comment\necho x", "{\n# comment\necho x\n}\n", 4},
		{"printf '\x03\x1b[1m'", "printf '\x03\x1b[1m'\n", 1},
		{"a\rb", "a\rb\n", 1}, // a lone CR is text
	}
	for _, c := range cases {
		typed, lines := frame(c.text, false)
		if string(typed) != c.typed || lines != c.lines {
			t.Errorf("%q: typed %q (%d lines), want %q (%d)", c.text, typed, lines, c.typed, c.lines)
		}
	}
	typed, _ := frame("printf 'a\x03\tb\x7f'\necho", true)
	if want := "{\nprintf 'a\x16\x03\x16\tb\x16\x7f'\necho\n}\n"; string(typed) != want {
		t.Errorf("readline: typed %q, want %q", typed, want)
	}
}

func TestPromptSigsMatchOnlyBashsOwnReads(t *testing.T) {
	plain := procfs.Syscall{Nr: sysRead, Args: [6]uint64{0, 0x5500, 0x400}, SP: 0x7ff0}
	rl := procfs.Syscall{Nr: sysPselect6, Args: [6]uint64{1, 0x7d10}, SP: 0x7c00}
	g := promptSigs{plain: plain, readline: rl}
	cases := []struct {
		name       string
		s          procfs.Syscall
		continuing bool
		ok, rl     bool
	}{
		{"plain prompt", plain, false, true, false},
		{"plain continuation, deeper", procfs.Syscall{Nr: sysRead, Args: [6]uint64{0, 0x5500, 0x400}, SP: 0x7e00}, false, true, false},
		{"read builtin: another buffer", procfs.Syscall{Nr: sysRead, Args: [6]uint64{0, 0x5600, 0x1000}, SP: 0x7e00}, false, false, false},
		{"read on another fd", procfs.Syscall{Nr: sysRead, Args: [6]uint64{3, 0x5500, 0x400}, SP: 0x7ff0}, false, false, false},
		{"readline prompt", rl, false, true, true},
		{"readline continuation", procfs.Syscall{Nr: sysPselect6, Args: [6]uint64{1, 0x7a10}, SP: 0x7900}, true, true, true},
		{"a deeper readline wait with no continuation prompt (read -e)", procfs.Syscall{Nr: sysPselect6, Args: [6]uint64{1, 0x7a10}, SP: 0x7900}, false, false, true},
		{"read -e, shallower", procfs.Syscall{Nr: sysPselect6, Args: [6]uint64{1, 0x8010}, SP: 0x7f00}, true, false, false},
		{"running", procfs.Syscall{Running: true, Nr: -1}, false, false, false},
		{"wait4", procfs.Syscall{Nr: 61, Args: [6]uint64{0xffffffffffffffff}}, false, false, false},
	}
	for _, c := range cases {
		ok, isRL := g.match(c.s, c.continuing)
		if ok != c.ok || (ok && isRL != c.rl) {
			t.Errorf("%s: match %v readline %v, want %v %v", c.name, ok, isRL, c.ok, c.rl)
		}
	}
	// A layout learned in one process places the readline read in another.
	lay := layoutOf(g)
	moved := procfs.Syscall{Nr: sysRead, Args: plain.Args, SP: plain.SP + 0x1230}
	if got := lay.apply(moved); got.SP != rl.SP+0x1230 || got.Args[1] != rl.Args[1]+0x1230 || got.Nr != sysPselect6 {
		t.Errorf("layout applied: %+v", got)
	}
}

func TestPromptJunk(t *testing.T) {
	p := newProtocol("/dev/pts/0")
	ours := "?DSH" + p.nonce + ":5:0:183:=?"
	for _, c := range []struct{ prompt, want string }{
		{"(venv) " + ours, "(venv) "},
		{ours + "$ ", "$ "},
		{"a" + ours + "b", "ab"},
		{"$ ", "$ "},
		{"", ""},
	} {
		if got := p.promptJunk(c.prompt); got != c.want {
			t.Errorf("%q: %q, want %q", c.prompt, got, c.want)
		}
	}
}

func TestCollectorCountsCharactersAcrossWrites(t *testing.T) {
	c := newCollector(3)
	for _, b := range []byte("é✓xyz") { // 2 + 3 + 1 + 1 + 1 bytes, written one byte at a time
		c.write([]byte{b})
	}
	if got := c.text(); got != "é✓x" || c.dropped != 2 {
		t.Fatalf("kept %q, dropped %d", got, c.dropped)
	}
}

func TestCollectorSplitAndTrim(t *testing.T) {
	c := newCollector(100)
	c.write([]byte("one\ntwo\nthr"))
	whole, partial := c.splitLastLine()
	if whole.text() != "one\ntwo\n" || string(partial) != "thr" {
		t.Fatalf("split %q + %q", whole.text(), partial)
	}
	c = newCollector(3)
	c.write([]byte("abcdef"))
	if whole, partial := c.splitLastLine(); whole.text() != "abc" || partial != nil || whole.dropped != 3 {
		t.Fatalf("a clipped collector is not split: %q + %q", whole.text(), partial)
	}
	c = newCollector(100)
	c.write([]byte("out(venv) "))
	if !c.trimSuffix("(venv) ") || c.text() != "out" || c.trimSuffix("x") {
		t.Fatalf("trim: %q", c.text())
	}
}

// A shell that cannot start answers with an error naming the program.
func TestMissingBashIsAnError(t *testing.T) {
	system := testkit.NewSystem(t)
	pid := system.Root.Spawn(Props(Options{Config: DefaultConfig(), Bash: "no-such-bash-here"}))
	t.Cleanup(func() { testkit.Stop(t, system, pid) })
	res, err := system.Root.RequestFuture(pid, &Run{CallID: "1", Args: Args{Command: "true"}}, testkit.Timeout).Result()
	if err != nil {
		t.Fatal(err)
	}
	r := res.(*messages.ToolResult)
	if !r.IsError || !strings.Contains(r.Text, "no-such-bash-here") || !strings.Contains(r.Text, "could not start the shell") {
		t.Fatalf("%+v", r)
	}
}

func streamOf(p protocol) *inband.Stream { return &inband.Stream{Scanner: p.scan} }

func TestNoticesCountBytesInGoodEnglish(t *testing.T) {
	for _, c := range []struct {
		n    int64
		ofIt bool
		want string
	}{{1, false, "byte was"}, {2, false, "bytes were"}, {1, true, "byte of it was"}, {0, true, "bytes of it were"}} {
		if got := bytesWere(c.n, c.ofIt); got != c.want {
			t.Errorf("%d %v: %q, want %q", c.n, c.ofIt, got, c.want)
		}
	}
	if cutNote("ab\n") != "" || cutNote("") != "" || cutNote("ab") == "" {
		t.Error("cutNote")
	}
}
