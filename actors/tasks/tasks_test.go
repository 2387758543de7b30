package tasks

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

// The task tools run end to end in actors/terminal's tests (they need a
// terminal); here, the parts that stand alone.
func TestMain(m *testing.M) { testkit.Main(m) }

func TestFitTaskKeepsTheEndWithinTheCap(t *testing.T) {
	out := []byte(strings.Repeat("✓ progress\n", 2000) + "done\n")
	text := fitTask([]string{"[note]"}, out, []string{"[task-1 finished: prompt]"}, 1024)
	if len(text) > 1024 || !utf8.ValidString(text) || !strings.Contains(text, "done\n[task-1 finished: prompt]") ||
		!strings.HasPrefix(text, "[note]\n[") || !strings.Contains(text, "earlier bytes of this output not shown") {
		t.Fatalf("%d bytes:\n%s", len(text), text)
	}
	if got := fitTask(nil, []byte("x"), []string{"[t]"}, 1024); got != "x\n[t]" {
		t.Fatalf("%q", got)
	}
}
