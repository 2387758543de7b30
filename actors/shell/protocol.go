package shell

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dsh-actors/dsh-actors/internal/inband"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// The wire protocol between the actor and its bash.
//
// bash runs interactively (job control, foreground process groups) with
// readline off, echo off, on a terminal in literal input mode (see
// ptyproc.Options.Literal): every byte typed reaches bash as it is, with no
// line-length limit and no byte acting as line editing or a signal.
//
// Nothing of the protocol runs as a shell command on the usual path. bash
// itself prints the completion marker as its prompt:
//
//	PS1 = RS "DSH" nonce ":" \# ":" $? ":" ${#PS1} ":" ${PS2+${PS2/#<PS2>/=}} RS
//	PS2 = RS "DSH" nonce ":c" RS
//
// \# is bash's command number, which grows by one for every command line it
// runs, $? the status of the last one; the length of PS1 and the last field,
// "=" while PS2 is still ours, tell that a command changed the prompts. The command text is typed as it is: a single line as one
// line, several lines inside "{" and "}" so that bash reads the whole text
// before it runs any of it (a command that reads its input cannot swallow
// the lines after it). So the user's traps, xtrace, aliases, functions and
// disabled builtins meet the user's commands only; there is no eval, no
// prompt function and no variable of ours for a command to redefine.
//
// A marker is never taken on its word: see the actor's completion rules. A
// few fallbacks use shell commands of ours: a status query line when a
// command changed PS1, PS2, promptvars or stderr (which is where bash prints
// its prompt), and an eval line for text when PS2 cannot be made ours.

// markerLead starts every marker; the nonce follows it.
const markerLead = "\x1eDSH"

// maxMarkerLen bounds a marker. Its last field can hold a PS2 someone else
// set; anything with our lead up to this length is ours to remove.
const maxMarkerLen = 4096

// maxPromptText bounds the foreign prompt text the query line reports.
const maxPromptText = 256

type protocol struct {
	// nonce is 16 upper-case hexadecimal digits: unguessable enough that
	// output never carries it by accident, and unchanged by `stty olcuc`.
	nonce string
	lead  []byte // markerLead + nonce + ":"
	ps1   string
	ps2   string
	// tty is the slave's path, for the query line's test of stderr.
	tty  string
	scan inband.Scanner
}

func newProtocol(tty string) protocol {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("shell: no randomness for the marker nonce: %v", err))
	}
	nonce := strings.ToUpper(hex.EncodeToString(b[:]))
	p := protocol{
		nonce: nonce,
		lead:  []byte(markerLead + nonce + ":"),
		ps2:   markerLead + nonce + ":c\x1e",
		tty:   tty,
	}
	p.ps1 = markerLead + nonce + `:\#:$?:${#PS1}:${PS2+${PS2/#` + p.ps2 + `/=}}` + "\x1e"
	p.scan = inband.Scanner{Lead: p.lead, MaxLen: maxMarkerLen}
	return p
}

// ansiC quotes s as a bash $'...' word.
func ansiC(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '\\' || c == '\'' {
			fmt.Fprintf(&b, `\%03o`, c)
		} else {
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// Start-up. The first line sets the prompts and turns history expansion off
// (bash would otherwise act on "!" in typed text); its prompt gives bash's
// plain input read. Where the readline layout of this bash binary is not
// known yet (see layouts), that line also turns readline on, to learn how
// its prompt read looks, and a second line turns it off again. Both take
// themselves out of the history.
func (p protocol) initLines(learnReadline, keepHistory bool) [][]byte {
	// Each line takes itself out of the history: with the host user's
	// history loaded, only itself; otherwise all of it.
	forget, lead := "; history -c", " "
	if keepHistory {
		// Without the leading space, so that HISTCONTROL=ignorespace
		// cannot keep the line out, and the entry deleted is the line.
		forget, lead = "; history -d -1", ""
	}
	first := lead + "PS1=" + ansiC(p.ps1) + " PS2=" + ansiC(p.ps2) + "; set +H"
	if !learnReadline {
		return [][]byte{[]byte(first + forget + "\n")}
	}
	return [][]byte{[]byte(first + "; set -o emacs" + forget + "\n"), []byte(lead + "set +o emacs" + forget + "\n")}
}

// inputrc is the readline configuration an agent shell gets (unless the
// host user's is allowed): every byte typed is taken as it is, 8-bit
// characters included, with no bracketed-paste or control-character echo.
const inputrc = "set convert-meta off\nset input-meta on\nset output-meta on\n" +
	"set enable-bracketed-paste off\nset echo-control-characters off\nset bell-style none\n"

var inputrcPath = sync.OnceValues(func() (string, error) {
	sum := sha256.Sum256([]byte(inputrc))
	path := filepath.Join(os.TempDir(), fmt.Sprintf("dsh-actors-inputrc-%d-%x", os.Getuid(), sum[:6]))
	if b, err := os.ReadFile(path); err == nil && string(b) == inputrc {
		return path, nil
	}
	f, err := os.CreateTemp(os.TempDir(), "dsh-actors-inputrc-*")
	if err != nil {
		return "", err
	}
	_, werr := f.WriteString(inputrc)
	if err := errors.Join(werr, f.Close()); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return path, nil
})

// queryLine reports $? and the prompt state in a "q" marker written to the
// terminal itself, and makes PS1, PS2 and promptvars ours again where it can:
//
//	RS "DSH" nonce ":q:" status ":" PS1 attributes ":" PS2 attributes ":" E ":" prompt RS
//
// E is "e" when stderr, where bash prints its prompt, is not the terminal;
// prompt is what the PS1 in force when the line started expands to (RS
// replaced, cut to maxPromptText), which bash printed after the command.
func (p protocol) queryLine(afterEval bool) []byte {
	v := "__dsh_" + p.nonce
	ours := func(name, value string) string {
		return fmt.Sprintf(`[[ -v %[1]s && ${%[1]s@a} == *r* ]] || %[1]s=%[2]s; `, name, ansiC(value))
	}
	var b strings.Builder
	// The group runs with stderr on /dev/null, so that xtrace shows none of
	// it; the real stderr is tested through a copy made first. After text
	// typed as an eval, the line starts with an assignment instead (shown by
	// xtrace): bash 5.2 takes a "{" that starts the line after an eval that
	// met an unterminated quote for a syntax error.
	if afterEval {
		fmt.Fprintf(&b, ` %[1]s_s=$?; {`, v)
	} else {
		fmt.Fprintf(&b, ` { %[1]s_s=$?`, v)
	}
	fmt.Fprintf(&b, ` %[1]s_p=${PS1-} %[1]s_e=; [[ /dev/fd/$%[1]s_fd -ef %[2]s ]] || %[1]s_e=e; `, v, p.tty)
	fmt.Fprintf(&b, `%[1]s_p=${%[1]s_p@P}; %[1]s_p=${%[1]s_p//$'\036'/?}; %[1]s_p=${%[1]s_p:0:%[2]d}; `, v, maxPromptText)
	b.WriteString(ours("PS1", p.ps1))
	b.WriteString(ours("PS2", p.ps2))
	b.WriteString(`\builtin shopt -s promptvars; `)
	fmt.Fprintf(&b, `\builtin printf '\036DSH%[2]s:q:%%s:%%s:%%s:%%s:%%s\036' "$%[1]s_s" "${PS1@a}" "${PS2@a}" "$%[1]s_e" "$%[1]s_p" >%[3]s; `,
		v, p.nonce, p.tty)
	fmt.Fprintf(&b, `\builtin exec {%[1]s_fd}>&-; \builtin unset %[1]s_s %[1]s_p %[1]s_e %[1]s_fd; } {%[1]s_fd}>&2 2>/dev/null`+"\n", v)
	return []byte(b.String())
}

// promptJunk is what a prompt printed around our marker: the query's
// report of the prompt's expansion without the marker in it (its RS bytes
// read as '?').
func (p protocol) promptJunk(prompt string) string {
	lead := "?DSH" + p.nonce + ":"
	i := strings.Index(prompt, lead)
	if i < 0 {
		return prompt
	}
	j := strings.IndexByte(prompt[i+len(lead):], '?')
	if j < 0 {
		return prompt[:i]
	}
	return prompt[:i] + prompt[i+len(lead)+j+1:]
}

// evalLine runs text as one eval, on one line: the form used when PS2 is not
// ours, so that bash never prints a continuation prompt.
func evalLine(text string) []byte {
	return []byte(" eval -- " + ansiC(text) + "\n")
}

// frame is how a command text is typed. lines is how many newlines it holds:
// bash prints a continuation prompt for each line it reads after the first,
// so lines continuation prompts mean it is still waiting for the rest.
func frame(text string, readline bool) (typed []byte, lines int) {
	text = normalizeNewlines(text)
	var b bytes.Buffer
	switch {
	case blank(text):
		// Nothing runs; one empty line gives one prompt.
		b.WriteByte('\n')
	case !strings.Contains(strings.TrimSuffix(text, "\n"), "\n"):
		b.WriteString(strings.TrimSuffix(text, "\n"))
		b.WriteByte('\n')
	default:
		// A group is parsed whole before any of it runs.
		b.WriteString("{\n")
		b.WriteString(strings.TrimSuffix(text, "\n"))
		b.WriteString("\n}\n")
	}
	typed = b.Bytes()
	lines = bytes.Count(typed, []byte{'\n'})
	if readline {
		typed = quoteForReadline(typed)
	}
	return typed, lines
}

// quoteForReadline puts readline's quoted-insert (^V) before every control
// byte but newline, so readline inserts it instead of acting on it.
func quoteForReadline(b []byte) []byte {
	n := 0
	for _, c := range b {
		if (c < 0x20 && c != '\n') || c == 0x7f {
			n++
		}
	}
	if n == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+n)
	for _, c := range b {
		if (c < 0x20 && c != '\n') || c == 0x7f {
			out = append(out, 0x16)
		}
		out = append(out, c)
	}
	return out
}

// blank reports whether text runs nothing: every line is empty, white space
// or a comment. (A '#' that starts a line is a comment unless an earlier
// line opened a quote or a heredoc, and such a line is not blank.)
func blank(text string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimLeft(line, " \t\r")
		if line != "" && line[0] != '#' {
			return false
		}
	}
	return true
}

// normalizeNewlines turns CRLF into LF, as a terminal's ICRNL would for typed
// text; a lone CR is left alone.
func normalizeNewlines(s string) string {
	if strings.Contains(s, "\r\n") {
		return strings.ReplaceAll(s, "\r\n", "\n")
	}
	return s
}

// markerKind says which of bash's prompts a marker is.
type markerKind int

const (
	markBroken markerKind = iota // our lead, but no body we know
	markPS1                      // the prompt before a command line
	markPS2                      // a continuation prompt
	markQuery                    // the status query line's report
)

// marker is a parsed marker.
type marker struct {
	kind   markerKind
	seq    uint64 // PS1: bash's command number
	status int    // PS1 and query: $?
	// PS1: the length of PS1, and whether PS2 is still ours.
	ps1Len  int
	ps2Ours bool
	// query: the prompt state.
	ps1ReadOnly, ps2ReadOnly, stderrElsewhere bool
	prompt                                    string
}

func parseMarker(body []byte) marker {
	s := string(body)
	if s == "c" {
		return marker{kind: markPS2}
	}
	if rest, ok := strings.CutPrefix(s, "q:"); ok {
		f := strings.SplitN(rest, ":", 5)
		if len(f) != 5 {
			return marker{}
		}
		st, err := strconv.Atoi(f[0])
		if err != nil {
			return marker{}
		}
		return marker{kind: markQuery, status: st, ps1ReadOnly: strings.Contains(f[1], "r"),
			ps2ReadOnly: strings.Contains(f[2], "r"), stderrElsewhere: f[3] == "e", prompt: f[4]}
	}
	f := strings.SplitN(s, ":", 4)
	if len(f) != 4 {
		return marker{}
	}
	seq, err1 := strconv.ParseUint(f[0], 10, 64)
	st, err2 := strconv.Atoi(f[1])
	n, err3 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return marker{}
	}
	return marker{kind: markPS1, seq: seq, status: st, ps1Len: n, ps2Ours: f[3] == "="}
}

// promptSigs are how bash's own reads of its input look in
// /proc/PID/syscall, learned at start-up when no command of anyone's has run.
//
// Without readline bash reads its input with read(0, buf, n) into a static
// buffer of its own, whether at the prompt or for a continuation line; a
// `read` builtin or another program reads into other memory, or is another
// process. With readline it waits in pselect6 on fd 0, at the prompt from a
// fixed depth of the stack; for a continuation line from a deeper one, with
// the same frame layout (the descriptor set at the same offset from the
// stack pointer); `read -e` waits the same way from yet other depths, which
// is why a deeper wait counts only right after bash printed a continuation
// prompt of ours.
type promptSigs struct {
	plain    procfs.Syscall // read(0, buf, n)
	readline procfs.Syscall // pselect6(1, fds, ...) at the prompt
}

// match reports whether s is bash reading its input, and with readline.
// continuing says bash printed a continuation prompt last.
func (g promptSigs) match(s procfs.Syscall, continuing bool) (ok, readline bool) {
	switch {
	case !s.Blocked():
		return false, false
	case s.Nr == sysRead && s.Args[0] == 0 && s.Args[1] == g.plain.Args[1] && s.Args[2] == g.plain.Args[2]:
		return true, false
	case s.Nr != sysPselect6 || s.Args[0] != 1 || g.readline.Nr != sysPselect6:
		return false, false
	case s.Args[1] == g.readline.Args[1] && s.SP == g.readline.SP:
		return true, true
	}
	deeper := s.SP < g.readline.SP && s.Args[1]-s.SP == g.readline.Args[1]-g.readline.SP
	return continuing && deeper, deeper
}

const (
	sysRead     = 0
	sysPselect6 = 270
)

// readlineLayout places bash's readline prompt read relative to its plain
// one: the stack grows from a base that moves with every process (ASLR and
// the size of the environment), but the frames between the two reads are
// the same for one binary.
type readlineLayout struct {
	sp   uint64 // plain.SP - readline.SP
	fds  uint64 // readline.Args[1] - readline.SP
	args [6]uint64
}

func layoutOf(g promptSigs) readlineLayout {
	return readlineLayout{sp: g.plain.SP - g.readline.SP, fds: g.readline.Args[1] - g.readline.SP, args: g.readline.Args}
}

func (l readlineLayout) apply(plain procfs.Syscall) procfs.Syscall {
	rl := procfs.Syscall{Nr: sysPselect6, Args: l.args, SP: plain.SP - l.sp}
	rl.Args[1] = rl.SP + l.fds
	return rl
}

// layouts caches the readline layout of each bash binary, learned from the
// first shell of it that a process starts, when no command had run in it.
var layouts sync.Map // binaryKey -> readlineLayout

// binaryKey names a program file: path, device, inode, size and time.
func binaryKey(path string) (string, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", false
	}
	return fmt.Sprintf("%s:%d:%d:%d:%d", path, st.Dev, st.Ino, st.Size, st.Mtim.Nano()), true
}

// plausiblePrompt reports whether s can be a prompt read to learn: read on
// fd 0, or pselect6 on one descriptor.
func plausiblePrompt(s procfs.Syscall) bool {
	return s.Blocked() && ((s.Nr == sysRead && s.Args[0] == 0) || (s.Nr == sysPselect6 && s.Args[0] == 1))
}
