// Package host is the public API for embedding dsh-actors: start a host,
// get agents by id, call their tools, stop them.
//
//	h, err := host.Start(host.Options{})
//	...
//	defer h.Stop(ctx)
//	res, err := h.Bash(ctx, "agent-1", shell.Args{Command: "ls"})
//	raw, err := h.Call(ctx, "agent-1", "bash", json.RawMessage(`{"command":"pwd"}`))
//
// A Host is an actor (the parent of every agent) plus this handle. It runs
// on an actor system the embedding program passes in, or on one of its own.
// Agents are spawned on first use and keep their state (their shell) until
// they are stopped.
//
// # Calls
//
// Call takes a tool name and JSON arguments, as a model produced them, and
// returns the tool's result: text for the model, an error flag, and
// structured data. Tool failures are results; Go errors are for the call
// itself (a bad agent id, a stopped host, a cancelled context). Cancelling
// the context withdraws the call, and the tool stops it as it documents.
// Calls of one agent are served in the order they arrive.
//
// # Stopping
//
// StopAgent and Stop return only when the actors are gone and every process
// they started has been killed and reaped.
//
// # Dispatch
//
// Every actor of a host runs on the goroutine that sends it a message (a
// synchronized dispatcher) instead of a goroutine per mailbox activation.
// That halves the cost of a call, and is safe because no Receive blocks.
//
// # Goroutines
//
// The host starts one goroutine per stopped agent, which waits for the
// agent's processes to be reaped and then answers StopAgent; Stop waits for
// all of them. Call starts none: it waits for the reply in its caller's
// goroutine.
package host
