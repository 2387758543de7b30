package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

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

// lineWriter writes whole JSON lines from many goroutines.
type lineWriter struct {
	mu  sync.Mutex
	w   *bufio.Writer
	err error
}

func (lw *lineWriter) write(r resultLine) {
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(resultLine{Line: r.Line, Text: "call: encoding the result: " + err.Error(), IsError: true})
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return
	}
	lw.w.Write(b)
	lw.w.WriteByte('\n')
	lw.err = lw.w.Flush()
}

// runCall reads tool calls as JSON lines from in and writes one result line
// per call to out. Calls of one agent run in order; agents run at once.
func runCall(ctx context.Context, h *host.Host, in io.Reader, out io.Writer) error {
	lw := &lineWriter{w: bufio.NewWriter(out)}
	type job struct {
		line int
		call callLine
	}
	queues := map[string]chan job{}
	var wg sync.WaitGroup
	worker := func(q chan job) {
		defer wg.Done()
		for j := range q {
			res := resultLine{ID: j.call.ID, Line: j.line, Agent: j.call.Agent, Tool: j.call.Tool}
			r, err := h.Call(ctx, j.call.Agent, j.call.Tool, j.call.Args)
			if err != nil {
				res.Text, res.IsError = err.Error(), true
			} else {
				res.Text, res.IsError, res.Data = r.Text, r.IsError, r.Data
			}
			lw.write(res)
		}
	}
	defer func() {
		for _, q := range queues {
			close(q)
		}
		wg.Wait()
	}()

	rd := bufio.NewReaderSize(in, 64<<10)
	for n := 1; ; n++ {
		raw, tooLong, err := readLine(rd, maxCallLine)
		if tooLong {
			lw.write(resultLine{Line: n, Text: fmt.Sprintf("call: line %d is longer than %d bytes", n, maxCallLine), IsError: true})
		} else if len(bytes.TrimSpace(raw)) > 0 {
			c, perr := parseCallLine(raw)
			if perr != nil {
				lw.write(resultLine{ID: c.ID, Line: n, Agent: c.Agent, Tool: c.Tool, Text: fmt.Sprintf("call: line %d: %v", n, perr), IsError: true})
			} else {
				q, ok := queues[c.Agent]
				if !ok {
					q = make(chan job, 1024)
					queues[c.Agent] = q
					wg.Add(1)
					go worker(q)
				}
				select {
				case q <- job{line: n, call: c}:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("call: reading line %d: %w", n, err)
		}
	}
}

// readLine reads one line without its line ending. A line longer than limit
// is consumed whole and reported as tooLong.
func readLine(rd *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := rd.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit {
				tooLong, line = true, nil
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

func parseCallLine(raw []byte) (callLine, error) {
	var c callLine
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("not a JSON call object (%v); expected {\"agent\":\"a1\",\"tool\":\"bash\",\"args\":{...}}", err)
	}
	if dec.More() {
		return c, errors.New("more than one JSON value on the line")
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
