package hosts

import (
	"bytes"
	"regexp"
	"sync"
)

// watcher collects a process's output and sends the first match of re on
// found.
type watcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	re    *regexp.Regexp
	found chan []string
	sent  bool
}

func newWatcher(re *regexp.Regexp) *watcher {
	return &watcher{re: re, found: make(chan []string, 1)}
}

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		if m := w.re.FindStringSubmatch(w.buf.String()); m != nil {
			w.sent = true
			w.found <- m
		}
	}
	return len(p), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
