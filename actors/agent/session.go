package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

// The session protocol: what a turn loop (the agent's own, RunTurn in the
// host, or a host's own model loop) asks of the agent. Each is answered
// with the reply named, to the sender.
type (
	// Record appends Event to the agent's session log (a model message, a
	// tool call or result, a user message, a compaction). Answered with
	// *Recorded.
	Record struct {
		Event *messages.Event
		// Withdrawn, when it is closed before the request's turn comes
		// (the caller's ctx.Done()), has it answered ErrWithdrawn with
		// nothing appended. Once an append has begun it goes through.
		Withdrawn <-chan struct{}
	}
	// Inject appends one user message attributed to Source: context for the
	// model. Answered with *Recorded.
	Inject struct {
		Text       string
		Source     *messages.Source
		Turn, Step uint32
		Withdrawn  <-chan struct{} // as Record's
	}
	// PrepareStep runs the pre-step listeners for step Step of turn Turn
	// (both from 1), in order, and answers *StepPrepared: what they
	// injected, and what the model request is built from.
	PrepareStep struct {
		Turn, Step uint32
		Withdrawn  <-chan struct{} // as Record's
	}

	// Recorded answers Record and Inject: the event's sequence number, or
	// why it was not appended.
	Recorded struct {
		Seq uint64
		Err error
	}
	// StepPrepared answers PrepareStep. Err is a listener's failure, or
	// ErrStepCancelled; what listeners injected before it stays in the log
	// (it is append-only) and is listed in Injected.
	StepPrepared struct {
		Injected []sessionlog.Record
		Visible  []sessionlog.Record
		Err      error
	}
)

// ErrStepCancelled is what a listener returns (or wraps) to cancel the
// attempt to prepare a step, as opposed to failing it.
var ErrStepCancelled = errors.New("agent: the step was cancelled by a pre-step listener")

// ErrWithdrawn answers a session request whose caller gave up before its
// turn came: nothing was done.
var ErrWithdrawn = errors.New("agent: the request was withdrawn before it ran; nothing was appended")

// ErrStopping answers a session request that the agent, stopping, never
// began: nothing was done, and it may be sent again.
var ErrStopping = errors.New("agent: the agent is stopping; the request was not run")

// ErrInterrupted answers a session request that was running when its agent
// stopped: it may or may not have been done (an append may have been
// committed), so it is not sent again by itself.
var ErrInterrupted = errors.New("agent: the agent stopped while the request ran; it may or may not have been done")

// ErrNoSessionLog answers the session protocol on a host without a log.
var ErrNoSessionLog = errors.New("agent: this host has no session log")

// A Listener runs before each step of a turn. Listeners run one at a time,
// in the order of Options.Listeners, on the agent's session goroutine (never
// in its Receive); an error stops the ones after it.
type Listener interface {
	// Name says who the listener is, in logs and errors.
	Name() string
	// PreStep is called with the step's facts; ctx ends when the agent
	// stops.
	PreStep(ctx context.Context, s *Step) error
}

// Step is what a listener knows of the step being prepared.
type Step struct {
	Agent      string
	Turn, Step uint32
	// Log is the session log, for scanning (Scan reads the raw log,
	// compacted events included).
	Log *sessionlog.Log
	// injected collects what Inject appended.
	injected []sessionlog.Record
}

// Inject appends one user message attributed to source, now, as part of
// this step.
func (s *Step) Inject(text string, source *messages.Source) (uint64, error) {
	ev := userEvent(text, source, s.Turn, s.Step)
	seq, err := s.Log.Append(s.Agent, ev)
	if err == nil {
		s.injected = append(s.injected, sessionlog.Record{Seq: seq, Event: ev})
	}
	return seq, err
}

func userEvent(text string, source *messages.Source, turn, step uint32) *messages.Event {
	return &messages.Event{Turn: turn, Step: step, Kind: &messages.Event_User{User: &messages.UserMessage{Text: text, Source: source}}}
}

// sessionWork is one request for the session goroutine.
type sessionWork struct {
	msg    any
	sender *actor.PID
}

// session runs an agent's session requests one after the other, in the
// order they came, on a goroutine of its own: appends wait for a disk sync
// and listeners run programs, neither of which may hold up Receive.
type session struct {
	agent     string
	open      func() (*sessionlog.Log, error)
	listeners []Listener
	root      *actor.RootContext
	log       *slog.Logger

	ctx     context.Context
	cancel  context.CancelFunc
	held    func() // the agent's Reaper waits for the goroutine
	wake    chan struct{}
	mu      sync.Mutex
	queue   []sessionWork
	current *sessionWork // the request being run
	closed  bool
}

func newSession(a *Actor, root *actor.RootContext) *session {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{agent: a.opts.ID, open: a.opts.Session, listeners: a.opts.Listeners, root: root, log: a.log,
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), held: a.opts.Reaper.Hold()}
	go s.run()
	return s
}

// add queues a request; it never blocks.
func (s *session) add(w sessionWork) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.root.Send(w.sender, s.refusal(w.msg, ErrStopping))
		return
	}
	s.queue = append(s.queue, w)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// runListener runs one listener; a panic in it fails the step instead of
// the process.
func runListener(ctx context.Context, l Listener, st *Step) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panicked: %v", p)
		}
	}()
	return l.PreStep(ctx, st)
}

// stop ends the goroutine after the request it is on (cut short by the
// cancelled context) and answers the rest with ErrStopping. It does not
// wait: the agent's Reaper does (Hold), and the host waits for that after
// the agent has stopped, so a listener that ignores its context holds up
// neither the agent's stop nor anyone else's.
func (s *session) stop() {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	left, cur := s.queue, s.current
	s.queue, s.current = nil, nil
	s.mu.Unlock()
	if cur != nil {
		// Its caller hears now; the answer the goroutine sends later finds
		// nobody waiting.
		s.root.Send(cur.sender, s.refusal(cur.msg, ErrInterrupted))
	}
	for _, w := range left {
		s.root.Send(w.sender, s.refusal(w.msg, ErrStopping))
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *session) run() {
	defer s.held()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			<-s.wake
			continue
		}
		w := s.queue[0]
		s.queue = s.queue[1:]
		s.current = &w
		s.mu.Unlock()
		reply := s.handle(w.msg)
		s.mu.Lock()
		answered := s.current != &w // stop answered it
		s.current = nil
		s.mu.Unlock()
		if !answered {
			s.root.Send(w.sender, reply)
		}
	}
}

func (s *session) refusal(msg any, err error) any { return refusal(msg, err) }

// refusal is the answer to a session request msg that is not run.
func refusal(msg any, err error) any {
	switch msg.(type) {
	case *PrepareStep:
		return &StepPrepared{Err: err}
	case *BeginTurn:
		return &TurnBegun{Err: err}
	}
	return &Recorded{Err: err}
}

// withdrawn reports whether the request's caller gave up.
func withdrawn(msg any) bool {
	var ch <-chan struct{}
	switch m := msg.(type) {
	case *Record:
		ch = m.Withdrawn
	case *Inject:
		ch = m.Withdrawn
	case *PrepareStep:
		ch = m.Withdrawn
	case *BeginTurn:
		ch = m.Withdrawn
	}
	select {
	case <-ch: // a nil channel never is
		return true
	default:
		return false
	}
}

func (s *session) handle(msg any) any {
	if withdrawn(msg) {
		return s.refusal(msg, ErrWithdrawn)
	}
	var log *sessionlog.Log
	var err error
	if s.open != nil {
		log, err = s.open()
	}
	if err == nil && log == nil {
		err = ErrNoSessionLog
	}
	if err != nil {
		return s.refusal(msg, err)
	}
	switch m := msg.(type) {
	case *Record:
		seq, err := log.Append(s.agent, m.Event)
		return &Recorded{Seq: seq, Err: err}
	case *Inject:
		seq, err := log.Append(s.agent, userEvent(m.Text, m.Source, m.Turn, m.Step))
		return &Recorded{Seq: seq, Err: err}
	case *PrepareStep:
		return s.prepare(log, m)
	case *BeginTurn:
		turn, seq, err := log.BeginTurn(s.agent, userEvent(m.Text, nil, 0, 1))
		return &TurnBegun{Turn: turn, Seq: seq, Err: err}
	}
	return s.refusal(msg, fmt.Errorf("agent: unexpected session message %T", msg))
}

func (s *session) prepare(log *sessionlog.Log, m *PrepareStep) *StepPrepared {
	if m.Turn < 1 || m.Step < 1 {
		return &StepPrepared{Err: fmt.Errorf("agent: turn %d, step %d: turns and steps count from 1", m.Turn, m.Step)}
	}
	st := &Step{Agent: s.agent, Turn: m.Turn, Step: m.Step, Log: log}
	var failed error
	for _, l := range s.listeners {
		if err := s.ctx.Err(); err != nil {
			failed = err
			break
		}
		start := time.Now()
		if err := runListener(s.ctx, l, st); err != nil {
			if !errors.Is(err, ErrStepCancelled) {
				err = fmt.Errorf("agent: pre-step listener %s (turn %d, step %d, after %v): %w", l.Name(), m.Turn, m.Step, time.Since(start).Round(time.Millisecond), err)
			}
			failed = err
			break
		}
	}
	rep := &StepPrepared{Injected: st.injected, Err: failed}
	if failed == nil {
		rep.Visible, rep.Err = log.Visible(s.agent)
	}
	return rep
}

// BeginTurn starts the agent's next turn with the user's message: the turn
// number is one more than the latest in the log (1 for the first), and the
// message is recorded as its step 1. Answered with *TurnBegun.
type BeginTurn struct {
	Text      string
	Withdrawn <-chan struct{} // as Record's
}

// TurnBegun answers BeginTurn.
type TurnBegun struct {
	Turn uint32
	Seq  uint64
	Err  error
}

// A Model answers a step: given what the request is built from, the model's
// message, with the tool calls it asks for (none ends the turn).
type Model interface {
	Reply(ctx context.Context, visible []sessionlog.Record) (*messages.ModelMessage, error)
}

// ScriptedModel replies with Replies, in order, whatever it is shown: for
// tests and benchmarks. It is safe for concurrent use.
type ScriptedModel struct {
	mu      sync.Mutex
	Replies []*messages.ModelMessage
	next    int
	// Seen records how many visible events each reply was shown.
	Seen []int
}

// ErrScriptEnded: the scripted model has no reply left.
var ErrScriptEnded = errors.New("agent: the scripted model has no reply left")

// Reply returns the next scripted reply.
func (m *ScriptedModel) Reply(_ context.Context, visible []sessionlog.Record) (*messages.ModelMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.next >= len(m.Replies) {
		return nil, ErrScriptEnded
	}
	r := m.Replies[m.next]
	m.next++
	m.Seen = append(m.Seen, len(visible))
	return r, nil
}
