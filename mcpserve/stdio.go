package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// JSON-RPC error codes the filter answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// maxDepth is how deeply a message may nest; the SDK refuses deeper ones
// (and over stdio, ends the session for it).
const maxDepth = 1000

// eofHold bounds how long the client's end of input waits for the answers
// of what it sent: the SDK cancels every call still running when its input
// ends, and writes nothing after. A client that closes stdin to stop the
// server signals it if it has not exited within a while (the TypeScript
// SDK: 2 s), so what still runs after eofHold is cancelled.
const eofHold = time.Second

// stdioIn is the client's input as the SDK gets it: one valid JSON-RPC
// message (or batch) a line. Over stdio the SDK (v1.8.0) ends the session,
// and with it the server, at the first line it cannot take (not JSON, not
// JSON-RPC, an id of the wrong type, too deep, too long); it also drops a
// request whose id is still in flight without an answer. The filter answers
// such lines itself, with the error and the reason, and the session goes
// on.
type stdioIn struct {
	src      *bufio.Reader
	out      *stdioOut
	a        *answers
	maxBytes int
	ready    []byte
	err      error // the input's end, given to the SDK once ready is read
}

func newStdioIn(r io.Reader, out *stdioOut, a *answers, maxBytes int) *stdioIn {
	return &stdioIn{src: bufio.NewReaderSize(r, 64<<10), out: out, a: a, maxBytes: maxBytes}
}

func (in *stdioIn) Read(p []byte) (int, error) {
	for len(in.ready) == 0 {
		if in.err != nil {
			return 0, in.err
		}
		line, tooLong, err := in.readLine()
		if tooLong {
			in.out.fail(nil, codeInvalidRequest, fmt.Sprintf("a message of more than %d bytes (mcp.maxRequestBytes): it was not read", in.maxBytes))
		} else if len(line) > 0 {
			in.accept(line)
		}
		if err != nil {
			// The client sent all it will: the answers to what it sent
			// go first.
			ctx, cancel := context.WithTimeout(context.Background(), eofHold)
			_ = in.a.wait(ctx)
			cancel()
			in.err = err
		}
	}
	n := copy(p, in.ready)
	in.ready = in.ready[n:]
	return n, nil
}

// readLine reads one line, without its end; past maxBytes it reads to the
// line's end and reports it too long.
func (in *stdioIn) readLine() (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := in.src.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > in.maxBytes+1 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSpace(buf), tooLong, err
	}
}

// envelope is what the filter reads of a JSON-RPC message.
type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func (e envelope) hasID() bool { return len(e.ID) > 0 && string(e.ID) != "null" }

// accept passes a line on to the SDK, or answers it with an error.
func (in *stdioIn) accept(line []byte) {
	if d := depth(line); d > maxDepth {
		in.out.fail(nil, codeParseError, fmt.Sprintf("the message nests %d levels deep; at most %d are read", d, maxDepth))
		return
	}
	var v json.RawMessage
	if err := json.Unmarshal(line, &v); err != nil {
		in.out.fail(nil, codeParseError, "not one JSON value: "+err.Error())
		return
	}
	var msgs []json.RawMessage
	switch line[0] {
	case '{':
		msgs = []json.RawMessage{line}
	case '[':
		if p := in.out.negotiated(); p >= "2025-06-18" {
			in.out.fail(nil, codeInvalidRequest, "a batch: protocol version "+p+" has none; send one message a line")
			return
		}
		if json.Unmarshal(line, &msgs) != nil || len(msgs) == 0 {
			in.out.fail(nil, codeInvalidRequest, "an empty batch, or a batch of something other than messages")
			return
		}
	default:
		in.out.fail(nil, codeInvalidRequest, "a JSON-RPC message is an object; this is "+kindOf(line[0]))
		return
	}
	var ids []string
	for _, m := range msgs {
		id, raw, problem := check(m)
		if problem == "" && id != "" && !in.a.request(id) {
			problem = "a request with id " + string(raw) + " is still in flight: give each request an id of its own"
		}
		if problem != "" {
			for _, id := range ids {
				in.a.answered(id) // none of the batch goes on
			}
			in.out.fail(raw, codeInvalidRequest, problem)
			return
		}
		if id != "" {
			ids = append(ids, id)
		}
	}
	in.ready = append(line, '\n')
}

// check reads one message: a request's canonical id (empty for a
// notification or a response), its raw id for an error's answer, and what
// is wrong with it, if anything.
func check(m json.RawMessage) (id string, raw json.RawMessage, problem string) {
	var e envelope
	if err := json.Unmarshal(m, &e); err != nil {
		return "", nil, "not a JSON-RPC message: " + err.Error()
	}
	if e.hasID() {
		var ok bool
		if id, ok = canonicalID(e.ID); !ok {
			return "", nil, "the id " + string(e.ID) + " is neither a string nor a number"
		}
		raw = e.ID
	}
	switch {
	case e.JSONRPC == nil || *e.JSONRPC != "2.0":
		return "", raw, `"jsonrpc" must be "2.0"`
	case e.Method != nil:
		if *e.Method == "" {
			return "", raw, `"method" is empty`
		}
		return id, raw, "" // a request, or a notification (no id)
	case !e.hasID():
		return "", nil, `neither a request ("method") nor an answer ("id" with "result" or "error")`
	case e.Result == nil && e.Error == nil:
		return "", raw, `an answer needs "result" or "error"`
	}
	return "", raw, "" // the client's answer to a request of the server's
}

func kindOf(first byte) string {
	switch first {
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// depth is how deeply line nests, strings skipped.
func depth(line []byte) int {
	d, most := 0, 0
	inString, escaped := false, false
	for _, b := range line {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			d++
			most = max(most, d)
		case b == '}' || b == ']':
			d--
		}
	}
	return most
}

// stdioOut is the server's output: the SDK's messages and the filter's
// answers, one whole message a write. It notes each answer written, and the
// protocol version the session settled on.
type stdioOut struct {
	mu       sync.Mutex
	w        io.Writer
	a        *answers
	protocol string
}

// Write is the SDK's: one message, or one batch, with its newline.
func (o *stdioOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	n, err := o.w.Write(p)
	o.mu.Unlock()
	if err != nil {
		return n, err
	}
	for _, line := range bytes.Split(p, []byte{'\n'}) {
		o.note(bytes.TrimSpace(line))
	}
	return n, nil
}

func (*stdioOut) Close() error { return nil }

// note reads an answer's id, and the initialize answer's protocol version.
func (o *stdioOut) note(line []byte) {
	if len(line) == 0 {
		return
	}
	msgs := []json.RawMessage{line}
	if line[0] == '[' && json.Unmarshal(line, &msgs) != nil {
		return
	}
	for _, m := range msgs {
		var e envelope
		if json.Unmarshal(m, &e) != nil || e.Method != nil {
			continue
		}
		if id, ok := canonicalID(e.ID); ok {
			o.a.answered(id)
		}
		if bytes.Contains(e.Result, []byte(`"protocolVersion"`)) {
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(e.Result, &r) == nil && r.ProtocolVersion != "" {
				o.mu.Lock()
				o.protocol = r.ProtocolVersion
				o.mu.Unlock()
			}
		}
	}
}

func (o *stdioOut) negotiated() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.protocol
}

// fail answers a line the filter did not pass on.
func (o *stdioOut) fail(id json.RawMessage, code int, message string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": "dsh-actors: " + message},
	})
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(b, '\n'))
}
