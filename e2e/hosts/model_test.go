package hosts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The scripted model: an HTTP server on 127.0.0.1 that speaks the model API
// of a host and plays a script of tool calls. It keeps no conversation state:
// every request carries the whole conversation, so the number of tool results
// in it says which step comes next. What it does remember is the text of each
// tool result, as the host handed it to the model, for the test to judge.

// conversation is what the model needs from a request, whatever the API.
type conversation struct {
	// tools are the names of the functions the host offers, as the model
	// must call them.
	tools []string
	// results are the texts of the tool results in the conversation, in
	// order: the host's answer to each call of the script so far.
	results []string
}

// reply is what the model answers: a tool call or, once the script is
// done (or for a request that offers no tools), a final text.
type reply struct {
	tool string          // the function name as the host offered it; "" for text
	args json.RawMessage // its arguments
	id   string          // a call id, unique in the conversation
	text string          // the final text when tool is ""
}

// model plays one script for one run of a host.
type model struct {
	script []step
	srv    *http.Server
	url    string // http://127.0.0.1:PORT
	logDir string // when set, each request and answer is written here
	// onFinal, when set, runs as the model decides on its final answer
	// (the host and its session are still there).
	onFinal func()

	mu       sync.Mutex
	seen     []string        // the tool results the model was given, by step
	asked    []time.Time     // when the model first made each step's call
	took     []time.Duration // from the call to its result, by step
	resends  []string        // a result that came back different in a later request
	problems []string        // requests the model could not answer as scripted
	final    bool            // the final text was sent
	n        int             // requests served
}

// startModel serves api on 127.0.0.1:0 until the test ends; onFinal may
// be nil.
func startModel(t testing.TB, api dialect, script []step, logDir string, onFinal func()) *model {
	t.Helper()
	m := &model{script: script, logDir: logDir, onFinal: onFinal}
	if logDir != "" {
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m.url = "http://" + ln.Addr().String()
	m.srv = &http.Server{Handler: api.handler(m), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		m.srv.Close()
		<-done
	})
	return m
}

// next records what the conversation holds and decides the answer.
func (m *model) next(c conversation) reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range c.results {
		if i < len(m.seen) {
			if m.seen[i] != r && len(m.resends) < 8 {
				m.resends = append(m.resends, fmt.Sprintf("result %d was %q, later %q", i+1, m.seen[i], r))
			}
			continue
		}
		m.seen = append(m.seen, r)
		var took time.Duration
		if i < len(m.asked) {
			took = time.Since(m.asked[i])
		}
		m.took = append(m.took, took)
	}
	i := len(c.results)
	if i >= len(m.script) {
		if !m.final && m.onFinal != nil {
			m.onFinal()
		}
		m.final = true
		return reply{text: "All steps are done."}
	}
	s := m.script[i]
	name := pickTool(c.tools, s.tool)
	if name == "" {
		m.problems = append(m.problems, fmt.Sprintf("step %d (%s): the host offers no %s tool; it offers %v", i+1, s.name, s.tool, c.tools))
		m.final = true
		return reply{text: "I cannot go on: the " + s.tool + " tool is missing."}
	}
	args, err := json.Marshal(s.args(c.results))
	if err != nil {
		panic(err)
	}
	if i == len(m.asked) {
		m.asked = append(m.asked, time.Now())
	}
	return reply{tool: name, args: args, id: fmt.Sprintf("call_%d", i+1)}
}

// problem records a request the model could not make sense of.
func (m *model) problem(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.problems = append(m.problems, fmt.Sprintf(format, args...))
}

// outcome is what the model saw over a run.
type outcome struct {
	seen     []string        // the text of each step's result
	took     []time.Duration // from each call to its result
	resends  []string        // results that changed in a later request
	problems []string        // requests the model could not answer as scripted
	final    bool            // the script ran to its end
}

func (m *model) outcome() outcome {
	m.mu.Lock()
	defer m.mu.Unlock()
	return outcome{seen: slices.Clone(m.seen), took: slices.Clone(m.took), resends: slices.Clone(m.resends),
		problems: slices.Clone(m.problems), final: m.final}
}

// log writes one exchange to logDir (HOSTS_LOG), to see what a host sends.
func (m *model) log(r *http.Request, body []byte, answer string) {
	m.mu.Lock()
	m.n++
	n := m.n
	m.mu.Unlock()
	if m.logDir == "" {
		return
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", " ") != nil {
		pretty.Reset()
		pretty.Write(body)
	}
	name := filepath.Join(m.logDir, fmt.Sprintf("%03d%s", n, strings.NewReplacer("/", "_", ":", "_", "?", "_").Replace(r.URL.Path)))
	os.WriteFile(name+".request", []byte(r.Method+" "+r.URL.String()+"\n"+headerText(r.Header)+"\n"+pretty.String()), 0o644)
	os.WriteFile(name+".answer", []byte(answer), 0o644)
}

func headerText(h http.Header) string {
	var b strings.Builder
	for k, v := range h {
		if strings.EqualFold(k, "Authorization") || strings.Contains(strings.ToLower(k), "key") {
			v = []string{"[redacted]"}
		}
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(v, ", "))
	}
	return b.String()
}

// pickTool finds the function the host offers for the server's tool: the
// name that ends in the tool's and names the server ("mcp__dsh-actors__bash",
// "dsh-actors_bash"), else the bare name ("bash" under a Codex namespace).
// A host's own tool of the same bare name (opencode has a "bash") is not
// taken when the server's is there.
func pickTool(offered []string, tool string) string {
	bare := ""
	for _, name := range offered {
		if name == tool {
			bare = name
			continue
		}
		norm := strings.ReplaceAll(name, "-", "_")
		if strings.HasSuffix(norm, "_"+tool) && strings.Contains(norm, "dsh_actors") {
			rest := strings.TrimSuffix(norm, "_"+tool)
			if strings.HasSuffix(rest, "dsh_actors") || strings.HasSuffix(rest, "dsh_actors_") {
				return name
			}
		}
	}
	return bare
}

// readBody reads a request body, up to 64 MiB.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

// sse writes server-sent events and remembers them for the log.
type sse struct {
	w   http.ResponseWriter
	log strings.Builder
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

// event writes one event; name may be empty (data-only events).
func (s *sse) event(name string, data any) {
	var b []byte
	switch d := data.(type) {
	case string:
		b = []byte(d)
	default:
		var err error
		if b, err = json.Marshal(d); err != nil {
			panic(err)
		}
	}
	var e strings.Builder
	if name != "" {
		e.WriteString("event: " + name + "\n")
	}
	e.WriteString("data: " + string(b) + "\n\n")
	io.WriteString(s.w, e.String())
	s.log.WriteString(e.String())
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// jsonAnswer writes a JSON body and returns it for the log.
func jsonAnswer(w http.ResponseWriter, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
	return string(b)
}

// textOf joins the text of content that is a string or a list of parts
// with a "text" field (Anthropic blocks, Chat Completions parts, Responses
// input_text items), a part a line. Parts of other kinds are named in
// brackets, so that a result that is not text shows up as such.
func textOf(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		texts := make([]string, len(parts))
		for i, p := range parts {
			if p.Text != nil {
				texts[i] = *p.Text
			} else {
				texts[i] = "[" + p.Type + " part]"
			}
		}
		return strings.Join(texts, "\n") // one part a line
	}
	return string(raw)
}

// dialect is one model API.
type dialect interface {
	handler(m *model) http.Handler
}
