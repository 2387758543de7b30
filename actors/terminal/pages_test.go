package terminal_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-actors/dsh-actors/config"
)

// issue 16 §16: a page asked from offset 0 once the start of the history was
// dropped returns the first bytes retained, and says where they start; a
// page that ends inside a line says so instead of adding a bare newline.
func TestPagesStartAtTheFirstRetainedByteAndMarkACutLine(t *testing.T) {
	f := newFixture(t, func(c *config.Config) { c.Terminal.HistoryBytes = 4096 })
	id, _ := f.open(`{}`)
	want(t, f.send(id, `for i in $(seq 1 2000); do echo "row $i"; done`, "Enter"), "prompt", "row 2000")
	for _, args := range []string{`"offset":0,"limit":100`, `"offset":0`, `"offset":5,"limit":30`} {
		p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,%s}`, id, args))
		from, _ := p.data["output_from"].(float64)
		to, _ := p.data["output_to"].(float64)
		if p.isErr || to <= from || from < 4096 || !strings.Contains(p.text, "row ") ||
			!strings.Contains(p.text, fmt.Sprintf("were dropped from the retained history; the page starts at byte %d", int64(from))) {
			t.Fatalf("page {%s}: bytes %v-%v:\n%s", args, from, to, p.text)
		}
	}
	// A limit that ends inside "row 1999\n": the line break after the page
	// is not the output's, and the page says so.
	last := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":0}`, id))
	end := int64(last.data["output_to"].(float64))
	if !strings.Contains(last.text, "row 1999\nrow 2000\n# ") {
		t.Fatalf("%s", last.text)
	}
	start := end - int64(len("row 1999\nrow 2000\n# "))
	p := f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":%d,"limit":5}`, id, start))
	if !strings.HasPrefix(p.text, "row 1\n[the page ends inside a line") {
		t.Fatalf("a page cut inside a line (from %d):\n%s", start, p.text)
	}
	// A page that ends with a whole line has no such note.
	p = f.call("terminal_read", fmt.Sprintf(`{"terminal_id":%q,"offset":%d,"limit":9}`, id, start))
	if !strings.HasPrefix(p.text, "row 1999\n[") || strings.Contains(p.text, "inside a line") {
		t.Fatalf("a page of a whole line (from %d):\n%s", start, p.text)
	}
}
