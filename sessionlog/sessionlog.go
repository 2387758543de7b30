package sessionlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"google.golang.org/protobuf/proto"

	"github.com/dsh-actors/dsh-actors/messages"
)

// Options configure Open. The zero value is ready to use.
type Options struct {
	// LockTimeout bounds the wait for another process's lock on the file;
	// 0 means 2 s.
	LockTimeout time.Duration
	// MaxBatchDelay is how long an append waits for others to share its
	// commit; 0 means 2 ms.
	MaxBatchDelay time.Duration
	// MaxBatchSize is how many appends one commit takes at most; 0 means
	// 1,000.
	MaxBatchSize int
}

// Log is an open session log file.
type Log struct {
	db   *bolt.DB
	path string
}

// Record is one event and its sequence number in its agent's log.
type Record struct {
	Seq   uint64
	Event *messages.Event
}

// formatBucket marks a session log; its formatKey holds formatVersion.
var (
	formatBucket  = []byte("dsh-actors.sessionlog")
	formatKey     = []byte("format")
	formatVersion = []byte("1")
	agentsBucket  = []byte("agents")
)

// MaxAgentIDLen bounds an agent id (a bucket name).
const MaxAgentIDLen = 1024

// ErrClosed is returned by a Log after Close.
var ErrClosed = errors.New("sessionlog: the log is closed")

// Open opens the session log at path, creating it (and its directory) when
// it does not exist.
func Open(path string, opts Options) (l *Log, err error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = 2 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("session log %s: %w", path, err)
	}
	defer recoverInto(&err, path, "")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("session log %s: another process holds it open (waited %v for its lock)", path, opts.LockTimeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return nil, fmt.Errorf("session log %s: not a session log: the file is not a bbolt database this version can read (%v)", path, err)
	case err != nil:
		return nil, fmt.Errorf("session log %s: %w", path, err)
	}
	db.MaxBatchDelay = 2 * time.Millisecond
	if opts.MaxBatchDelay > 0 {
		db.MaxBatchDelay = opts.MaxBatchDelay
	}
	if opts.MaxBatchSize > 0 {
		db.MaxBatchSize = opts.MaxBatchSize
	}
	l = &Log{db: db, path: path}
	if err := l.checkFormat(); err != nil {
		db.Close()
		return nil, err
	}
	return l, nil
}

// checkFormat marks a new file as a session log, and refuses a file that is
// another program's bbolt database or another format version.
func (l *Log) checkFormat() error {
	return l.db.Update(func(tx *bolt.Tx) error {
		f := tx.Bucket(formatBucket)
		if f == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("session log %s: not a session log: a bbolt database without the %q bucket (another program's?)", l.path, formatBucket)
			}
			if f, err := tx.CreateBucket(formatBucket); err != nil {
				return err
			} else if err := f.Put(formatKey, formatVersion); err != nil {
				return err
			}
			_, err := tx.CreateBucket(agentsBucket)
			return err
		}
		if v := f.Get(formatKey); string(v) != string(formatVersion) {
			return fmt.Errorf("session log %s: format version %q, and this program reads %q", l.path, v, formatVersion)
		}
		if tx.Bucket(agentsBucket) == nil {
			return fmt.Errorf("session log %s: damaged: the %q bucket is missing", l.path, agentsBucket)
		}
		return nil
	})
}

// Path is the file's path.
func (l *Log) Path() string { return l.path }

// Close closes the file; appends still waiting for their commit finish
// first.
func (l *Log) Close() error { return l.db.Close() }

// CheckAgentID reports why id cannot name an agent's log, or nil.
func CheckAgentID(id string) error {
	switch {
	case id == "":
		return errors.New("sessionlog: the agent id is empty")
	case len(id) > MaxAgentIDLen:
		return fmt.Errorf("sessionlog: the agent id is %d bytes long (at most %d)", len(id), MaxAgentIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("sessionlog: the agent id %q is not valid UTF-8", id)
	}
	return nil
}

// Append adds ev to the end of agent's log and returns its sequence number
// once it is committed. It stamps ev's time when it has none. A Compaction
// may only shadow events that exist (upto at most its own sequence number).
func (l *Log) Append(agent string, ev *messages.Event) (seq uint64, err error) {
	if err := CheckAgentID(agent); err != nil {
		return 0, err
	}
	if ev == nil {
		return 0, errors.New("sessionlog: append of a nil event")
	}
	if ev.TimeUnixNano == 0 {
		ev.TimeUnixNano = time.Now().UnixNano()
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		return 0, fmt.Errorf("sessionlog: encoding the event: %w", err)
	}
	defer recoverInto(&err, l.path, agent)
	// bbolt may run fn more than once (a batch is retried without a failing
	// member): only what the last successful run set counts.
	err = l.db.Batch(func(tx *bolt.Tx) error {
		b, err := tx.Bucket(agentsBucket).CreateBucketIfNotExists([]byte(agent))
		if err != nil {
			return err
		}
		n, err := b.NextSequence()
		if err != nil {
			return err
		}
		if c := ev.GetCompaction(); c != nil && c.Upto > n {
			return fmt.Errorf("sessionlog: a compaction at %d cannot shadow up to %d, past itself", n, c.Upto)
		}
		seq = n
		return b.Put(key(n), data)
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return 0, ErrClosed
	}
	if err != nil {
		return 0, fmt.Errorf("session log %s: appending to %q: %w", l.path, agent, err)
	}
	return seq, nil
}

// Scan calls fn for each record of agent's log from sequence number from
// (1 for all) in order, until fn returns an error, which Scan returns.
// Compacted events are included: Scan reads the raw log. An agent with no
// log has no records.
func (l *Log) Scan(agent string, from uint64, fn func(Record) error) (err error) {
	defer recoverInto(&err, l.path, agent)
	err = l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(agentsBucket).Bucket([]byte(agent))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Seek(key(max(from, 1))); k != nil; k, v = c.Next() {
			r, err := l.decode(agent, k, v)
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// ScanBackward is Scan from the newest record to the oldest.
func (l *Log) ScanBackward(agent string, fn func(Record) error) (err error) {
	defer recoverInto(&err, l.path, agent)
	err = l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(agentsBucket).Bucket([]byte(agent))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			r, err := l.decode(agent, k, v)
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// Visible is what a model request is built from: when the log holds a
// compaction, the newest one (its summary stands for what it shadows) and
// the events from its upto on, without older compactions; else every event.
func (l *Log) Visible(agent string) ([]Record, error) {
	var all []Record
	if err := l.Scan(agent, 1, func(r Record) error { all = append(all, r); return nil }); err != nil {
		return nil, err
	}
	last := -1
	for i, r := range all {
		if r.Event.GetCompaction() != nil {
			last = i
		}
	}
	if last < 0 {
		return all, nil
	}
	c := all[last]
	out := []Record{c}
	for _, r := range all {
		if r.Seq >= c.Event.GetCompaction().Upto && r.Event.GetCompaction() == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// Agents lists the agents that have a log, in byte order.
func (l *Log) Agents() (ids []string, err error) {
	defer recoverInto(&err, l.path, "")
	err = l.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(agentsBucket).ForEachBucket(func(k []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	return ids, err
}

// CorruptError is a record that cannot be read.
type CorruptError struct {
	Path  string
	Agent string
	// Key is the record's key; Seq its sequence number when the key is one.
	Key []byte
	Seq uint64
	Err error
}

func (e *CorruptError) Error() string {
	where := fmt.Sprintf("record %d", e.Seq)
	if len(e.Key) != 8 {
		where = fmt.Sprintf("record with key %x (not a sequence number)", e.Key)
	}
	return fmt.Sprintf("session log %s: agent %q, %s: %v", e.Path, e.Agent, where, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

func (l *Log) decode(agent string, k, v []byte) (Record, error) {
	if len(k) != 8 {
		return Record{}, &CorruptError{Path: l.path, Agent: agent, Key: append([]byte(nil), k...), Err: errors.New("a key that is not 8 bytes")}
	}
	seq := binary.BigEndian.Uint64(k)
	if v == nil {
		return Record{}, &CorruptError{Path: l.path, Agent: agent, Key: k, Seq: seq, Err: errors.New("a bucket where an event should be")}
	}
	ev := &messages.Event{}
	if err := proto.Unmarshal(v, ev); err != nil {
		return Record{}, &CorruptError{Path: l.path, Agent: agent, Key: k, Seq: seq, Err: fmt.Errorf("not an event: %w", err)}
	}
	return Record{Seq: seq, Event: ev}, nil
}

func key(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// recoverInto turns a panic inside bbolt (it panics on some kinds of
// damage) into an error naming the file.
func recoverInto(err *error, path, agent string) {
	if p := recover(); p != nil {
		who := ""
		if agent != "" {
			who = fmt.Sprintf(" (agent %q)", agent)
		}
		*err = fmt.Errorf("session log %s%s: the database is damaged: %v", path, who, p)
	}
}
