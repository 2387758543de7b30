// Package tasks runs background sends: terminal_send with
// run_in_background, and the task_output, task_kill and task_list tools.
//
// A Registry actor (one per agent) enforces the task limit (maxTasks) and
// spawns one task actor per background send. The task takes its terminal's
// send reservation and types the input before the task id is returned, so a
// task id always means a send that is under way. The terminal streams the
// output that follows to the task and tells it when the program is ready
// again, which releases the reservation.
//
// task_output returns only output not returned before (the latest output is
// kept within a bound if nobody collects it), optionally waiting for the
// task to finish or to print something new; and the final status once done.
// task_kill sends SIGINT to the terminal's foreground group, then SIGTERM and
// SIGKILL, killGraceMs apart, until the terminal is ready again; if even
// that fails it releases the reservation. Finished tasks are remembered (the
// most recent 256) so their last output can still be collected.
//
// # Messages
//
// Registry: Start, Output, Kill, List from the agent (each answered with a
// *messages.ToolResult to its sender), status reports from its tasks,
// *actor.Terminated. Task: *terminal.Reserved, *terminal.Busy,
// *terminal.TaskEvent from its terminal; Output and Kill forwarded by the
// registry; its own timer ticks.
//
// # Goroutines
//
// None of its own; timers are time.AfterFunc timers, stopped when a task
// stops.
package tasks
