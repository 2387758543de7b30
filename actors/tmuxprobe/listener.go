package tmuxprobe

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/agent"
	"github.com/dsh-actors/dsh-actors/executor"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/sessionlog"
	"golang.org/x/sync/singleflight"
)

// Source is what the listener's injections are attributed to.
func Source() *messages.Source { return &messages.Source{Kind: "plugin", Plugin: Plugin} }

// Listener is the pre-step listener that injects the tmux location: on the
// first step of a turn, when due, it reads the location and injects it if it
// differs from the latest injection of this source. Both the schedule and
// the comparison come from the raw session log (never a cache of the
// process), so they hold across compaction and restarts.
type Listener struct {
	// Executor runs the reading; nil makes the listener a no-op.
	Executor *executor.Executor
	// RefreshInterval, when positive, suppresses the query and the
	// injection within that long of the latest injection.
	RefreshInterval time.Duration
	// PID is the process whose location is read (the agent host's own).
	PID int
	// Logger receives the warning for a refused or failed reading.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// flight shares one reading among the agents that ask at once: they
	// all live in the same pane, and a thousand tmux clients at once
	// would time out.
	flight singleflight.Group
}

type reading struct {
	loc Location
	ok  bool
}

var _ agent.Listener = (*Listener)(nil)

// Name names the listener.
func (l *Listener) Name() string { return Plugin }

// PreStep implements agent.Listener. It never fails the step: every way the
// reading can come to nothing is a no-op, and a refusal or failure of the
// executor is logged as a warning.
func (l *Listener) PreStep(ctx context.Context, s *agent.Step) error {
	if s.Step != 1 || l.Executor == nil {
		return nil
	}
	// The log is read before the query only when the interval needs it;
	// else after a reading came (outside tmux, never), since finding that
	// no reading was ever injected takes a scan of the whole log.
	var last injection
	var found, scanned bool
	scan := func() bool {
		var err error
		last, found, err = latestInjection(s.Log, s.Agent)
		scanned = true
		if err != nil {
			l.warn("reading the session log", err)
		}
		return err == nil
	}
	if l.RefreshInterval > 0 {
		if !scan() {
			return nil
		}
		now := time.Now
		if l.Now != nil {
			now = l.Now
		}
		if found && now().Sub(time.Unix(0, last.time)) < l.RefreshInterval {
			return nil // too soon: neither query nor injection
		}
	}
	v, err, _ := l.flight.Do("read", func() (any, error) {
		loc, ok, err := Read(ctx, l.Executor, l.PID)
		return reading{loc, ok}, err
	})
	r, _ := v.(reading)
	loc, ok := r.loc, r.ok
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return nil // the turn was cancelled
	case err != nil:
		l.warn("reading the tmux location", err)
		return nil
	case !ok:
		return nil
	}
	if !scanned && !scan() {
		return nil
	}
	if found && last.state == loc.State() {
		return nil // unchanged
	}
	if _, err := s.Inject(loc.Render(int(s.Turn)), Source()); err != nil {
		l.warn("injecting the tmux location", err)
	}
	return nil
}

func (l *Listener) warn(what string, err error) {
	if l.Logger != nil {
		l.Logger.Warn("tmux-context: "+what+" failed; the turn goes on without it", "err", err)
	}
}

// injection is what the latest injection of this source says: when it was
// made, and its state block ("" when it is not a reading: a message that is
// not text, or a single line).
type injection struct {
	time  int64
	state string
}

// latestInjection scans the agent's raw log from its end for the latest
// injection of this source.
func latestInjection(log *sessionlog.Log, agentID string) (injection, bool, error) {
	var inj injection
	found := false
	stop := errors.New("found")
	err := log.ScanBackward(agentID, func(r sessionlog.Record) error {
		u := r.Event.GetUser()
		if u == nil || u.GetSource().GetKind() != "plugin" || u.GetSource().GetPlugin() != Plugin {
			return nil
		}
		inj.time, found = r.Event.TimeUnixNano, true
		if _, state, two := strings.Cut(u.GetText(), "\n"); two {
			inj.state = state
		}
		return stop
	})
	if errors.Is(err, stop) {
		err = nil
	}
	return inj, found, err
}
