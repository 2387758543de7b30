package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// Landlock, the second layer of level fs, holds by itself: on a thread it
// restricts, a write beneath an allowed directory works and one elsewhere
// is refused, whatever the mounts allow.
func TestLandlockAllowsWritesOnlyBeneathItsPaths(t *testing.T) {
	allowed, other := t.TempDir(), t.TempDir()
	type result struct {
		note            string
		err, in, beside error
	}
	done := make(chan result)
	go func() {
		// Locked and never unlocked: the restricted thread ends with the
		// goroutine, and no other goroutine ever runs on it.
		runtime.LockOSThread()
		var r result
		r.note, r.err = landlockWrites([]string{allowed})
		if r.err == nil && r.note == "" {
			r.in = os.WriteFile(filepath.Join(allowed, "f"), []byte("x"), 0o644)
			r.beside = os.WriteFile(filepath.Join(other, "f"), []byte("x"), 0o644)
		}
		done <- r
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.note != "" {
		t.Skipf("this kernel has no Landlock: %s (the sandbox's report says so too)", r.note)
	}
	if r.in != nil {
		t.Errorf("a write beneath the allowed directory: %v", r.in)
	}
	if !errors.Is(r.beside, syscall.EACCES) {
		t.Errorf("a write elsewhere: %v, want EACCES", r.beside)
	}
	// This thread, never restricted, writes anywhere.
	if err := os.WriteFile(filepath.Join(other, "g"), []byte("x"), 0o644); err != nil {
		t.Errorf("an unrestricted thread: %v", err)
	}
}
