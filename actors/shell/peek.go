package shell

import (
	"bytes"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/safetext"
)

// Peek asks how a running call is getting on, for progress reports (an MCP
// client's progress token); answered with a *Peeked to the sender. It
// changes nothing.
type Peek struct{ CallID string }

// Peeked answers a Peek. Running is false when the call is not running
// (queued, answered or unknown); Line is the last line of output it
// printed, at most latestMax bytes of it.
type Peeked struct {
	Running bool
	Line    string
}

// latestMax bounds the line a Peek reports.
const latestMax = 200

// latestLine keeps the last non-blank line of a call's output, whatever was
// clipped from the result.
type latestLine struct {
	line    []byte // the last complete non-blank line
	partial []byte // the line being written
}

func (l *latestLine) note(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.partial = appendCapped(l.partial, b)
			return
		}
		l.partial = bytes.TrimSuffix(appendCapped(l.partial, b[:i]), []byte("\r"))
		if len(bytes.TrimSpace(l.partial)) > 0 {
			l.line = append(l.line[:0], l.partial...)
		}
		l.partial = l.partial[:0]
		b = b[i+1:]
	}
}

// appendCapped appends b to dst, keeping only the last latestMax bytes. A
// \r followed by more text starts the line again, as a terminal shows a
// progress bar's rewrites; one at the very end waits to see whether a \n
// (a line end) or text follows.
func appendCapped(dst, b []byte) []byte {
	if len(b) == 0 {
		return dst
	}
	if bytes.HasSuffix(dst, []byte("\r")) {
		dst = dst[:0]
	}
	if i := bytes.LastIndexByte(b[:len(b)-1], '\r'); i >= 0 {
		dst, b = dst[:0], b[i+1:]
	}
	dst = append(dst, b...)
	if over := len(dst) - latestMax; over > 0 {
		dst = append(dst[:0], dst[over:]...)
	}
	return dst
}

// String is the line to report: the one being written, if it has text.
func (l *latestLine) String() string {
	b := l.line
	if len(bytes.TrimSpace(l.partial)) > 0 {
		b = l.partial
	}
	return safetext.String(bytes.TrimSpace(b))
}

func (a *Actor) peek(ctx actor.Context, m *Peek) {
	c := a.cur
	if c == nil || c.id != m.CallID {
		ctx.Respond(&Peeked{})
		return
	}
	ctx.Respond(&Peeked{Running: true, Line: c.latest.String()})
}
