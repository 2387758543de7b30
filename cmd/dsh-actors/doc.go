// Command dsh-actors gives LLM agents real terminals: a persistent bash per
// agent, each agent and shell a supervised actor.
//
//	dsh-actors call [--config FILE]          tool calls as JSON lines on stdin, results on stdout
//	dsh-actors bench shell [--json] [...]    latency of the bash tool next to the floor
//	dsh-actors bench terminal [--json] [...] latency of the terminal tools next to the floor
//
// Run `dsh-actors help` for the details.
package main
