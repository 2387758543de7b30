package terminal

import (
	"fmt"
	"strings"

	"github.com/dsh-actors/dsh-actors/internal/safetext"
)

// page is a result's text before it is fitted to maxResultBytes: metadata
// lines around some output taken from a terminal's history.
type page struct {
	head []string // lines before the output
	raw  []byte   // the output, as stored in the history
	from int64    // history offset of raw[0]
	// asked is the offset the output was meant to start at; from is later
	// when the history had already dropped those bytes.
	asked int64
	tail  []string // lines after the output
	// keepHead keeps the beginning of an output that does not fit (a history
	// page); otherwise the end is kept (the latest output matters most).
	keepHead bool
	// cover, when set, ends the text with the line that says which bytes
	// of the history the result shows.
	cover *coverage
}

// coverage is what the last line of a result says of the history.
type coverage struct {
	id         string
	end, first int64
}

func (c *coverage) line(from, to int64) string {
	return fmt.Sprintf("[terminal %s: this result covers output bytes %d-%d of %d; history retained from byte %d]", c.id, from, to, c.end, c.first)
}

// markerReserve is room kept for the truncation marker and the note of a
// page that ends inside a line.
const markerReserve = 160 + len(midLine) + 1

// midLine follows a page whose last line is cut: the line break before it
// is the result's, not the output's.
const midLine = "[the page ends inside a line: the line break above is not in the output]"

// render fits the page into max bytes, metadata first: the metadata is
// always whole, the output is cut on a character boundary with a marker that
// says what was left out and how to read it. shownFrom and shownTo are the
// history offsets of the output it shows.
func (p page) render(max int) (text string, shownFrom, shownTo int64) {
	var fixed []string
	fixed = append(fixed, p.head...)
	if p.from > p.asked {
		what := "the output below"
		if p.keepHead {
			what = "the page"
		}
		fixed = append(fixed, fmt.Sprintf("[%d bytes of output before offset %d were dropped from the retained history; %s starts at byte %d]", p.from-p.asked, p.from, what, p.from))
	}
	fixed = append(fixed, p.tail...)
	if p.cover != nil {
		fixed = append(fixed, p.cover.line(p.cover.end, p.cover.end)) // as long as it can get
	}
	fixedLen := 0
	for _, l := range fixed {
		fixedLen += len(l) + 1
	}
	budget := max - fixedLen - markerReserve
	out, marker, shownFrom, shownTo := p.fit(budget)

	var b strings.Builder
	for _, l := range p.head {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if p.from > p.asked {
		b.WriteString(fixed[len(p.head)])
		b.WriteByte('\n')
	}
	if marker != "" && !p.keepHead {
		b.WriteString(marker)
		b.WriteByte('\n')
	}
	b.WriteString(out)
	tail := p.tail
	if p.cover != nil {
		tail = append(tail[:len(tail):len(tail)], p.cover.line(shownFrom, shownTo))
	}
	if out != "" && !strings.HasSuffix(out, "\n") && (len(tail) > 0 || marker != "") {
		b.WriteByte('\n')
		if p.keepHead {
			// A page is read as bytes: the line break that puts the
			// next line on a line of its own is said not to be one.
			b.WriteString(midLine)
			b.WriteByte('\n')
		}
	}
	if marker != "" && p.keepHead {
		b.WriteString(marker)
		b.WriteByte('\n')
	}
	b.WriteString(strings.Join(tail, "\n"))
	return safetext.Head(b.String(), max), shownFrom, shownTo
}

// fit returns the output as text of at most budget bytes, the history
// offsets of what it shows and, when it had to cut, the marker line.
func (p page) fit(budget int) (text, marker string, shownFrom, shownTo int64) {
	end := p.from + int64(len(p.raw))
	text = safetext.String(p.raw)
	if len(text) <= budget+markerReserve || budget < 0 && len(text) == 0 {
		return text, "", p.from, end
	}
	if budget < 0 {
		budget = 0
	}
	// Cut the raw bytes by what they show: a replacement character can be
	// longer than the byte it replaces. At least one character goes, so
	// that paging always moves on.
	raw := p.raw
	fitting := safetext.TailFitting
	if p.keepHead {
		fitting = safetext.HeadFitting
	}
	shown := fitting(raw, budget)
	if len(shown) == 0 && len(raw) > 0 {
		shown = fitting(raw, len("\uFFFD"))
	}
	left := int64(len(raw) - len(shown))
	if p.keepHead {
		next := p.from + int64(len(shown))
		return safetext.String(shown), fmt.Sprintf("[%d more bytes not shown: terminal_read with offset %d reads on]", left, next), p.from, next
	}
	return safetext.String(shown), fmt.Sprintf("[%d earlier bytes not shown: terminal_read with offset %d reads them]", left, p.from), p.from + left, end
}
