package shell

import (
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/messages"
)

func TestFindMarker(t *testing.T) {
	p := newProtocol()
	mk := func(body string) string { return "\x1eDSH" + p.nonce + ":" + body + "\x1e" }
	cases := []struct {
		in      string
		found   bool
		seq     uint64
		hasSeq  bool
		status  int
		start   int
		partial int
	}{
		{in: "out" + mk("7:0"), found: true, seq: 7, hasSeq: true, start: 3, partial: -1},
		{in: mk(":130") + "rest", found: true, status: 130, start: 0, partial: -1},
		{in: "x\x1eDSH0000000000000000:1:0\x1ey", partial: -1},                 // another shell's nonce
		{in: "x\x1e\x1e\x1e", partial: 3},                                      // a lone RS at the end may start a marker
		{in: "abc" + mk("5:1")[:10], partial: 3},                               // cut inside the lead
		{in: "abc" + mk("5:1")[:len(mk("5:1"))-2], partial: 3},                 // cut inside the body
		{in: "\x1eDSH" + p.nonce + ":" + strings.Repeat("9", 80), partial: -1}, // too long to be ours
		{in: mk("x:y") + mk("3:2"), found: true, seq: 3, hasSeq: true, status: 2, start: len(mk("x:y")), partial: -1},
	}
	for _, c := range cases {
		body, start, end, partial, found := p.scan.Find([]byte(c.in))
		m, _ := parseMarkerBody(body)
		if found != c.found || partial != c.partial {
			t.Errorf("%q: found %v partial %d, want %v %d", c.in, found, partial, c.found, c.partial)
			continue
		}
		if found && (m.seq != c.seq || m.hasSeq != c.hasSeq || m.status != c.status || start != c.start || end <= start) {
			t.Errorf("%q: %+v at %d..%d", c.in, m, start, end)
		}
	}
}

func TestCommandLineIsPrintableASCIIInShortLines(t *testing.T) {
	p := newProtocol()
	text := "echo 'a!b'\n" + strings.Repeat("é\x01\x7f\\'", 2000)
	line := p.commandLine(42, text)
	for i, c := range line {
		if (c < 0x20 && c != '\n') || c >= 0x7f || c == '!' {
			t.Fatalf("byte %#x at %d", c, i)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(string(line), "\n"), "\n") {
		if len(l) > maxPhysicalLine {
			t.Fatalf("physical line of %d bytes", len(l))
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
