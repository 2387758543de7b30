package shell_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A program left waiting for input that takes its time to clean up after
// SIGINT is let finish: no end-of-file byte is typed to it (one it never
// reads would be glued to the next line: `$'\004cd': command not found`,
// and the next line's rm ran in the wrong directory), no SIGTERM cuts its
// cleanup short, and it is not said to have kept waiting (issue 16 §1).
func TestASlowCleanupIsLetFinish(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	work, keep := filepath.Join(dir, "work"), filepath.Join(dir, "keep")
	bash(t, h, "a", "mkdir -p "+work+" "+keep+" && touch "+work+"/junk.txt "+keep+"/precious.txt && cd "+keep)
	waiting := bash(t, h, "a", `bash --norc -c 'trap "sleep 2.5; echo cleaned; exit 0" INT; read -p "Proceed? " x'`)
	if !waiting.WaitingForInput {
		t.Fatalf("not waiting for input: %+v", waiting)
	}
	res := bash(t, h, "a", "cd "+work+"\nrm -f *.txt\nls "+dir+"/*")
	for _, bad := range []string{"command not found", "end-of-file", "SIGTERM", "kept waiting"} {
		if strings.Contains(res.Text, bad) {
			t.Errorf("the next call says %q:\n%s", bad, res.Text)
		}
	}
	if !strings.Contains(res.Text, "cleaned") || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Errorf("the next call:\n%s", res.Text)
	}
	if _, err := os.Stat(filepath.Join(keep, "precious.txt")); err != nil {
		t.Errorf("precious.txt is gone: %v\n%s", err, res.Text)
	}
	if _, err := os.Stat(filepath.Join(work, "junk.txt")); err == nil {
		t.Errorf("junk.txt is still there: the rm ran elsewhere\n%s", res.Text)
	}
}

// A marker with the command number bash was at is no proof that nothing ran:
// a command can print a copy of one made before it went on (issue 16 §3).
func TestAStaleMarkerIsNoProofThatNothingRan(t *testing.T) {
	h := newHost(t, nil)
	dir := t.TempDir()
	res := bash(t, h, "a", `true; M="${PS1@P}"; PS1=""; printf %s "$M"; touch `+dir+`/f; false`)
	if _, err := os.Stat(dir + "/f"); err != nil {
		t.Fatalf("the command did not run: %v", err)
	}
	if res.NotRun || !(res.StatusUnknown || res.ExitCode != nil && *res.ExitCode == 1) {
		t.Fatalf("a command that ran: %+v", res)
	}
	// A syntax error still ran nothing, with bash's status.
	res = bash(t, h, "a", "fi")
	if !res.NotRun || res.ExitCode == nil || *res.ExitCode != 2 {
		t.Fatalf("a syntax error: %+v", res)
	}
	wantText(t, bash(t, h, "a", "echo fine"), "fine\n")
}
