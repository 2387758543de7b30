package mcpserve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
	held     bool
	// ended is closed when the input has ended (and its answers were
	// waited for).
	ended chan struct{}
}

func newStdioIn(r io.Reader, out *stdioOut, a *answers, maxBytes int) *stdioIn {
	return &stdioIn{src: bufio.NewReaderSize(r, 64<<10), out: out, a: a, maxBytes: maxBytes, ended: make(chan struct{})}
}

func (in *stdioIn) Read(p []byte) (int, error) {
	for len(in.ready) == 0 {
		if in.err != nil {
			if !in.held {
				// The client sent all it will: the answers to what it
				// sent go first.
				ctx, cancel := context.WithTimeout(context.Background(), eofHold)
				_ = in.a.wait(ctx)
				cancel()
				in.held = true
				close(in.ended)
			}
			return 0, in.err
		}
		line, tooLong, err := in.readLine()
		if tooLong {
			in.out.fail(nil, codeInvalidRequest, fmt.Sprintf("a message of more than %d bytes (mcp.maxRequestBytes): it was not read", in.maxBytes))
		} else if len(line) > 0 {
			in.accept(line)
		}
		in.err = err // a last line without its newline goes on first
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

// envelope is what the output side reads of a message the SDK wrote.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
}

// accept passes a line on to the SDK, or answers it with an error. The
// SDK's own decoder judges it (it reads keys case-sensitively, and the
// error objects of answers strictly), so what passes is what the SDK takes.
func (in *stdioIn) accept(line []byte) {
	if d := depth(line); d > maxDepth {
		in.out.fail(nil, codeParseError, fmt.Sprintf("the message nests %d levels deep; at most %d are read", d, maxDepth))
		return
	}
	// One JSON value, as the SDK's stream decoder would read it as more.
	if !json.Valid(line) {
		in.out.fail(nil, codeParseError, "not one JSON value: "+jsonError(line))
		return
	}
	if line[0] != '{' {
		switch {
		case line[0] == '[':
			// The SDK (v1.8.0) ends the session for a batch of two
			// notifications and loses the answer in a batch with one;
			// batches are gone from the protocol since 2025-06-18.
			in.out.fail(nil, codeInvalidRequest, "a batch: this server takes one message a line")
		default:
			in.out.fail(nil, codeInvalidRequest, "a JSON-RPC message is an object; this is "+kindOf(line[0]))
		}
		return
	}
	// The SDK's own decoder judges the line; the rest of the work is for
	// the lines it refuses, and for requests' ids.
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		rawID := idOf(line)
		if len(rawID) > 0 && rawID[0] != '"' && !exactID(rawID) {
			rawID = nil // an answer must not repeat an id of the wrong type
		}
		in.out.fail(rawID, codeInvalidRequest, "not a JSON-RPC 2.0 message: "+err.Error())
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	// A subscriptions/listen is open until the client or the server ends
	// it, and answered then: not an answer a shutdown waits for.
	if ok && req.ID.IsValid() && req.Method != "subscriptions/listen" {
		id := req.ID.Raw()
		var rawID json.RawMessage
		if _, isNumber := id.(int64); isNumber {
			// The SDK truncates a number to an int64: was it one?
			if rawID = idOf(line); !exactID(rawID) {
				shown := string(rawID)
				if shown == "" {
					shown = "(unreadable)"
				}
				in.out.fail(rawID, codeInvalidRequest, "the id "+shown+" must be a string or a whole number of at most 2^53 (the SDK rounds others, and they collide)")
				return
			}
		}
		if !in.a.request(canonical(id)) {
			if rawID == nil {
				rawID = idOf(line)
			}
			in.out.fail(rawID, codeInvalidRequest, "a request with id "+string(rawID)+" is still in flight: give each request an id of its own")
			return
		}
	}
	in.ready = append(line, '\n')
}

// jsonError says why line is not JSON.
func jsonError(line []byte) string {
	var v json.RawMessage
	if err := json.Unmarshal(line, &v); err != nil {
		return err.Error()
	}
	return "unknown"
}

// idOf is a message's "id" as written, read as the SDK reads it (keys
// case-sensitively); nil when there is none.
func idOf(line []byte) json.RawMessage {
	var m struct {
		ID jsontext.Value `json:"id"`
	}
	// As lenient as the SDK's decoder: a duplicate name elsewhere, or bad
	// UTF-8 in a string, must not hide the id.
	if jsonv2.Unmarshal(line, &m, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) != nil || len(m.ID) == 0 {
		return nil
	}
	return json.RawMessage(m.ID)
}

// exactID: a string, or a number the SDK keeps exactly (a whole number of
// magnitude at most 2^53, however written: 100, 1e2, 100.0).
func exactID(raw json.RawMessage) bool {
	if len(raw) > 0 && raw[0] == '"' {
		return true
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n <= 1<<53 && n >= -(1<<53)
	}
	// Written as a float: below 2^53 every whole number is exact.
	v, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && v == math.Trunc(v) && math.Abs(v) < 1<<53
}

// canonical is an id as the SDK holds it (int64 or string), as a key.
func canonical(raw any) string {
	switch v := raw.(type) {
	case int64:
		return "n" + strconv.FormatInt(v, 10)
	case string:
		return "s" + v
	}
	return fmt.Sprintf("?%v", raw)
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
// answers, one whole message a write. It notes each answer as it is
// written (before, so that a client answered at once never sees its id
// still in flight).
type stdioOut struct {
	mu sync.Mutex
	w  io.Writer
	a  *answers
}

// Write is the SDK's: one message with its newline.
func (o *stdioOut) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(p, []byte{'\n'}) {
		o.note(bytes.TrimSpace(line))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Write(p)
}

func (*stdioOut) Close() error { return nil }

// note reads the id of an answer.
func (o *stdioOut) note(line []byte) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	var e envelope
	if json.Unmarshal(line, &e) != nil || e.Method != nil {
		return
	}
	if id, ok := canonicalID(e.ID); ok {
		o.a.answered(id)
	}
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
