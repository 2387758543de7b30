package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/dsh-actors/dsh-actors/actors/agent"
	"github.com/dsh-actors/dsh-actors/actors/tmuxprobe"
	"github.com/dsh-actors/dsh-actors/config"
	"github.com/dsh-actors/dsh-actors/executor"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

// sessionOpener returns the function agents open the session log with:
// given, or the configured file, opened at the first use. A failure is not
// kept: the next use tries again (another host may have let go of the file,
// or a directory been made).
func sessionOpener(h *Host, given *sessionlog.Log, cfg config.Session) func() (*sessionlog.Log, error) {
	if given != nil {
		return func() (*sessionlog.Log, error) { return given, nil }
	}
	var (
		mu       sync.Mutex
		lastErr  error
		failedAt time.Time
	)
	return func() (*sessionlog.Log, error) {
		mu.Lock()
		defer mu.Unlock()
		if l := h.ownLog.Load(); l != nil {
			return l, nil
		}
		if h.stopped.Load() {
			return nil, ErrStopped
		}
		if lastErr != nil && time.Since(failedAt) < reopenAfter {
			// Each try may wait for another process's lock: not at
			// every turn.
			return nil, lastErr
		}
		path := cfg.Path
		if path == "" {
			var err error
			if path, err = config.DefaultSessionPath(); err != nil {
				return nil, err
			}
		}
		var opts sessionlog.Options
		if h.metrics != nil {
			opts.OnAppend = h.metrics.Append // else no clock read per append
		}
		l, err := sessionlog.Open(path, opts)
		if errors.Is(err, sessionlog.ErrLocked) {
			lastErr, failedAt = fmt.Errorf("%w (tried again %v after)", err, reopenAfter), time.Now()
		}
		if err != nil {
			return nil, err
		}
		lastErr = nil
		h.ownLog.Store(l)
		return l, nil
	}
}

// reopenAfter is how long the host waits, after it found the session log
// locked by another process, before it tries again (each try waits for the
// lock).
const reopenAfter = 10 * time.Second

// plugins are the listeners the configuration turns on, in the order they
// run (before the host's own).
func plugins(cfg config.Config, ex *executor.Executor, log *slog.Logger) []agent.Listener {
	var ls []agent.Listener
	if cfg.TmuxContext.Enabled {
		if ex == nil {
			ex = executor.New(nil)
		}
		ls = append(ls, &tmuxprobe.Listener{
			Executor:        ex,
			RefreshInterval: time.Duration(int64(cfg.TmuxContext.RefreshIntervalMs)) * time.Millisecond,
			PID:             os.Getpid(),
			Logger:          log,
		})
	}
	return ls
}

// sessionRequest sends msg to agent and waits for its answer, starting the
// agent again if it stopped meanwhile.
func (h *Host) sessionRequest(ctx context.Context, agentID string, msg any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Refused untouched by an agent on its way out: ask its successor.
	res, _, err := h.ask(ctx, agentID, msg, func(res any) bool { return errors.Is(sessionErr(res), agent.ErrStopping) })
	return res, err
}

// Record appends ev to the agent's session log and returns its sequence
// number once it is on disk.
func (h *Host) Record(ctx context.Context, agentID string, ev *messages.Event) (uint64, error) {
	res, err := h.sessionRequest(ctx, agentID, &agent.Record{Event: ev, Withdrawn: ctx.Done()})
	if err != nil {
		return 0, err
	}
	r := res.(*agent.Recorded)
	return r.Seq, r.Err
}

// Inject appends one user message attributed to source to the agent's
// session: context for the model.
func (h *Host) Inject(ctx context.Context, agentID, text string, source *messages.Source) (uint64, error) {
	res, err := h.sessionRequest(ctx, agentID, &agent.Inject{Text: text, Source: source, Withdrawn: ctx.Done()})
	if err != nil {
		return 0, err
	}
	r := res.(*agent.Recorded)
	return r.Seq, r.Err
}

// BeginTurn records the user's message that starts the agent's next turn
// and returns the turn's number.
func (h *Host) BeginTurn(ctx context.Context, agentID, text string) (uint32, error) {
	res, err := h.sessionRequest(ctx, agentID, &agent.BeginTurn{Text: text, Withdrawn: ctx.Done()})
	if err != nil {
		return 0, err
	}
	r := res.(*agent.TurnBegun)
	return r.Turn, r.Err
}

// PrepareStep runs the agent's pre-step listeners for step of turn and
// returns what they injected and what the model request is built from. A
// host with its own model loop calls it before each model request.
func (h *Host) PrepareStep(ctx context.Context, agentID string, turn, step uint32) (*agent.StepPrepared, error) {
	res, err := h.sessionRequest(ctx, agentID, &agent.PrepareStep{Turn: turn, Step: step, Withdrawn: ctx.Done()})
	if err != nil {
		return nil, err
	}
	r := res.(*agent.StepPrepared)
	return r, r.Err
}

// TurnResult is what RunTurn did.
type TurnResult struct {
	Turn uint32
	// Steps is how many model requests the turn made.
	Steps int
	// Final is the model's last message (no tool calls, or the step limit).
	Final *messages.ModelMessage
	// StepLimit: the turn ended at maxSteps with tool calls still asked for.
	StepLimit bool
}

// RunTurn runs one turn of the agent with model: the user's message, then
// steps (prepare, ask the model, run the tool calls it returns, record the
// results) until the model asks for no tool or maxSteps steps were made.
// Everything is recorded in the agent's session log.
func (h *Host) RunTurn(ctx context.Context, agentID, userText string, model agent.Model, maxSteps int) (TurnResult, error) {
	if maxSteps < 1 {
		return TurnResult{}, fmt.Errorf("host: RunTurn: maxSteps is %d: a turn makes at least one step", maxSteps)
	}
	turn, err := h.BeginTurn(ctx, agentID, userText)
	if err != nil {
		return TurnResult{}, err
	}
	res := TurnResult{Turn: turn}
	for step := uint32(1); int(step) <= maxSteps; step++ {
		prep, err := h.PrepareStep(ctx, agentID, turn, step)
		if err != nil {
			return res, err
		}
		reply, err := model.Reply(ctx, prep.Visible)
		if err != nil {
			return res, fmt.Errorf("host: turn %d, step %d: the model: %w", turn, step, err)
		}
		res.Steps, res.Final = int(step), reply
		if _, err := h.Record(ctx, agentID, &messages.Event{Turn: turn, Step: step, Kind: &messages.Event_Model{Model: reply}}); err != nil {
			return res, err
		}
		if len(reply.ToolCalls) == 0 {
			return res, nil
		}
		for _, c := range reply.ToolCalls {
			if _, err := h.Record(ctx, agentID, &messages.Event{Turn: turn, Step: step, Kind: &messages.Event_ToolCall{ToolCall: c}}); err != nil {
				return res, err
			}
			r, err := h.Call(ctx, agentID, c.Tool, c.Arguments)
			if err != nil {
				return res, err
			}
			r.CallId = c.CallId // the model's id, not the host's
			if _, err := h.Record(ctx, agentID, &messages.Event{Turn: turn, Step: step, Kind: &messages.Event_ToolResult{ToolResult: r}}); err != nil {
				return res, err
			}
		}
	}
	res.StepLimit = true
	return res, nil
}

// sessionErr is the error a session answer carries.
func sessionErr(res any) error {
	switch r := res.(type) {
	case *agent.Recorded:
		return r.Err
	case *agent.TurnBegun:
		return r.Err
	case *agent.StepPrepared:
		return r.Err
	}
	return nil
}
