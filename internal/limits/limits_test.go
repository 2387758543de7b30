package limits_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-actors/dsh-actors/internal/limits"
	"github.com/dsh-actors/dsh-actors/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// However many take at once, no more than the limit hold at a time, every
// refusal is counted and names the key, and a hold released twice is given
// back once.
func TestNeverMoreThanTheLimit(t *testing.T) {
	p := limits.NewPool(limits.Terminals, 3)
	var held, most atomic.Int64
	var wg sync.WaitGroup
	var refusals atomic.Uint64
	for range 16 {
		wg.Go(func() {
			for range 500 {
				h, err := p.Take()
				if err != nil {
					var le *limits.Error
					if !errors.As(err, &le) || le.Kind != limits.Terminals || !strings.Contains(err.Error(), "limits.terminals") {
						t.Errorf("refusal %v", err)
					}
					refusals.Add(1)
					continue
				}
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				held.Add(-1)
				h.Release()
				h.Release()
			}
		})
	}
	wg.Wait()
	if most.Load() > 3 {
		t.Errorf("%d held at once, limit 3", most.Load())
	}
	if p.InUse() != 0 || p.Refused() != refusals.Load() {
		t.Errorf("in use %d, refused %d (counted %d)", p.InUse(), p.Refused(), refusals.Load())
	}
}

// No limit counts but never refuses; a nil pool neither counts nor refuses.
func TestNoLimit(t *testing.T) {
	p := limits.NewPool(limits.Agents, 0)
	var hs []*limits.Hold
	for range 1000 {
		h, err := p.Take()
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if p.InUse() != 1000 {
		t.Fatalf("in use %d", p.InUse())
	}
	for _, h := range hs {
		h.Release()
	}
	var nilPool *limits.Pool
	h, err := nilPool.Take()
	if h != nil || err != nil {
		t.Fatalf("nil pool: %v %v", h, err)
	}
	h.Release()
}
