// Package inband finds in-band markers in a byte stream: RS (0x1e), a lead
// that includes a per-process nonce, a short body, RS. The shell and
// terminal actors use it to see their prompt markers in program output that
// may contain any bytes, split at any point across reads.
package inband
