package sessionlog_test

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/dsh-actors/dsh-actors/sessionlog"
)

// BenchmarkAppend measures acknowledged appends, in the same run: 1,000
// agents appending at once through the log, in an open loop (each agent 10
// appends a second: 10,000 a second in all, the target rate) and in a closed
// loop (each as fast as its commits come back); and bbolt's own rate with one
// committed transaction per append, one after the other. b.N is the number
// of appends; run with -benchtime 30000x or more.
func BenchmarkAppend(b *testing.B) {
	const agents = 1000
	run := func(b *testing.B, perAgentRate float64) {
		l, err := sessionlog.Open(filepath.Join(b.TempDir(), "sessions.db"), sessionlog.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		lat := make([][]time.Duration, agents)
		b.ResetTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for a := range agents {
			n := b.N / agents
			if a < b.N%agents {
				n++
			}
			wg.Go(func() {
				id := fmt.Sprint("agent-", a)
				var every time.Duration
				next := start
				if perAgentRate > 0 {
					every = time.Duration(float64(time.Second) / perAgentRate)
					next = start.Add(time.Duration(a) * every / agents) // spread the agents' phases
				}
				for i := range n {
					if every > 0 {
						time.Sleep(time.Until(next))
						next = next.Add(every)
					}
					t0 := time.Now()
					if _, err := l.Append(id, user(fmt.Sprint("event ", i))); err != nil {
						b.Error(err)
						return
					}
					lat[a] = append(lat[a], time.Since(t0))
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		all := slices.Concat(lat...)
		slices.Sort(all)
		if len(all) > 0 {
			b.ReportMetric(float64(len(all))/elapsed.Seconds(), "appends/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1e3, "p50_ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1e3, "p99_ms")
			b.ReportMetric(float64(all[len(all)-1].Microseconds())/1e3, "max_ms")
		}
	}
	b.Run("log_1000_agents_open_loop_10k_per_s", func(b *testing.B) { run(b, 10) })
	b.Run("log_1000_agents_closed_loop", func(b *testing.B) { run(b, 0) })
	b.Run("bbolt_commit_each", func(b *testing.B) {
		db, err := bolt.Open(filepath.Join(b.TempDir(), "plain.db"), 0o600, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		data, _ := proto.Marshal(user("event"))
		b.ResetTimer()
		start := time.Now()
		for i := range b.N {
			err := db.Update(func(tx *bolt.Tx) error {
				bk, err := tx.CreateBucketIfNotExists([]byte(fmt.Sprint("agent-", i%1000)))
				if err != nil {
					return err
				}
				var k [8]byte
				binary.BigEndian.PutUint64(k[:], uint64(i))
				return bk.Put(k[:], data)
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
	})
}
