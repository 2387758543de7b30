// Package metrics is the runtime's Prometheus instrumentation: one registry
// holding the project's own collectors, Go's and the process's, and
// protoactor's OpenTelemetry instruments.
//
// A host given a *Metrics (host.Options.Metrics) records every tool call
// (count by outcome, latency), the readiness reasons of terminal results,
// clipped output, shell resets by cause, actor failures by kind,
// reservation conflicts, session-log appends and their latency, and reports
// what it runs (agents, shells, terminals, tasks) against its limits at
// each scrape. Handler serves the registry at /metrics.
//
// Labels are closed sets (tool, outcome, reason, cause, kind), never ids: a
// value outside its set is recorded as "other", so no input can grow the
// number of series.
//
// protoactor's instruments use OpenTelemetry's global meter provider, one
// per process: the first Metrics made in a process installs it and carries
// them; later ones have the project's own collectors only.
//
// Every method is safe for concurrent use, and a nil *Metrics records
// nothing, so code instrumented with it needs no checks.
package metrics
