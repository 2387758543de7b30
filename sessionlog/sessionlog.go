package sessionlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
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
	// OnAppend, when set, is told of every append once it is answered: how
	// long it took (commit included) and its error. It runs on the
	// appender's goroutine and must not block.
	OnAppend func(took time.Duration, err error)
}

// Log is an open session log file.
type Log struct {
	db       *bolt.DB
	path     string
	onAppend func(time.Duration, error)
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
	// turnsBucket holds each agent's latest turn (4 bytes, big endian),
	// kept with every append: BeginTurn needs no scan of the log.
	turnsBucket = []byte("turns")
)

// MaxAgentIDLen bounds an agent id (a bucket name).
const MaxAgentIDLen = 1024

// ErrLocked: another process has the file open (bbolt takes an exclusive
// lock).
var ErrLocked = errors.New("another process holds it open")

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
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if err := checkSize(path); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("session log %s: %w (waited %v for its lock)", path, ErrLocked, opts.LockTimeout)
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
	l = &Log{db: db, path: path, onAppend: opts.OnAppend}
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
			if _, err := tx.CreateBucket(turnsBucket); err != nil {
				return err
			}
			_, err := tx.CreateBucket(agentsBucket)
			return err
		}
		if v := f.Get(formatKey); string(v) != string(formatVersion) {
			return fmt.Errorf("session log %s: format version %q, and this program reads %q", l.path, v, formatVersion)
		}
		for _, b := range [][]byte{agentsBucket, turnsBucket} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("session log %s: damaged: the %q bucket is missing", l.path, b)
			}
		}
		return nil
	})
}

// Path is the file's path.
func (l *Log) Path() string { return l.path }

// Close closes the file. An append not yet committed then fails with
// ErrClosed; no acknowledged append is lost.
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
// once it is committed. It stamps ev with the time of the append. A
// Compaction may only shadow events that exist (upto at most its own
// sequence number); an event's turn may be at most one more than the
// latest turn in the log (it begins that turn).
func (l *Log) Append(agent string, ev *messages.Event) (seq uint64, err error) {
	return l.append(agent, ev, false)
}

// BeginTurn appends ev as the first event of the agent's next turn: its
// turn is set, in the same transaction, to one more than the latest in the
// log, so two turns begun at once get two numbers.
func (l *Log) BeginTurn(agent string, ev *messages.Event) (turn uint32, seq uint64, err error) {
	seq, err = l.append(agent, ev, true)
	return ev.Turn, seq, err
}

// LatestTurn is the highest turn of any event in the agent's log (0 for
// none).
func (l *Log) LatestTurn(agent string) (turn uint32, err error) {
	defer recoverInto(&err, l.path, agent)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err = l.db.View(func(tx *bolt.Tx) error {
		turn = latestTurn(tx, agent)
		return nil
	})
	return turn, l.closedErr(err)
}

func latestTurn(tx *bolt.Tx, agent string) uint32 {
	if v := tx.Bucket(turnsBucket).Get([]byte(agent)); len(v) == 4 {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (l *Log) append(agent string, ev *messages.Event, newTurn bool) (seq uint64, err error) {
	if l.onAppend != nil {
		start := time.Now()
		defer func() { l.onAppend(time.Since(start), err) }()
	}
	if err := CheckAgentID(agent); err != nil {
		return 0, err
	}
	if ev == nil {
		return 0, errors.New("sessionlog: append of a nil event")
	}
	// The log's own clock: a time given by the caller (in the past, or
	// ahead) would mislead whoever schedules by it.
	ev.TimeUnixNano = time.Now().UnixNano()
	if ev.Turn == math.MaxUint32 {
		return 0, fmt.Errorf("sessionlog: turn %d is the last there can be", ev.Turn)
	}
	defer recoverInto(&err, l.path, agent)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	// bbolt may run fn more than once (a batch is retried without a failing
	// member): only what the last successful run set counts.
	err = l.db.Batch(func(tx *bolt.Tx) error {
		latest := latestTurn(tx, agent)
		switch {
		case newTurn && latest == math.MaxUint32-1:
			return fmt.Errorf("sessionlog: agent %q has had every turn there can be", agent)
		case newTurn:
			ev.Turn = latest + 1
		case ev.Turn > latest+1:
			return fmt.Errorf("sessionlog: an event of turn %d, and the latest turn is %d (an event may begin the next turn, no later one)", ev.Turn, latest)
		}
		data, err := proto.Marshal(ev)
		if err != nil {
			return fmt.Errorf("sessionlog: encoding the event: %w", err)
		}
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
		if ev.Turn > latest {
			var t [4]byte
			binary.BigEndian.PutUint32(t[:], ev.Turn)
			if err := tx.Bucket(turnsBucket).Put([]byte(agent), t[:]); err != nil {
				return err
			}
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

// scanChunk is how many records one read transaction of a scan takes: fn
// runs between transactions, so it may append (an append waiting on a read
// transaction that waits on it would deadlock the file).
const scanChunk = 256

// Scan calls fn for each record of agent's log from sequence number from
// (1 for all) in order, until fn returns an error, which Scan returns.
// Compacted events are included: Scan reads the raw log. An agent with no
// log has no records. fn may append to the log; records appended during the
// scan may or may not be seen.
func (l *Log) Scan(agent string, from uint64, fn func(Record) error) error {
	next := max(from, 1)
	for {
		recs, err := l.chunk(agent, next, true)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(recs) < scanChunk {
			return nil
		}
		next = recs[len(recs)-1].Seq + 1
	}
}

// ScanBackward is Scan from the newest record to the oldest.
func (l *Log) ScanBackward(agent string, fn func(Record) error) error {
	next := uint64(math.MaxUint64)
	for {
		recs, err := l.chunk(agent, next, false)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(recs) < scanChunk || recs[len(recs)-1].Seq <= 1 {
			return nil
		}
		next = recs[len(recs)-1].Seq - 1
	}
}

// chunk reads up to scanChunk records from seq on (forward) or down
// (backward), in one read transaction.
func (l *Log) chunk(agent string, seq uint64, forward bool) (recs []Record, err error) {
	defer recoverInto(&err, l.path, agent)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err = l.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(agentsBucket).Bucket([]byte(agent))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var k, v []byte
		if forward {
			k, v = c.Seek(key(seq))
		} else if k, v = c.Seek(key(seq)); k == nil || binary.BigEndian.Uint64(k) > seq || len(k) != 8 {
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		for k != nil && len(recs) < scanChunk {
			r, err := l.decode(agent, k, v)
			if err != nil {
				return err
			}
			recs = append(recs, r)
			if forward {
				k, v = c.Next()
			} else {
				k, v = c.Prev()
			}
		}
		return nil
	})
	return recs, l.closedErr(err)
}

func (l *Log) closedErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// Visible is what a model request is built from: when the log holds a
// compaction, the newest one (its summary stands for what it shadows) and
// the events from its upto on, without older compactions; else every event.
// Only the part of the log it returns is read.
func (l *Log) Visible(agent string) ([]Record, error) {
	var last *Record
	stop := errors.New("found")
	err := l.ScanBackward(agent, func(r Record) error {
		if r.Event.GetCompaction() != nil {
			last = &r
			return stop
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return nil, err
	}
	var out []Record
	from := uint64(1)
	if last != nil {
		out, from = append(out, *last), last.Event.GetCompaction().Upto
	}
	err = l.Scan(agent, from, func(r Record) error {
		if r.Event.GetCompaction() == nil {
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// Agents lists the agents that have a log, in byte order.
func (l *Log) Agents() (ids []string, err error) {
	defer recoverInto(&err, l.path, "")
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
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

// checkSize refuses a file shorter than its own header says it is (cut
// short by a crash of the disk, or by a copy): bbolt would read past its end
// through its memory map, and the process would die of SIGBUS.
func checkSize(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("session log %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("session log %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("session log %s: not a regular file (%s)", path, st.Mode().Type())
	}
	if st.Size() == 0 {
		return nil // bbolt makes a new database in an empty file
	}
	// bbolt's meta pages: page 0 and page 1, each a 16-byte page header
	// then magic, version, page size, flags (4 bytes each), the root bucket
	// (16), the freelist page (8), the high-water page id (8), the
	// transaction id (8) and a checksum.
	const magic = 0xED0CDAED
	// meta reads the page size and the size the meta page at off needs;
	// zero when it is no meta page.
	meta := func(off int64) (pageSize, need int64) {
		var head [64]byte
		if n, _ := f.ReadAt(head[:], off); n < len(head) || binary.LittleEndian.Uint32(head[16:20]) != magic {
			return 0, 0
		}
		pageSize = int64(binary.LittleEndian.Uint32(head[24:28]))
		hwm := int64(binary.LittleEndian.Uint64(head[56:64]))
		if pageSize <= 0 || hwm <= 0 || hwm >= 1<<40 {
			return pageSize, 0
		}
		return pageSize, hwm * pageSize
	}
	pageSize, need := meta(0)
	if pageSize > 0 {
		_, need1 := meta(pageSize) // page 1 sits one page in
		need = max(need, need1)
	}
	if need > 0 && st.Size() < need {
		return fmt.Errorf("session log %s: cut short: the file has %d bytes and its header says %d (restore it from a copy, or move it away to start a new log)", path, st.Size(), need)
	}
	return nil
}
