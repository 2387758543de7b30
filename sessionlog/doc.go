// Package sessionlog is the agents' session log: for each agent, an
// append-only sequence of events (messages, tool calls and results,
// injected context, compaction markers), durable on local disk in one
// embedded database file (go.etcd.io/bbolt) that every agent of a host
// shares.
//
// # Durability
//
// Append returns once its event is committed: the file was synced, and the
// event survives kill -9 of the process and a crash of the machine. Appends
// from many goroutines at once share commits (bbolt's Batch), so a thousand
// agents appending together pay for a few syncs, not a thousand.
//
// # Layout
//
// The file holds a format bucket, which marks it as a session log, and one
// bucket per agent whose keys are the events' sequence numbers (8 bytes, big
// endian, from 1) and whose values are messages.Event in protobuf. Nothing
// is ever changed or deleted: a Compaction event shadows the events before
// it when a model request is built (Visible), and Scan still reads them all.
//
// # Errors
//
// A file that is not a session log, a record that does not decode, or a
// database that bbolt finds damaged gives an error that names the file (and
// the agent and the sequence number of the record), never a panic.
//
// # Concurrency
//
// A Log is safe for concurrent use. bbolt locks the file, so one process at
// a time opens it; Open waits up to Options.LockTimeout for another to let
// go. The package starts no goroutine of its own; bbolt's batching runs a
// commit on the goroutine of one of the appenders, or on a timer
// (Options.MaxBatchDelay).
package sessionlog
