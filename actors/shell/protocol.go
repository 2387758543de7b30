package shell

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsh-actors/dsh-actors/internal/inband"
)

// The wire protocol between the actor and its bash.
//
// bash runs interactively (job control, foreground process groups) with
// readline off, echo off and no history. One init line installs a function,
// named with a per-shell nonce, as a read-only PROMPT_COMMAND. Before every
// prompt it resets PS1 and PS2 and prints the completion marker
//
//	RS "DSH" nonce ":" seq ":" status RS      (RS = 0x1e)
//
// where seq is the sequence number the command line set and status is the
// command's $?. One line therefore gives one round trip with the status in it.
//
// A command is sent as one logical line:
//
//	 __dsh_<nonce>_q=<seq>;\eval -- $'<text, escaped>'
//
// split into physical lines under the terminal's 4095-byte line limit with
// backslash-newline continuations between $'...' pieces. Every byte that the
// terminal driver or history expansion could act on (control bytes, DEL,
// bytes >= 0x80, '\', '\'' and '!') is written as an octal escape, so the line
// is plain printable ASCII: any text of any length, with heredocs, quotes or
// control bytes in it, reaches bash intact and runs as one unit; an
// unterminated quote or heredoc ends with bash's own error and status.

// markerLead starts every marker; the nonce follows it.
const markerLead = "\x1eDSH"

// maxPhysicalLine keeps each physical line well under the terminal's
// canonical-mode limit of 4095 bytes.
const maxPhysicalLine = 1024

// maxMarkerLen bounds a marker: lead, 16 hex nonce, ':' seq ':' status, RS.
const maxMarkerLen = len(markerLead) + 16 + 1 + 20 + 1 + 11 + 1

type protocol struct {
	nonce string
	// lead is markerLead + nonce + ":".
	lead []byte
	// seqVar and fn are the names of the sequence variable and the prompt
	// function; both carry the nonce, so lines that name them (xtrace output)
	// can be recognised and removed.
	seqVar string
	fn     string
	scan   inband.Scanner
}

func newProtocol() protocol {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("shell: no randomness for the marker nonce: %v", err))
	}
	nonce := hex.EncodeToString(b[:])
	lead := []byte(markerLead + nonce + ":")
	return protocol{
		nonce:  nonce,
		lead:   lead,
		seqVar: "__dsh_" + nonce + "_q",
		fn:     "__dsh_" + nonce,
		scan: inband.Scanner{Lead: lead, MaxLen: maxMarkerLen, Valid: func(body []byte) bool {
			_, ok := parseMarkerBody(body)
			return ok
		}},
	}
}

// initLine configures a fresh bash; its marker has seq 0.
func (p protocol) initLine() []byte {
	var b strings.Builder
	// Leading space: nothing of ours is ever history-worthy.
	b.WriteString(" set +H +o history; unset HISTFILE; set -o ignoreeof; ")
	fmt.Fprintf(&b, `exec {%s_o}>&1; \builtin readonly %s_o; `, p.fn, p.fn)
	// The marker goes to stdout while it is a terminal, else to a copy of
	// the terminal taken at start, so `exec >/dev/null` cannot swallow it.
	marker := fmt.Sprintf(`\builtin printf '\036DSH%s:%%s:%%s\036' "${%s-}" "$1"`, p.nonce, p.seqVar)
	emit := fmt.Sprintf(`if [[ -t 1 ]]; then %s; else %s >&"$%s_o"; fi; %s=`, marker, marker, p.fn, p.seqVar)
	// The prompt function runs before every prompt, so its usual path is
	// one case test and the marker (bash spends microseconds per statement).
	// PS1 or PS2 set by the command, or `set -x`, take the slow path: it
	// switches tracing off, clears PS1 and PS2, prints the marker and turns
	// tracing back on. Every line either can trace names the nonce (bash
	// traces a case statement by its unexpanded word), so stripOwnLines
	// removes them.
	fmt.Fprintf(&b, `%s() { case ${PS1:+p}${PS2:+p}:$-:%s in :*x*|p*) %s_s "$1";; *) %s;; esac; }; `,
		p.fn, p.fn, p.fn, emit)
	fmt.Fprintf(&b, `%s_s() { case $-:%s in *x*) \builtin set +x -- "$1" %s; %s_x=1;; esac; PS1=; PS2=; %s; `, p.fn, p.fn, p.fn, p.fn, emit)
	fmt.Fprintf(&b, `case ${%s_x-} in 1) %s_x=; \builtin set -x;; esac; }; `, p.fn, p.fn)
	fmt.Fprintf(&b, `\builtin readonly -f %s %s_s; \builtin declare -r PROMPT_COMMAND='%s $?'`, p.fn, p.fn, p.fn)
	b.WriteString("\n")
	return []byte(b.String())
}

// commandLine encodes text as one logical line that runs it with sequence
// number seq.
func (p protocol) commandLine(seq uint64, text string) []byte {
	var b bytes.Buffer
	b.Grow(len(text)*2 + 64)
	b.WriteByte(' ')
	b.WriteString(p.seqVar)
	b.WriteByte('=')
	b.Write(strconv.AppendUint(b.AvailableBuffer(), seq, 10))
	b.WriteString(";\\eval -- $'")
	lineLen := b.Len()
	for i := 0; i < len(text); i++ {
		c := text[i]
		var piece [4]byte
		n := 1
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '\'' || c == '!' {
			piece = [4]byte{'\\', '0' + c>>6, '0' + (c>>3)&7, '0' + c&7}
			n = 4
		} else {
			piece[0] = c
		}
		if lineLen+n+2 > maxPhysicalLine { // room for the closing quote and backslash
			// Close this piece, continue the word on the next line.
			b.WriteString("'\\\n$'")
			lineLen = 2
		}
		b.Write(piece[:n])
		lineLen += n
	}
	b.WriteString("'\n")
	return b.Bytes()
}

// marker is a parsed completion marker.
type marker struct {
	seq    uint64
	hasSeq bool
	status int
}

// parseMarkerBody parses "seq:status"; seq may be empty (a prompt that no
// command line of ours asked for).
func parseMarkerBody(b []byte) (marker, bool) {
	k := bytes.IndexByte(b, ':')
	if k < 0 {
		return marker{}, false
	}
	var m marker
	if k > 0 {
		seq, err := strconv.ParseUint(string(b[:k]), 10, 64)
		if err != nil {
			return marker{}, false
		}
		m.seq, m.hasSeq = seq, true
	}
	status, err := strconv.Atoi(string(b[k+1:]))
	if err != nil {
		return marker{}, false
	}
	m.status = status
	return m, true
}

// stripOwnLines removes the lines that name the nonce: the shell's trace of
// its own machinery under `set -x`.
func (p protocol) stripOwnLines(s string) string {
	if !strings.Contains(s, p.nonce) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line = s[:i+1]
		}
		s = s[len(line):]
		if !strings.Contains(line, p.nonce) {
			b.WriteString(line)
		}
	}
	return b.String()
}
