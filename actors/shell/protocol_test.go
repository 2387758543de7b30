package shell

import (
	"bytes"
	"fmt"
	"strconv"
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
	p := newProtocol("/dev/pts/0")
	n := strconv.Itoa(len(p.ps1))
	head := p.ps2[1:20]
	cases := []struct {
		body string
		want marker
	}{
		{"7:0:190:" + n + ":23:" + head + ":" + p.ps1Inner, marker{kind: markPS1, seq: 7, opts: 190, ps1Ours: true, ps2Len: 23, ps2Head: head}},
		{"12:130:190:" + n + "::" + ":" + p.ps1Inner, marker{kind: markPS1, seq: 12, status: 130, opts: 190, ps1Ours: true, ps2Len: -1}},         // PS2 unset
		{"3:2:190:" + n + ":3:a:b:" + p.ps1Inner, marker{kind: markPS1, seq: 3, status: 2, opts: 190, ps1Ours: true, ps2Len: 3, ps2Head: "a:b"}}, // a colon in PS2
		// PS1 changed: another length, or the same length and other text.
		{"3:2:199:9:2:> :" + p.ps1Inner, marker{kind: markPS1, seq: 3, status: 2, opts: 199, ps2Len: 2, ps2Head: "> :" + p.ps1Inner}},
		{"3:2:0:" + n + ":2:> :" + strings.Replace(p.ps1Inner, "$?", "42", 1), marker{kind: markPS1, seq: 3, status: 2, ps2Len: 2,
			ps2Head: "> :" + strings.Replace(p.ps1Inner, "$?", "42", 1)}},
		{"c", marker{kind: markPS2}},
		{"q:T0K:8:1:r::190:$ ", marker{kind: markQuery, token: "T0K", seq: 8, status: 1, ps1ReadOnly: true, opts: 190, prompt: "$ "}},
		{"q:T0K:9:0::r:199eb: a:b ", marker{kind: markQuery, token: "T0K", seq: 9, ps2ReadOnly: true, opts: 199, extdebug: true, bracesAliased: true, prompt: " a:b "}},
		{"q:T0K:9:0:::190p:", marker{kind: markQuery, token: "T0K", seq: 9, opts: 190}},
		{"q:T0K:x:0::::", marker{}},
		{"q:T0K:1:x::::", marker{}},
		{"q:T0K:1:0:::e:", marker{}},
		{"q:T0K:1:0:::", marker{}},
		{"7:0:1:=", marker{}},
		{"x:0:1:2:=", marker{}},
		{`5:$?:${#PS1}:${PS2+${#PS2}}:${PS2+${PS2:1:19}}`, marker{}}, // promptvars off
		{"", marker{}},
	}
	for _, c := range cases {
		if got := p.parseMarker([]byte(c.body)); got != c.want {
			t.Errorf("%q: got %+v, want %+v", c.body, got, c.want)
		}
	}
	ours := p.parseMarker([]byte("1:0:190:" + n + ":" + strconv.Itoa(len(p.ps2)) + ":" + head + ":" + p.ps1Inner))
	if !ours.ps1Ours || !p.ps2Ours(ours) {
		t.Errorf("the protocol's own prompts are not recognised: %+v", ours)
	}
	if p.ps2Ours(marker{ps1Ours: true, ps2Len: 2, ps2Head: "> "}) || p.ps2Ours(marker{ps2Len: len(p.ps2), ps2Head: head}) {
		t.Error("a changed PS2 taken for ours")
	}
	if len(p.ps1) != len(p.ps1Inner)+2 || !strings.HasSuffix(p.ps1, fmt.Sprintf(":${PS1:1:(${#PS1}==%d)*%d}\x1e", len(p.ps1), len(p.ps1Inner))) {
		t.Errorf("PS1 %q does not show its own text", p.ps1)
	}
}

// Markers are found across chunk boundaries and removed; anything else,
// other shells' markers included, is output.
func TestMarkersAreFoundAcrossChunks(t *testing.T) {
	p := newProtocol("/dev/pts/0")
	mk := "\x1eDSH" + p.nonce + ":4:0:183:23:x\x1e"
	in := "out" + mk + "x\x1eDSH0000000000000000:1:0:1:=\x1ey"
	for cut := 0; cut <= len(in); cut++ {
		var text, bodies []byte
		var s = streamOf(p)
		for _, chunk := range []string{in[:cut], in[cut:]} {
			s.Feed([]byte(chunk), func(b []byte) { text = append(text, b...) },
				func(b, _ []byte) bool { bodies = append(bodies, b...); bodies = append(bodies, '|'); return true })
		}
		if string(text) != "outx\x1eDSH0000000000000000:1:0:1:=\x1ey" || string(bodies) != "4:0:183:23:x|" {
			t.Fatalf("cut %d: text %q markers %q", cut, text, bodies)
		}
	}
}

func TestSplitTextAndFrameLine(t *testing.T) {
	cases := []struct {
		text  string
		lines []string
	}{
		{"echo hi", []string{"echo hi"}},
		{"echo hi\n", []string{"echo hi"}},
		{"a\nb", []string{"a", "b"}},
		{"a\r\nb\r\n", []string{"a", "b"}},
		{"", []string{""}},
		{"\n  \n\t", []string{""}},
		{"# only\n  # comments", []string{""}},
		{"# comment\necho x\n\n", []string{"# comment", "echo x", ""}},
		{"a\rb", []string{"a\rb"}}, // a lone CR is text
	}
	for _, c := range cases {
		if got := splitText(c.text); strings.Join(got, "|") != strings.Join(c.lines, "|") || len(got) != len(c.lines) {
			t.Errorf("%q: %q, want %q", c.text, got, c.lines)
		}
	}
	if got := frameLine("printf '\x03\x1b'", false); string(got) != "printf '\x03\x1b'\n" {
		t.Errorf("plain: %q", got)
	}
	if got := frameLine("printf 'a\x03\tb\x7f'", true); string(got) != "printf 'a\x16\x03\x16\tb\x16\x7f'\n" {
		t.Errorf("readline: %q", got)
	}
	for _, l := range []string{"", "  ", "\t# x", "#"} {
		if !blankLine(l) {
			t.Errorf("%q is blank", l)
		}
	}
	if blankLine("x # y") || blankLine(" a") {
		t.Error("a command line taken for blank")
	}
}

func TestQueryTokens(t *testing.T) {
	p := newProtocol("/dev/pts/0")
	a, b := newToken(), newToken()
	if a == b || len(a) != 16 || a != strings.ToUpper(a) {
		t.Fatalf("tokens %q %q", a, b)
	}
	line := string(p.queryLine(a))
	if !strings.HasPrefix(line, `{ \`+p.queryName()+` "$?" `+a) || !strings.HasSuffix(line, "; } >/dev/null 2>&1\n") {
		t.Fatalf("query line %q", line)
	}
	if line := string(p.queryLineSetting(a, "2", false, false)); !strings.HasPrefix(line, `\`+p.queryName()+` 2 `+a) || strings.Contains(line, "{") {
		t.Fatalf("query line %q", line)
	}
	if fn := p.queryFunc(); !strings.Contains(fn, "readonly -f "+p.queryName()) || !strings.Contains(fn, ">/dev/pts/0") {
		t.Fatalf("query function %q", fn)
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
