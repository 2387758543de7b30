package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/dsh-actors/dsh-actors/host"
)

// maxCallLine bounds one input line of `call`.
const maxCallLine = 16 << 20

// callLine is one input line of `call`.
type callLine struct {
	ID    json.RawMessage `json:"id,omitempty"`
	Agent string          `json:"agent"`
	Tool  string          `json:"tool"`
	Args  json.RawMessage `json:"args"`
}

// resultLine is one output line of `call`.
type resultLine struct {
	ID      json.RawMessage `json:"id,omitempty"`
	Line    int             `json:"line,omitempty"`
	Agent   string          `json:"agent,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Text    string          `json:"text"`
	IsError bool            `json:"isError"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// lineWriter writes whole JSON lines from many goroutines. The first write
// error (stdout closed) calls broken, which ends the run.
type lineWriter struct {
	mu     sync.Mutex
	w      *bufio.Writer
	err    error
	broken func()
}

func (lw *lineWriter) write(r resultLine) {
	b, err := marshalLine(r)
	if err != nil {
		b, _ = marshalLine(resultLine{Line: r.Line, Text: "call: encoding the result: " + err.Error(), IsError: true})
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return
	}
	lw.w.Write(b)
	lw.w.WriteByte('\n')
	if lw.err = lw.w.Flush(); lw.err != nil && lw.broken != nil {
		lw.broken()
	}
}

// errStopped ends a run that a signal (its context) stopped.
var errStopped = errors.New("call: stopped by a signal: calls not finished were withdrawn, and every process ended")

// runCall reads tool calls as JSON lines from in and writes one result line
// per call to out. Calls of one agent run in order; agents run at once.
// When ctx ends (a signal), the run stops at once: calls under way are
// withdrawn and answered as such, queued ones too.
func runCall(ctx context.Context, h *host.Host, in io.Reader, out io.Writer) error {
	var signalled atomic.Bool
	outer := ctx
	defer context.AfterFunc(outer, func() { signalled.Store(true) })()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lw := &lineWriter{w: bufio.NewWriter(out), broken: cancel}
	queues := map[string]*jobQueue{}
	var wg sync.WaitGroup
	worker := func(q *jobQueue) {
		defer wg.Done()
		for {
			j, ok := q.pop()
			if !ok {
				return
			}
			res := resultLine{ID: j.call.ID, Line: j.line, Agent: j.call.Agent, Tool: j.call.Tool}
			if op, ok := strings.CutPrefix(j.call.Tool, sessionPrefix); ok {
				data, err := sessionCall(ctx, h, j.call.Agent, op, j.call.Args)
				res.Text = "ok"
				if err != nil {
					res.Text, res.IsError = err.Error(), true
				}
				if data != nil && (err == nil || op == "prepare_step") {
					res.Data, _ = json.Marshal(data) // a failed step still lists what was injected
				}
				lw.write(res)
				continue
			}
			r, err := h.Call(ctx, j.call.Agent, j.call.Tool, j.call.Args)
			switch {
			case err != nil && ctx.Err() != nil && signalled.Load():
				res.Text, res.IsError = "call: not finished: the run was stopped by a signal, and the call withdrawn", true
			case err != nil && ctx.Err() != nil:
				res.Text, res.IsError = "call: not finished: the run was stopped ("+err.Error()+"), and the call withdrawn", true
			case err != nil:
				res.Text, res.IsError = err.Error(), true
			default:
				res.Text, res.IsError, res.Data = r.Text, r.IsError, r.Data
			}
			lw.write(res)
		}
	}
	// finish lets every agent's queue run out (or be cancelled) and reports
	// a broken stdout, which only shows once the results are written.
	finish := func(err error) error {
		for _, q := range queues {
			q.close()
		}
		wg.Wait()
		lw.mu.Lock()
		defer lw.mu.Unlock()
		if lw.err != nil {
			return fmt.Errorf("call: writing results: %w", lw.err)
		}
		return err
	}

	// Lines are read in a goroutine of their own, so that a signal ends the
	// run while stdin is open and idle. (That goroutine may stay blocked in
	// a read until the program exits.)
	type input struct {
		raw     []byte
		tooLong bool
		err     error
	}
	lines := make(chan input)
	go func() {
		rd := bufio.NewReaderSize(in, 64<<10)
		for {
			raw, tooLong, err := readLine(rd, maxCallLine)
			select {
			case lines <- input{raw, tooLong, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for n := 1; ; n++ {
		var l input
		select {
		case l = <-lines:
		case <-ctx.Done():
			err := finish(nil)
			if outer.Err() != nil {
				return errors.Join(err, errStopped)
			}
			return err
		}
		raw, tooLong, err := l.raw, l.tooLong, l.err
		if tooLong {
			lw.write(resultLine{ID: peekID(raw), Line: n, Text: fmt.Sprintf("call: line %d is longer than %d bytes", n, maxCallLine), IsError: true})
		} else if len(bytes.TrimSpace(raw)) > 0 {
			c, perr := parseCallLine(raw)
			if perr != nil {
				lw.write(resultLine{ID: c.ID, Line: n, Agent: c.Agent, Tool: c.Tool, Text: fmt.Sprintf("call: line %d: %v", n, perr), IsError: true})
			} else {
				q, ok := queues[c.Agent]
				if !ok {
					q = newJobQueue()
					queues[c.Agent] = q
					wg.Add(1)
					go worker(q)
				}
				q.push(job{line: n, call: c})
			}
		}
		if ctx.Err() != nil {
			return finish(ctx.Err())
		}
		if errors.Is(err, io.EOF) {
			return finish(nil)
		}
		if err != nil {
			return finish(fmt.Errorf("call: reading line %d: %w", n, err))
		}
	}
}

// readLine reads one line without its line ending. A line longer than limit
// is consumed whole and reported as tooLong, with its first keptOfLong
// bytes (where its "id" may be found).
func readLine(rd *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := rd.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit {
				tooLong = true
				if len(line) > keptOfLong {
					line = line[:keptOfLong]
				}
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

const keptOfLong = 64 << 10

// peekID finds the top-level "id" of a call line from its beginning alone
// (the rest was too long to keep), when it comes before anything that does
// not fit.
func peekID(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if key == "id" {
			return v
		}
	}
	return nil
}

func parseCallLine(raw []byte) (callLine, error) {
	var c callLine
	// The same rules as tool arguments: exact names, each once, nothing
	// unknown, one value per line.
	if err := jsonv2.Unmarshal(raw, &c, jsonv2.RejectUnknownMembers(true)); err != nil {
		var se *jsontext.SyntacticError
		var me *jsonv2.SemanticError
		switch {
		case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
			return c, fmt.Errorf("field %q appears twice (each of agent, tool, args and id may be given once)", se.JSONPointer.LastToken())
		case errors.As(err, &me) && errors.Is(err, jsonv2.ErrUnknownName):
			return c, fmt.Errorf("unknown field %q (a call line has agent, tool, args and id)", me.JSONPointer.LastToken())
		}
		return c, fmt.Errorf("not a JSON call object (%v); expected {\"agent\":\"a1\",\"tool\":\"bash\",\"args\":{...}}", err)
	}
	if c.Agent == "" {
		return c, errors.New(`"agent" is missing`)
	}
	if c.Tool == "" {
		return c, errors.New(`"tool" is missing`)
	}
	if err := host.ValidateAgentID(c.Agent); err != nil {
		return c, err
	}
	if len(c.Args) == 0 || bytes.Equal(c.Args, []byte("null")) {
		c.Args = json.RawMessage("{}")
	}
	return c, nil
}

type job struct {
	line int
	call callLine
}

// jobQueue is one agent's calls in input order. It is unbounded, so a busy
// agent never holds up reading the lines of the others (memory is bounded by
// the input itself).
type jobQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	jobs   []job
	closed bool
}

func newJobQueue() *jobQueue {
	q := &jobQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *jobQueue) push(j job) {
	q.mu.Lock()
	q.jobs = append(q.jobs, j)
	q.mu.Unlock()
	q.cond.Signal()
}

func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Signal()
}

// pop returns the next job, waiting for one; ok is false once the queue is
// closed and empty.
func (q *jobQueue) pop() (job, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.jobs) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.jobs) == 0 {
		return job{}, false
	}
	j := q.jobs[0]
	q.jobs = q.jobs[1:]
	return j, true
}

// marshalLine encodes r without HTML escaping: a prompt such as ">>> " is
// written as it is, not as \u003e\u003e\u003e.
func marshalLine(r resultLine) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
