// Package bench holds the end-to-end benchmarks behind `dsh-actors bench`:
// each scenario runs through the whole runtime (host API, agent, shell or
// terminal actor, PTY, program) interleaved, sample by sample, with its
// floor: the same program on a bare PTY driven from one goroutine with no
// actors. Interleaving lets both see the same machine, so the ratio of the
// medians is the figure to quote; absolute figures move with the machine's
// load.
//
// RunShell measures the bash tool (spawn+init+first echo, echo, pwd, and
// the calls per second of many agents at once); RunTerminal measures
// terminal_open of bash and python3 and a python3 round trip, and counts the
// readiness reasons.
//
// # Goroutines
//
// The throughput run starts one goroutine per agent and waits for all of
// them; the floors run on the caller's goroutine. Every process a scenario
// starts is killed before it returns.
package bench
