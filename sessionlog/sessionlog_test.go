package sessionlog_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/dsh-actors/dsh-actors/internal/testkit"
	"github.com/dsh-actors/dsh-actors/messages"
	"github.com/dsh-actors/dsh-actors/sessionlog"
)

func TestMain(m *testing.M) {
	if os.Getenv("SESSIONLOG_APPENDER") != "" {
		appender(os.Getenv("SESSIONLOG_APPENDER"))
		return
	}
	goleak.VerifyTestMain(m)
}

func open(t *testing.T, path string) *sessionlog.Log {
	t.Helper()
	l, err := sessionlog.Open(path, sessionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func user(text string) *messages.Event {
	return &messages.Event{Kind: &messages.Event_User{User: &messages.UserMessage{Text: text}}}
}

func texts(t *testing.T, recs []sessionlog.Record) string {
	t.Helper()
	var out []string
	for _, r := range recs {
		switch k := r.Event.Kind.(type) {
		case *messages.Event_User:
			out = append(out, fmt.Sprintf("%d:%s", r.Seq, k.User.Text))
		case *messages.Event_Compaction:
			out = append(out, fmt.Sprintf("%d:compaction(%d,%s)", r.Seq, k.Compaction.Upto, k.Compaction.Summary))
		default:
			out = append(out, fmt.Sprintf("%d:%T", r.Seq, k))
		}
	}
	return strings.Join(out, " ")
}

func scanAll(t *testing.T, l *sessionlog.Log, agent string) []sessionlog.Record {
	t.Helper()
	var recs []sessionlog.Record
	if err := l.Scan(agent, 1, func(r sessionlog.Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestAppendsAreNumberedPerAgentAndSurviveReopening(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	l, err := sessionlog.Open(path, sessionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range []string{"a", "b", "a", "a", "b"} {
		seq, err := l.Append(a, user(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int]uint64{0: 1, 1: 1, 2: 2, 3: 3, 4: 2}[i]; seq != want {
			t.Fatalf("append %d to %s: seq %d, want %d", i, a, seq, want)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append("a", user("late")); !errors.Is(err, sessionlog.ErrClosed) {
		t.Fatalf("append after Close: %v, want ErrClosed", err)
	}
	l = open(t, path)
	if got := texts(t, scanAll(t, l, "a")); got != "1:0 2:2 3:3" {
		t.Fatalf("a after reopening: %s", got)
	}
	if seq, err := l.Append("a", user("4")); err != nil || seq != 4 {
		t.Fatalf("append after reopening: %d, %v; want 4", seq, err)
	}
	agents, err := l.Agents()
	if err != nil || strings.Join(agents, ",") != "a,b" {
		t.Fatalf("agents %v, %v", agents, err)
	}
	if recs := scanAll(t, l, "nobody"); len(recs) != 0 {
		t.Fatalf("an agent with no log: %v", recs)
	}
	if r := scanAll(t, l, "b")[0]; r.Event.TimeUnixNano == 0 {
		t.Fatal("the event was not stamped with its time")
	}
}

func TestCompactionShadowsButNeverDeletes(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "sessions.db"))
	for i := 1; i <= 4; i++ {
		l.Append("a", user(fmt.Sprint("m", i)))
	}
	compact := func(upto uint64, summary string) (uint64, error) {
		return l.Append("a", &messages.Event{Kind: &messages.Event_Compaction{Compaction: &messages.Compaction{Upto: upto, Summary: summary}}})
	}
	if _, err := compact(3, "s1"); err != nil { // seq 5: shadows 1 and 2
		t.Fatal(err)
	}
	l.Append("a", user("m6"))
	vis, err := l.Visible("a")
	if err != nil {
		t.Fatal(err)
	}
	if got := texts(t, vis); got != "5:compaction(3,s1) 3:m3 4:m4 6:m6" {
		t.Fatalf("visible after one compaction: %s", got)
	}
	if _, err := compact(6, "s2"); err != nil { // seq 7
		t.Fatal(err)
	}
	vis, _ = l.Visible("a")
	if got := texts(t, vis); got != "7:compaction(6,s2) 6:m6" {
		t.Fatalf("visible after a second compaction: %s", got)
	}
	if got := texts(t, scanAll(t, l, "a")); got != "1:m1 2:m2 3:m3 4:m4 5:compaction(3,s1) 6:m6 7:compaction(6,s2)" {
		t.Fatalf("the raw log: %s", got)
	}
	if _, err := compact(99, "future"); err == nil || !strings.Contains(err.Error(), "past itself") {
		t.Fatalf("a compaction of events that do not exist: %v", err)
	}
	if got := len(scanAll(t, l, "a")); got != 7 {
		t.Fatalf("the refused compaction was stored: %d records", got)
	}
}

func TestBadAgentIDsAndEventsAreRefused(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "sessions.db"))
	for _, id := range []string{"", strings.Repeat("x", sessionlog.MaxAgentIDLen+1), "bad\xff"} {
		if _, err := l.Append(id, user("x")); err == nil {
			t.Errorf("agent id %q accepted", id)
		}
	}
	if _, err := l.Append("a", nil); err == nil {
		t.Error("a nil event accepted")
	}
}

func TestForeignAndDamagedFilesAreNamedNeverAPanic(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte(strings.Repeat("not a database\n", 1000)), 0o600)
	if _, err := sessionlog.Open(text, sessionlog.Options{}); err == nil || !strings.Contains(err.Error(), text) || !strings.Contains(err.Error(), "not a session log") {
		t.Fatalf("a text file: %v", err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("theirs")); return err })
	db.Close()
	if _, err := sessionlog.Open(other, sessionlog.Options{}); err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "another program") {
		t.Fatalf("another program's bbolt file: %v", err)
	}

	// A record that is not an event, and a key that is not a number.
	path := filepath.Join(dir, "sessions.db")
	l, err := sessionlog.Open(path, sessionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Append("a", user("fine"))
	l.Close()
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("agents")).Bucket([]byte("a"))
		b.Put([]byte{0, 0, 0, 0, 0, 0, 0, 2}, []byte{0xff, 0xff, 0xff})
		return tx.Bucket([]byte("agents")).Bucket([]byte("a")).Put([]byte("zz"), []byte("x"))
	})
	db.Close()
	l = open(t, path)
	err = l.Scan("a", 1, func(sessionlog.Record) error { return nil })
	var ce *sessionlog.CorruptError
	if !errors.As(err, &ce) || ce.Seq != 2 || ce.Agent != "a" || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "record 2") {
		t.Fatalf("a record that is not an event: %v", err)
	}
	err = l.Scan("a", 3, func(sessionlog.Record) error { return nil })
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "not a sequence number") {
		t.Fatalf("a key that is not a sequence number: %v", err)
	}
	l.Close()

	// Bytes overwritten anywhere in the file: an error or a good read,
	// never a panic (bbolt panics on some damage; the log must not).
	good, _ := os.ReadFile(path)
	for off := 0; off < len(good); off += 509 {
		bad := append([]byte(nil), good...)
		for i := off; i < off+64 && i < len(bad); i++ {
			bad[i] ^= 0x5a
		}
		p := filepath.Join(dir, fmt.Sprintf("damaged-%d.db", off))
		os.WriteFile(p, bad, 0o600)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("damage at %d: panic %v", off, r)
				}
			}()
			l, err := sessionlog.Open(p, sessionlog.Options{})
			if err != nil {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("damage at %d: %v does not name the file", off, err)
				}
				return
			}
			defer l.Close()
			if err := l.Scan("a", 1, func(sessionlog.Record) error { return nil }); err != nil && !strings.Contains(err.Error(), p) {
				t.Errorf("damage at %d: %v does not name the file", off, err)
			}
			if _, err := l.Append("a", user("more")); err != nil && !strings.Contains(err.Error(), p) {
				t.Errorf("damage at %d: %v does not name the file", off, err)
			}
		}()
	}
}

func TestASecondOpenOfTheFileWaitsThenSaysWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	open(t, path)
	_, err := sessionlog.Open(path, sessionlog.Options{LockTimeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "another process holds it open") {
		t.Fatalf("a second open: %v", err)
	}
}

// Many goroutines append to a few agents at once: every acknowledged append
// is there with its own event, and each agent's numbers run 1..n with no
// gap.
func TestConcurrentAppendsAreAllThereInOrder(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "sessions.db"))
	const workers, each = 40, 50
	var mu sync.Mutex
	acked := map[string]map[uint64]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			agent := fmt.Sprint("agent-", w%7)
			for i := range each {
				text := fmt.Sprintf("w%d-%d", w, i)
				seq, err := l.Append(agent, user(text))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if acked[agent] == nil {
					acked[agent] = map[uint64]string{}
				}
				if prev, dup := acked[agent][seq]; dup {
					t.Errorf("%s seq %d given to %s and %s", agent, seq, prev, text)
				}
				acked[agent][seq] = text
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := 0
	for agent, want := range acked {
		recs := scanAll(t, l, agent)
		for i, r := range recs {
			if r.Seq != uint64(i+1) {
				t.Fatalf("%s: record %d has seq %d", agent, i, r.Seq)
			}
			if got := r.Event.GetUser().GetText(); got != want[r.Seq] {
				t.Fatalf("%s seq %d: %q, acknowledged as %q", agent, r.Seq, got, want[r.Seq])
			}
		}
		if len(recs) != len(want) {
			t.Fatalf("%s: %d records, %d acknowledged", agent, len(recs), len(want))
		}
		total += len(recs)
	}
	if total != workers*each {
		t.Fatalf("%d records, want %d", total, workers*each)
	}
}

// appender is the child process of TestAcknowledgedAppendsSurviveKill9: it
// appends from several goroutines and prints each acknowledged append.
func appender(path string) {
	l, err := sessionlog.Open(path, sessionlog.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			agent := fmt.Sprint("agent-", w%4)
			for i := 0; ; i++ {
				text := fmt.Sprintf("w%d-%d", w, i)
				seq, err := l.Append(agent, user(text))
				if err != nil {
					fmt.Println("error", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Fprintf(out, "%s %d %s\n", agent, seq, text)
				out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func TestAcknowledgedAppendsSurviveKill9(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	acked := testkit.KillMidStream(t, "SESSIONLOG_APPENDER="+path, 2000)
	l := open(t, path)
	for agent, want := range acked {
		got := map[uint64]string{}
		for _, r := range scanAll(t, l, agent) {
			got[r.Seq] = r.Event.GetUser().GetText()
		}
		for seq, text := range want {
			if got[seq] != text {
				t.Fatalf("%s seq %d: acknowledged %q, after kill -9 %q", agent, seq, text, got[seq])
			}
		}
	}
	// And the log goes on where it was.
	if _, err := l.Append("agent-0", user("after")); err != nil {
		t.Fatal(err)
	}
}

// A file cut short at any length gives an error naming it, never a crash
// (bbolt reads through a memory map, and past the end of the file the
// process once died of SIGBUS).
func TestATruncatedFileIsAnErrorNotACrash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	l, err := sessionlog.Open(path, sessionlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		l.Append(fmt.Sprint("agent-", i%30), user(strings.Repeat("x", 500)))
	}
	l.Close()
	good, _ := os.ReadFile(path)
	for size := 4096; size < len(good); size += 4096 {
		p := filepath.Join(dir, fmt.Sprintf("cut-%d.db", size))
		os.WriteFile(p, good[:size], 0o600)
		l, err := sessionlog.Open(p, sessionlog.Options{})
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("cut at %d: %v does not name the file", size, err)
			}
			continue
		}
		for i := range 30 {
			l.Scan(fmt.Sprint("agent-", i), 1, func(sessionlog.Record) error { return nil })
		}
		l.Close()
	}
}

// A scan's callback may append (a listener reads the log and injects): the
// read transaction is not held while it runs. It once deadlocked the file.
func TestAppendingFromAScanDoesNotDeadlock(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "sessions.db"))
	for i := range 600 {
		l.Append("a", user(fmt.Sprint(i)))
	}
	done := make(chan error, 1)
	go func() {
		n := 0
		done <- l.Scan("a", 1, func(sessionlog.Record) error {
			if n++; n%100 == 0 {
				_, err := l.Append("b", user(strings.Repeat("y", 100000))) // grows the file
				return err
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a scan that appends did not end")
	}
	var back []uint64
	l.ScanBackward("a", func(r sessionlog.Record) error { back = append(back, r.Seq); return nil })
	if len(back) != 600 || back[0] != 600 || back[599] != 1 {
		t.Fatalf("scanning backward across chunks: %d records, from %v", len(back), back[:min(3, len(back))])
	}
}

func TestTurnNumbersOnlyGrow(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "sessions.db"))
	begin := func() uint32 {
		t.Helper()
		turn, _, err := l.BeginTurn("a", user("go"))
		if err != nil {
			t.Fatal(err)
		}
		return turn
	}
	for want := uint32(1); want <= 3; want++ {
		if got := begin(); got != want {
			t.Fatalf("turn %d, want %d", got, want)
		}
	}
	// A late event of an earlier turn does not make its number come again.
	late := user("late result")
	late.Turn = 1
	if _, err := l.Append("a", late); err != nil {
		t.Fatal(err)
	}
	if got := begin(); got != 4 {
		t.Fatalf("after a late event of turn 1: turn %d, want 4", got)
	}
	for _, turn := range []uint32{6, 4294967295} {
		ev := user("from the future")
		ev.Turn = turn
		if _, err := l.Append("a", ev); err == nil {
			t.Errorf("an event of turn %d was taken with the latest at 4", turn)
		}
	}
	if got, err := l.LatestTurn("a"); got != 4 || err != nil {
		t.Fatalf("latest turn %d, %v", got, err)
	}
	// The log's clock stamps every event, whatever time it was given.
	ev := user("stamped")
	ev.TimeUnixNano = time.Now().Add(time.Hour).UnixNano()
	before := time.Now().UnixNano()
	l.Append("a", ev)
	if ev.TimeUnixNano < before || ev.TimeUnixNano > time.Now().UnixNano() {
		t.Fatal("an event kept the time it was given")
	}
}
