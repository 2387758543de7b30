package tasks

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/dsh-actors/dsh-actors/actors/terminal"
	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/internal/toolargs"
	"github.com/dsh-actors/dsh-actors/messages"
)

// Tool names.
const (
	ToolOutput = "task_output"
	ToolKill   = "task_kill"
	ToolList   = "task_list"
)

// OutputArgs are task_output's arguments.
type OutputArgs struct {
	TaskID string `json:"task_id" jsonschema:"the id terminal_send returned for a background send"`
	WaitMs *int64 `json:"wait_ms,omitempty" jsonschema:"wait up to this long for the task to finish or print something new"`
}

// KillArgs are task_kill's arguments.
type KillArgs struct {
	TaskID string `json:"task_id" jsonschema:"the id terminal_send returned for a background send"`
}

// Messages of the registry, from the agent. Each answers its sender with a
// *messages.ToolResult.
type (
	// Start reserves Terminal for a new task and types Input there; the
	// answer carries the task id, or says why it could not start.
	Start struct {
		CallID     string
		TerminalID string
		Terminal   *actor.PID
		Input      []byte
		// Text is what the model typed, for task_list.
		Text string
	}
	// Output returns the task's output not returned before.
	Output struct {
		CallID string
		Args   OutputArgs
		Wait   time.Duration
	}
	// Kill stops the task: SIGINT, then SIGTERM, then SIGKILL.
	Kill struct {
		CallID string
		TaskID string
	}
	// Cancel withdraws a call whose caller is gone: a waiting task_output
	// ends with no answer; a background send whose task id nobody may have
	// seen is stopped as task_kill would. Unknown ids are ignored.
	Cancel struct{ CallID string }
	// List lists the agent's tasks.
	List struct{ CallID string }
)

// status is what a task tells the registry when it changes.
type status struct {
	id      string
	running bool
	ready   terminal.Readiness
	started bool // the reservation was granted
}

// Options configure the registry.
type Options struct {
	Terminal terminal.Config
	Logger   *slog.Logger
	// PropsOptions are given to every task actor (dispatcher, middleware).
	PropsOptions []actor.PropsOption
	// Limits is the host's pool of running tasks; nil means no host limit.
	Limits *limits.Pool
}

// Props returns the props of a task registry.
func Props(opts Options, extra ...actor.PropsOption) *actor.Props {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	// A task that fails is stopped, never restarted: a restart would type
	// its input again.
	extra = append([]actor.PropsOption{actor.WithSupervisor(stopTasks)}, extra...)
	return actor.PropsFromProducer(func() actor.Actor {
		return &Registry{opts: opts, tasks: map[string]*entry{}}
	}, extra...)
}

var errorResult = messages.ErrorResult

// Specs returns the task tools as the model sees them; none when background
// sends are turned off.
func Specs(cfg terminal.Config) []toolargs.Spec {
	if !cfg.EnableRunInBackground {
		return nil
	}
	return []toolargs.Spec{
		{Name: ToolOutput, Schema: toolargs.Schema[OutputArgs](),
			Description: "Collect a background task's output that you have not seen yet, and whether it has finished; " +
				"wait_ms waits for it to finish or to print something new."},
		{Name: ToolKill, Schema: toolargs.Schema[KillArgs](),
			Description: "Stop a background task: the rest of its text is not typed, and its terminal's foreground program gets SIGINT, then SIGTERM and SIGKILL if it does not stop. " +
				"Answers once the program is proven back at its input with nothing of the task's text left (prompt or stdin_read), or says that the state is not known (unknown, killed). Frees the terminal."},
		{Name: ToolList, Schema: toolargs.Schema[terminal.NoArgs](),
			Description: "List your background tasks with their terminals and state."},
	}
}
