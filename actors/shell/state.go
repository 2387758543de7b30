package shell

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/internal/admission"
	"github.com/dsh-actors/dsh-actors/internal/procfs"
)

// kept is the state that outlives one actor instance: calls waiting their
// turn, what the next call must be told, and the output that came since the
// last call (a shell that dies between calls must not take it along).
type kept struct {
	queue []*call
	note  string
	idle  collector
	// idleEnded: idle holds output whose writer is gone (a shell thrown
	// away, a command left waiting that was stopped): its last line, even
	// if cut, is not continued by the output that follows.
	idleEnded bool
	// withdrawn are the results of calls whose callers gave up, for the
	// next call (see withdraw.go); withdrawnDropped counts those dropped
	// past its budget.
	withdrawn        []string
	withdrawnDropped int
	// last is the call answered last, for a caller that gives up as its
	// answer comes.
	last *answer
	// oldShell is closed once the session of the shell thrown away last is
	// gone; the next shell starts after.
	oldShell chan struct{}
}

// bashState is what the actor knows of its bash.
type bashState struct {
	// started: the start-up lines are done.
	started bool
	// sigs are bash's own reads of its input, learned at start-up.
	sigs promptSigs
	// learn: the readline layout of this binary is learned at start-up;
	// binary names it in the layouts cache.
	learn  bool
	binary string
	// seq is bash's command number at the last proven prompt; seqKnown is
	// false while it is not known (no marker since a query).
	seq      uint64
	seqKnown bool
	// readline: bash was last seen reading with readline (set -o vi/emacs).
	readline bool
	// outputPiped: bash's output or error was a pipe at the last look
	// (exec > >(tee log)); see writers.go.
	outputPiped bool
	// promptPiped: bash's stderr, where it prints its prompt, is a pipe:
	// its prompts come through the pipe's reader, late (see marker).
	promptPiped bool
	// ps1Stuck: bash's prompt cannot carry the marker (PS1 read-only, or
	// stderr is not the terminal): every line ends with a status query.
	ps1Stuck bool
	// promptsEmpty: the last status query was asked while bash's stderr
	// was not the terminal and left PS1 and PS2 empty (see queryFunc):
	// bash prints no prompt, so no marker but a query's is bash's.
	promptsEmpty bool
	// ps2Foreign: PS2 is not ours (read-only, or changed again at every
	// prompt): text goes as one eval line, which has no continuation.
	ps2Foreign bool
	// needQuery: a command changed the prompt state; query before the
	// next text.
	needQuery bool
	// extdebug is whether shopt extdebug was on, as the status query last
	// found it, while BASHOPTS had the length optsSeen (see
	// extdebugSuspect).
	extdebug bool
	optsSeen int
	// xtrace: set -x was on at the last status query.
	xtrace bool
	// plainQuery: `{` or `}` is an alias, so the status query's line is
	// not a group (see queryLineSetting).
	plainQuery bool
}

// step is what an exchange with bash is for.
type step int

const (
	stepStart     step = iota // one of the start-up lines
	stepQuery                 // the status query
	stepInterrupt             // stopping a command left waiting for input
	stepText                  // one line of the call's text (or its eval line)
	stepCancel                // cancelling incomplete text with SIGINT
)

// exchange is one thing written (or signalled) to bash and the wait for
// bash to come back to its prompt.
type exchange struct {
	step step
	gen  uint64
	// flushed: everything delivered from now on came after the write.
	flushed bool
	// The markers seen since. The rule is one marker per exchange: a line
	// gives one PS1 or one PS2 marker, a query one q marker.
	ps1   []marker
	ps2   int
	query []marker
	// startLine: which start-up line.
	startLine int
	// token is the query's.
	token string
	// queryMark is the length of the call's output when the query started:
	// the lines of the query that bash echoes are after it.
	queryMark int
	// reportAt is the length of that output when the query's report came:
	// what follows is bash's prompt cycle after it.
	reportAt int
	// afterLine: a query whose status is that of the line just typed.
	afterLine bool
	// cancelMark is the length of the call's output when SIGINT was sent.
	cancelMark int
	// intr is the state of an interrupt sequence.
	intr *interrupt
	// emptyPrompts: the status query was asked to leave the prompts empty.
	emptyPrompts bool
	// reprobes counts the probes of ours taken again.
	reprobes int
	// waitedOut is the last wait with a timeout of its own waited out (see
	// waitOut).
	waitedOut *waitedOut
	// stopped: SIGCONT was sent to a stopped bash in this exchange.
	continued bool
	// stolenLooks counts the looks for a program that took the line.
	stolenLooks int
	// answered: bash was proven back at its prompt and the exchange's
	// answer is decided (see atPrompt).
	answered bool
	// stopped: a query asked after a command left waiting was stopped or
	// ended by itself (see interruptDone).
	stopped *stoppedQuery
	// status is what the query hands back as $?; grouped: its line was a
	// group (see queryLineSetting).
	status  string
	grouped bool
	// promptAt is the length of the output when the first query of the
	// exchange began: bash's prompt before it ends there. retried: the
	// query was asked again without the group.
	promptAt int
	retried  bool
}

// stoppedQuery is what a query after a stopped command says: note, with
// the status for its %d, and mark, the length of the output before the
// command's SIGINT (-1: none was sent).
type stoppedQuery struct {
	note string
	mark int
}

// markers is how many markers the exchange has seen.
func (ex *exchange) markers() int { return len(ex.ps1) + ex.ps2 + len(ex.query) }

// call is one Run from receipt to answer.
type call struct {
	id       string
	sender   *actor.PID
	args     Args
	deadline time.Time // set when it first starts running
	timeout  time.Duration
	fresh    bool
	notes    []string
	before   collector // output since the previous call
	out      collector
	// writers is the wait for the writers of bash's output (see writers.go).
	writers *writersState
	// begun: the first line was typed; output goes to out.
	begun bool
	// lines are the text's lines; next is the next one to type; eval: the
	// text goes as one eval line instead.
	lines []string
	next  int
	eval  bool
	// evalTraced are where in out eval lines typed under set -x began:
	// bash traces the eval itself (see dropEvalTraces).
	evalTraced []int
	// continuing: bash reads the rest of a quote, heredoc or compound
	// command that a line before opened.
	continuing bool
	// ran: a command of the text ran; status is that of the last.
	ran    bool
	status int
	// incomplete: the text was cancelled as incomplete.
	incomplete bool
	// read is bash's read count around the line being typed (readShort).
	read lineRead
	// ticket is the call's place at the host's gate; admitted: it got in.
	// Nothing is typed before.
	ticket   *admission.Ticket
	admitted bool
	// withdrawn: its caller gave up (see withdraw.go); interrupted: SIGINT
	// was sent for it.
	withdrawn   bool
	interrupted bool
	// signalled is the foreground group that got its SIGINT last;
	// escalated says what followed SIGINT (its result's heading tells it).
	signalled int
	escalated []string
	// latest is the last line the call printed, for progress reports.
	latest latestLine
	// redraws counts the sequences in its output that redraw a screen
	// (see waitOut).
	redraws redraws
	// carried are the results of calls withdrawn before this one, which
	// open its result (see withdraw.go).
	carried        []string
	carriedDropped int
	// timingOut: past its time, its last output is being drained (see
	// beginTimeout).
	timingOut bool
}

// interrupt is the state of stopping a command that waits for input before
// the call's own command can run.
type interrupt struct {
	who    string
	step   int // 0: SIGINT, 1: end-of-file, 2: SIGTERM, 3: SIGKILL
	stepAt time.Time
	// wait is how the program was last proven waiting.
	wait procfs.Wait
	// eofAgain: end-of-file was typed with canonical input turned on for
	// it, and may be typed once more (see escalate).
	eofAgain bool
	// mark is the length of the output before SIGINT (-1: not sent yet):
	// the newline bash prints for an interrupted command is the
	// runtime's doing.
	mark int
}

// waitingCommand is a command left waiting for input. ended is the marker
// bash printed when it ended by itself between calls, if it did.
type waitingCommand struct {
	who string
	// wait is what proved it waiting.
	wait  procfs.Wait
	ended *marker
}
