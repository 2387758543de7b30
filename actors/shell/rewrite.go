package shell

import "strings"

// A progress bar rewrites its line: it goes back to the line's start with a
// carriage return (or ESC [ G) and prints the new state over the old, often
// erasing the rest with ESC [ K. The model is shown each such line as a
// terminal shows it at the end, not every state it went through (a
// download's 300 updates, a test runner's spinner).

// collapseRewrites replaces each line that goes back to its start by what a
// terminal shows of it. A carriage return before a newline (a program that
// ends its lines with CR LF) is no rewrite and is dropped. Other escape
// sequences (colours) are kept, attached to the character they precede.
func collapseRewrites(s string) string {
	if !strings.Contains(s, "\r") && !strings.Contains(s, "\x1b[") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		line, rest, nl := strings.Cut(s, "\n")
		s = rest
		line = strings.TrimSuffix(line, "\r")
		if strings.Contains(line, "\r") || strings.Contains(line, "\x1b[") && rewritesLine(line) {
			line = showLine(line)
		}
		b.WriteString(line)
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// rewritesLine reports whether line moves its cursor back to a column
// (ESC [ n G) or erases (ESC [ K): sequences that change what was printed.
func rewritesLine(line string) bool {
	for i := 0; i < len(line); i++ {
		if line[i] != 0x1b || i+1 >= len(line) || line[i+1] != '[' {
			continue
		}
		if _, final, _ := csiAt(line[i:]); final == 'G' || final == 'K' {
			return true
		}
	}
	return false
}

// csiAt reads an ESC [ sequence at the start of s: its parameter text, its
// final byte and its length; final is 0 when s holds no whole sequence.
func csiAt(s string) (params string, final byte, n int) {
	for i := 2; i < len(s); i++ {
		c := s[i]
		if c >= 0x40 && c <= 0x7e {
			return s[2:i], c, i + 1
		}
		if c < 0x20 || c > 0x3f {
			return "", 0, 0 // not a control sequence
		}
	}
	return "", 0, 0
}

// showLine plays line on a row of cells, as a terminal would.
func showLine(line string) string {
	var cells []string // each: the escape sequences before a character, then it
	cur := 0
	pending := ""
	put := func(ch string) {
		for len(cells) < cur {
			cells = append(cells, " ")
		}
		if cur < len(cells) {
			cells[cur] = pending + ch
		} else {
			cells = append(cells, pending+ch)
		}
		pending = ""
		cur++
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '\r':
			cur = 0
			i++
		case c == 0x1b && i+1 < len(line) && line[i+1] == '[':
			params, final, n := csiAt(line[i:])
			if final == 0 {
				put(line[i : i+1])
				i++
				continue
			}
			switch final {
			case 'G': // to column n (1 when omitted)
				col := 1
				if params != "" {
					col = atoiOr(params, 1)
				}
				cur = max(col-1, 0)
			case 'K':
				switch params {
				case "", "0": // to the end of the line
					if cur < len(cells) {
						cells = cells[:cur]
					}
				case "1": // to the cursor
					for j := 0; j <= cur && j < len(cells); j++ {
						cells[j] = " "
					}
				case "2": // the whole line
					cells = cells[:0]
				}
			default:
				pending += line[i : i+n] // a colour, kept with the next character
			}
			i += n
		default:
			// One character, whole (UTF-8).
			j := i + 1
			for j < len(line) && line[j]&0xc0 == 0x80 {
				j++
			}
			put(line[i:j])
			i = j
		}
	}
	return strings.TrimRight(strings.Join(cells, ""), " ") + pending
}

func atoiOr(s string, def int) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return def
		}
		n = n*10 + int(c-'0')
		if n > 1<<16 {
			return def
		}
	}
	return n
}
