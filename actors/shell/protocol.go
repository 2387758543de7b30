package shell

import (
	"crypto/sha256"
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
//	PS1 = RS "DSH" nonce ":" \# ":" $? ":" ${#BASHOPTS} ":" ${#PS1} ":" ${#PS2} ":" ${PS2:1:19} ":" ${PS1:1:n} RS
//	PS2 = RS "DSH" nonce ":c" RS
//
// \# is bash's command number, which grows by one for every command line it
// runs, $? the status of the last one; the length of BASHOPTS tells that a
// shell option changed (shopt -s extdebug, see extdebugSuspect); the lengths of PS1 and PS2, the head
// of PS2 and PS1's own text between its RS bytes (n characters, shown only
// while PS1 has the length of ours) tell that a command changed the prompts. Every field has a bounded length, whatever a
// command sets the prompts to. The command text is
// typed as it is, a line at a time: each line is typed when bash, proven
// back at its prompt, has answered the one before with exactly one marker,
// PS1 (it ran) or PS2 (it wants the rest of a quote, heredoc or compound
// command). So the user's traps, xtrace, aliases, functions and disabled
// builtins meet the user's commands only; there is no eval, no prompt
// function and no variable of ours for a command to redefine, and a command
// that reads its input cannot swallow the lines after it.
//
// A marker is never taken on its word: see the actor's completion rules. A
// few fallbacks use shell commands of ours: a status query, a function
// defined at start-up, called when a command changed PS1, PS2, promptvars or
// stderr (which is where bash prints its prompt); and an eval line for text
// when PS2 is not ours.

// markerLead starts every marker; the nonce follows it.
const markerLead = "\x1eDSH"

// maxMarkerLen bounds a marker: the lead, two numbers and three short fields
// (a query adds a token and at most maxPromptText of prompt text).
const maxMarkerLen = 512

// maxPromptText bounds the foreign prompt text the query line reports.
const maxPromptText = 256

type protocol struct {
	// nonce is 16 upper-case hexadecimal digits: unguessable enough that
	// output never carries it by accident, and unchanged by `stty olcuc`.
	nonce string
	lead  []byte // markerLead + nonce + ":"
	ps1   string
	ps2   string
	// ps1Inner is ps1 without its RS bytes: what its last field shows.
	ps1Inner string
	// tty is the slave's path, for the query line's test of stderr.
	tty  string
	scan inband.Scanner
}

func newProtocol(tty string) protocol {
	nonce := inband.NewNonce()
	p := protocol{
		nonce: nonce,
		lead:  []byte(markerLead + nonce + ":"),
		ps2:   markerLead + nonce + ":c\x1e",
		tty:   tty,
	}
	// ${PS2+...}: set -u must not make the prompt an error when PS2 is unset.
	// The last field is PS1's text between its RS bytes, when PS1 has the
	// length of ours (a foreign PS1 would put its own RS bytes, and any
	// length, in the marker). That text holds its own length: take the
	// fixed point.
	body := markerLead[1:] + nonce + `:\#:$?:${#BASHOPTS}:${#PS1}:${PS2+${#PS2}}:${PS2+${PS2:1:19}}:${PS1:1:(${#PS1}==%d)*%d}`
	for n := 0; ; {
		inner := fmt.Sprintf(body, n+2, n)
		if len(inner) == n {
			p.ps1, p.ps1Inner = "\x1e"+inner+"\x1e", inner
			break
		}
		n = len(inner)
	}
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

// Start-up. The first line sets the prompts, turns history expansion off
// (bash would otherwise act on "!" in typed text) and defines the status
// query (see queryFunc); its prompt gives bash's plain input read. Where the
// readline layout of this bash binary is not known yet (see layouts), that
// line also turns readline on, to learn how its prompt read looks, and a
// second line turns it off again. Both take themselves out of the history.
func (p protocol) initLines(learnReadline, keepHistory bool) [][]byte {
	// With the host user's history loaded, only the line goes; otherwise
	// all of it.
	forget, lead := "; history -c", " "
	if keepHistory {
		// Without the leading space, so that HISTCONTROL=ignorespace
		// cannot keep the line out, and the entry deleted is the line.
		forget, lead = "; history -d -1", ""
	}
	first := lead + "PS1=" + ansiC(p.ps1) + " PS2=" + ansiC(p.ps2) + "; set +H; " + p.queryFunc()
	if !learnReadline {
		return [][]byte{[]byte(first + forget + "\n")}
	}
	return [][]byte{[]byte(first + "; set -o emacs" + forget + "\n"), []byte(lead + "set +o emacs" + forget + "\n")}
}

// queryName is the status query's function.
func (p protocol) queryName() string { return "__dsh_" + p.nonce + "_q" }

// restoreName is the function that gives PROMPT_COMMAND back (see queryFunc).
func (p protocol) restoreName() string { return "__dsh_" + p.nonce + "_r" }

// queryFunc defines the status query, read-only, while no command of anyone's
// has run (so no alias or function of a user's is in it). Called with $?
// and a token, it makes PS1, PS2 and promptvars ours again where it can and
// reports on the terminal itself, in a "q" marker (called with one more
// argument before the last, while bash's stderr is not the terminal, it
// leaves PS1 and PS2 empty instead: see queryLineSetting):
//
//	RS "DSH" nonce ":q:" token ":" number ":" status ":" PS1 attributes ":" PS2 attributes ":" flags ":" prompt RS
//
// number is bash's number of the line that called it; prompt is what the
// PS1 in force when it was called expands to (RS replaced, cut to
// maxPromptText): bash printed that after the command. flags are the
// length of BASHOPTS, then "e"
// while shopt extdebug is on, "x" while set -x is (xtrace, as the caller
// had it), "b" while `{` or `}` is an alias (the next
// query line is then not a group, see queryLineSetting) and "p" when
// PROMPT_COMMAND was set aside. It drops the
// attributes that would change what is assigned to the prompts (declare
// -l, -u, -c, -i, -n), takes its own call out of the history and gives $?
// back. Its output goes to /dev/null but the report. xtrace, which may
// write to any descriptor (BASH_XTRACEFD), is turned off for the function
// (`local -` gives the options back on return); the two lines traced
// before that carry the token. `history -p` removes the line being run
// from the history exactly when bash saved it, so an entry of the user's
// is never removed whatever HISTIGNORE and HISTCONTROL say.
//
// The prompt after the query line is the runtime's doing, not the user's:
// a PROMPT_COMMAND of theirs that ran for it would print a second time
// for one command of theirs and set PS1 again (a prompt that changes at
// every prompt, with the time or a counter, could then not be told from
// output). So the query sets PROMPT_COMMAND aside for that one prompt: it
// becomes a call of the restore function, with PROMPT_COMMAND's indices
// and elements as its arguments, which puts them back (attributes kept:
// the variable is assigned, never unset) and runs nothing of the user's. A read-only
// PROMPT_COMMAND, or one with attributes other than -a and -x, is left
// to run.
func (p protocol) queryFunc() string {
	// The function's text holds no RS byte and no lead: bash shows it
	// (declare -f, set, type) with $'...' words decoded, and a marker in
	// that listing would be taken for one. The prompts are built with
	// printf from their text between the RS bytes.
	ours := func(name, value string) string {
		inner := strings.Trim(value, "\x1e")
		if strings.ContainsAny(inner, "'\x1e") {
			panic("shell: a prompt marker that cannot be single-quoted: " + strconv.Quote(inner))
		}
		return fmt.Sprintf(`[[ -v %[1]s && ${%[1]s@a} == *r* ]] || \builtin printf -v %[1]s '\036%%s\036' '%[2]s'; `, name, inner)
	}
	var b strings.Builder
	// Quoted: called through builtin, local is not known for a declaration
	// when the line is parsed, so its arguments would be split.
	fmt.Fprintf(&b, `%s() { \builtin local - t="$2" p="${PS1-}" n='\#' r f= c i o="$-"; \builtin set +x -- "$@"; n="${n@P}"; p="${p@P}"; \builtin printf -v r '\036'; p="${p//"$r"/?}"; p="${p:0:%d}"; `, p.queryName(), maxPromptText)
	b.WriteString(`\builtin declare -g +i +l +u +c +n PS1 PS2; `)
	// With a fourth argument (bash's stderr is not the terminal), the
	// prompts are left empty instead: bash would print them into a file
	// or a pipe, where no marker can answer anything.
	b.WriteString(`if (($# > 3)); then [[ -v PS1 && ${PS1@a} == *r* ]] || PS1=; [[ -v PS2 && ${PS2@a} == *r* ]] || PS2=; else `)
	b.WriteString(ours("PS1", p.ps1))
	b.WriteString(ours("PS2", p.ps2))
	b.WriteString(`fi; `)
	b.WriteString(`f=${#BASHOPTS}; [[ :$BASHOPTS: == *:extdebug:* ]] && f+=e; [[ $o == *x* ]] && f+=x; { \builtin alias -- '{' || \builtin alias -- '}'; } && f+=b; `)
	// PROMPT_COMMAND set aside for the next prompt (see above).
	fmt.Fprintf(&b, `if [[ ${PROMPT_COMMAND[*]-} == *[![:space:]]* && ${PROMPT_COMMAND@a} != *[!ax]* && ${PROMPT_COMMAND[*]} != *%[1]s* ]]; then `+
		`c="\\%[1]s ${PROMPT_COMMAND@a}-"; for i in "${!PROMPT_COMMAND[@]}"; do c+=" $i ${PROMPT_COMMAND[i]@Q}"; done; [[ $f == *b* ]] || c="{ $c; } >/dev/null 2>&1"; `+
		`if [[ ${PROMPT_COMMAND@a} == *a* ]]; then PROMPT_COMMAND=("$c"); else PROMPT_COMMAND=$c; fi; f+=p; fi; `, p.restoreName())
	fmt.Fprintf(&b, `\builtin shopt -s promptvars; \builtin printf '\036DSH%s:q:%%s:%%s:%%s:%%s:%%s:%%s:%%s\036' "$2" "$n" "$1" "${PS1@a}" "${PS2@a}" "$f" "$p" >%s; `, p.nonce, p.tty)
	b.WriteString(`\builtin history -p ''; \builtin return "$1"; } >/dev/null 2>&1; `)
	fmt.Fprintf(&b, `\builtin readonly -f %s; `, p.queryName())
	// The restore function: its first argument is PROMPT_COMMAND's
	// attributes and a dash, the rest its indices and elements.
	fmt.Fprintf(&b, `%[1]s() { if [[ $1 == *a* ]]; then PROMPT_COMMAND=(); \builtin shift; while (($# > 1)); do PROMPT_COMMAND[$1]=$2; \builtin shift 2; done; else PROMPT_COMMAND=$3; fi; } >/dev/null 2>&1; \builtin readonly -f %[1]s`, p.restoreName())
	return b.String()
}

// queryLine calls the status query with token. Its stderr goes to
// /dev/null; xtrace and `set -v` show the call, which carries the token:
// lines with the token are the runtime's and are removed from the output.
// The call is the first part of an && list, so that under set -e a status
// handed back that is not 0 does not end the shell, and $? is that status
// afterwards. Both commands end with "$_", which the next command sees as
// it was before the query.
func (p protocol) queryLine(token string) []byte {
	return p.queryLineSetting(token, `"$?"`, true, false)
}

// queryLineSetting is the query line that hands back status (a number, or
// "$?") instead of $?: $? is that status afterwards.
//
// grouped puts the line in a group whose output goes to /dev/null: a DEBUG
// trap runs before each of its commands at the top level (and under set -T
// before the function's first one), and what it prints would be taken for
// output. The report goes to the terminal by its name. A group's braces
// are words an alias can replace, so the line is not grouped while the
// last report said that `{` or `}` is an alias.
//
// empty asks for empty prompts (bash's stderr is not the terminal: a file,
// a pipe): every line is then followed by the query anyway, and a prompt
// would only put the runtime's marker into the user's log.
func (p protocol) queryLineSetting(token, status string, grouped, empty bool) []byte {
	mode := ""
	if empty {
		mode = "e "
	}
	line := `\` + p.queryName() + ` ` + status + ` ` + token + ` ` + mode + `"$_" 2>/dev/null && \builtin : ` + token + ` "$_"`
	if grouped {
		line = "{ " + line + "; } >/dev/null 2>&1"
	}
	return []byte(line + "\n")
}

// newToken is a query's token: 16 upper-case hexadecimal digits.
func newToken() string { return inband.NewNonce() }

// inputrc is the readline configuration an agent shell gets (unless the
// host user's is allowed): every byte typed is taken as it is, 8-bit
// characters included, with no bracketed-paste or control-character echo.
const inputrc = "set convert-meta off\nset input-meta on\nset output-meta on\n" +
	"set enable-bracketed-paste off\nset echo-control-characters off\nset bell-style none\n"

var inputrcPath = sync.OnceValues(func() (string, error) {
	sum := sha256.Sum256([]byte(inputrc))
	// In the user's cache, not /tmp: a sandbox at level fs has a /tmp of
	// its own, and sees the rest of the system (read-only).
	dir := os.TempDir()
	if cache, err := os.UserCacheDir(); err == nil {
		if err := os.MkdirAll(filepath.Join(cache, "dsh-actors"), 0o755); err == nil {
			dir = filepath.Join(cache, "dsh-actors")
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("inputrc-%d-%x", os.Getuid(), sum[:6]))
	if b, err := os.ReadFile(path); err == nil && string(b) == inputrc {
		return path, nil
	}
	f, err := os.CreateTemp(dir, "inputrc-*")
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

// splitText is the lines a command text is typed as: CRLF read as LF, one
// trailing newline dropped; blank text is one empty line (bash runs
// nothing, and answers with a prompt).
func splitText(text string) []string {
	text = strings.TrimSuffix(normalizeNewlines(text), "\n")
	if blank(text) {
		return []string{""}
	}
	return strings.Split(text, "\n")
}

// frameLine is how one line is typed: as it is, then a newline; to readline
// with its control bytes quoted.
func frameLine(line string, readline bool) []byte {
	b := append([]byte(line), '\n')
	if readline {
		b = quoteForReadline(b)
	}
	return b
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
		if !blankLine(line) {
			return false
		}
	}
	return true
}

// blankLine reports whether a line typed at bash's prompt (not inside a
// quote or heredoc) runs nothing.
func blankLine(line string) bool {
	line = strings.TrimLeft(line, " \t\r")
	return line == "" || line[0] == '#'
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
	seq    uint64 // PS1: bash's command number; query: the number of its line
	status int    // PS1 and query: $?
	// PS1: PS1 is the protocol's own (length and text); the length of PS2
	// (-1: unset) and its characters 1-19.
	ps1Ours bool
	ps2Len  int
	ps2Head string
	// PS1 and query: the length of BASHOPTS (see extdebugSuspect).
	opts int
	// query: its token and the prompt state; whether shopt extdebug is on
	// and `{` or `}` an alias.
	token                    string
	ps1ReadOnly, ps2ReadOnly bool
	extdebug, bracesAliased  bool
	xtrace                   bool
	prompt                   string
}

func (p protocol) parseMarker(body []byte) marker {
	s := string(body)
	if s == "c" {
		return marker{kind: markPS2}
	}
	if rest, ok := strings.CutPrefix(s, "q:"); ok {
		f := strings.SplitN(rest, ":", 7)
		if len(f) != 7 {
			return marker{}
		}
		seq, err1 := strconv.ParseUint(f[1], 10, 64)
		st, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			return marker{}
		}
		letters := strings.TrimLeft(f[5], "0123456789")
		opts, err3 := strconv.Atoi(f[5][:len(f[5])-len(letters)])
		if err1 != nil || err2 != nil || err3 != nil {
			return marker{}
		}
		return marker{kind: markQuery, token: f[0], seq: seq, status: st, ps1ReadOnly: strings.Contains(f[3], "r"),
			ps2ReadOnly: strings.Contains(f[4], "r"), opts: opts, extdebug: strings.Contains(letters, "e"),
			bracesAliased: strings.Contains(letters, "b"), xtrace: strings.Contains(letters, "x"), prompt: f[6]}
	}
	// PS2's head and PS1's text may hold colons: PS1's is known when it is
	// ours.
	f := strings.SplitN(s, ":", 6)
	if len(f) != 6 {
		return marker{}
	}
	seq, err1 := strconv.ParseUint(f[0], 10, 64)
	st, err2 := strconv.Atoi(f[1])
	opts, err5 := strconv.Atoi(f[2])
	n1, err3 := strconv.Atoi(f[3])
	n2, err4 := strconv.Atoi(f[4])
	if f[4] == "" {
		n2, err4 = -1, nil
	}
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
		return marker{}
	}
	m := marker{kind: markPS1, seq: seq, status: st, opts: opts, ps2Len: n2, ps2Head: f[5]}
	if head, ok := strings.CutSuffix(f[5], ":"+p.ps1Inner); ok && n1 == len(p.ps1) {
		m.ps1Ours, m.ps2Head = true, head
	}
	return m
}

// ps2Ours tells from a PS1 marker whether PS2 is still the one the protocol
// set (only a marker of a PS1 of ours tells its head apart).
func (p protocol) ps2Ours(m marker) bool {
	return m.ps1Ours && m.ps2Len == len(p.ps2) && m.ps2Head == p.ps2[1:20]
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
