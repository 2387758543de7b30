package hosts

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// tracer is a reverse proxy between an HTTP host and the server that
// writes every MCP exchange to a file: each request (method, session id,
// body), each answer as it streams, and whether the host went away before
// the answer ended. Only with HOSTS_LOG: it is how the facts in doc.go
// about what each host sends were found.
type tracer struct {
	mu    sync.Mutex
	f     *os.File
	start time.Time
	n     int
}

// startTracer proxies to target (".../mcp") and returns the URL to give
// the host instead.
func startTracer(t testing.TB, target, path string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracer{f: f, start: time.Now()}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host})
			r.Out.Host = u.Host
		},
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tr.serve(proxy, w, r)
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
		f.Close()
	})
	return "http://" + ln.Addr().String() + u.Path
}

func (tr *tracer) printf(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	fmt.Fprintf(tr.f, "%8.3fs ", time.Since(tr.start).Seconds())
	fmt.Fprintf(tr.f, format, args...)
	if !strings.HasSuffix(format, "\n") {
		tr.f.WriteString("\n")
	}
}

func (tr *tracer) serve(proxy *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) {
	tr.mu.Lock()
	tr.n++
	n := tr.n
	tr.mu.Unlock()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	tr.printf("#%d > %s %s session=%q protocol=%q %s", n, r.Method, r.URL.Path,
		r.Header.Get("Mcp-Session-Id"), r.Header.Get("Mcp-Protocol-Version"), body)
	tw := &traceWriter{ResponseWriter: w, tr: tr, n: n}
	proxy.ServeHTTP(tw, r)
	select {
	case <-r.Context().Done():
		tr.printf("#%d < ended: the host went away (%v)", n, r.Context().Err())
	default:
		tr.printf("#%d < ended", n)
	}
}

type traceWriter struct {
	http.ResponseWriter
	tr *tracer
	n  int
}

func (w *traceWriter) WriteHeader(code int) {
	w.tr.printf("#%d < %d session=%q", w.n, code, w.Header().Get("Mcp-Session-Id"))
	w.ResponseWriter.WriteHeader(code)
}

func (w *traceWriter) Write(p []byte) (int, error) {
	w.tr.printf("#%d < %s", w.n, strings.TrimSpace(string(p)))
	return w.ResponseWriter.Write(p)
}

func (w *traceWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
