package admission

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const forever = time.Hour

// recorder collects the order in which tickets are admitted later.
type recorder struct {
	mu    sync.Mutex
	order []int
	ch    chan int
}

func newRecorder() *recorder { return &recorder{ch: make(chan int, 1000)} }

func (r *recorder) admitted(i int) func(*Ticket) {
	return func(*Ticket) {
		r.mu.Lock()
		r.order = append(r.order, i)
		r.mu.Unlock()
		r.ch <- i
	}
}

func (r *recorder) next(t *testing.T) int {
	t.Helper()
	select {
	case i := <-r.ch:
		return i
	case <-time.After(10 * time.Second):
		t.Fatal("nobody was admitted within 10s")
		return -1
	}
}

func TestAdmitsUpToItsSlotsAtOnce(t *testing.T) {
	g := New(3, forever)
	r := newRecorder()
	var held []*Ticket
	for i := range 3 {
		tk, now := g.Enter(r.admitted(i))
		if !now {
			t.Fatalf("ticket %d waits with a slot free", i)
		}
		held = append(held, tk)
	}
	fourth, now := g.Enter(r.admitted(3))
	if now {
		t.Fatal("a fourth ticket was admitted with three slots")
	}
	held[1].Leave()
	if got := r.next(t); got != 3 {
		t.Fatalf("admitted %d, want 3", got)
	}
	fourth.Leave()
	held[0].Leave()
	held[2].Leave()
	if g.free != 3 {
		t.Fatalf("%d slots free after every ticket left, want 3", g.free)
	}
}

func TestWaitersComeInInArrivalOrder(t *testing.T) {
	g := New(1, forever)
	first, _ := g.Enter(nil)
	r := newRecorder()
	tickets := make([]*Ticket, 200)
	for i := range tickets {
		tickets[i], _ = g.Enter(r.admitted(i))
	}
	// A new arrival waits behind them even when a slot comes free for a
	// moment: nobody jumps the queue.
	first.Leave()
	late, now := g.Enter(nil)
	if now {
		t.Fatal("a late arrival was admitted before the queue")
	}
	defer late.Leave()
	for want := range tickets {
		if got := r.next(t); got != want {
			t.Fatalf("admitted %d, want %d (order so far %v)", got, want, r.order)
		}
		tickets[want].Leave()
	}
}

func TestLeaveWithdrawsAWaiterAndIsIdempotent(t *testing.T) {
	g := New(1, forever)
	r := newRecorder()
	first, _ := g.Enter(r.admitted(0))
	second, _ := g.Enter(r.admitted(1))
	third, _ := g.Enter(r.admitted(2))
	second.Leave()
	second.Leave()
	first.Leave()
	first.Leave() // must not free a second slot
	if got := r.next(t); got != 2 {
		t.Fatalf("admitted %d, want 2 (1 was withdrawn)", got)
	}
	if extra, now := g.Enter(nil); now {
		t.Fatal("a double Leave freed a slot that third holds")
	} else {
		extra.Leave()
	}
	var nilTicket *Ticket
	nilTicket.Leave() // a nil gate's tickets
	third.Leave()
}

func TestANilGateAdmitsAtOnce(t *testing.T) {
	var g *Gate
	tk, now := g.Enter(func(*Ticket) { t.Error("admitted called for a nil gate") })
	if !now || tk != nil || g.Slots() != 0 {
		t.Fatalf("nil gate: ticket %v, now %v, slots %d", tk, now, g.Slots())
	}
	tk.Leave()
}

// Leases run on the clock, so these tests run in a synctest bubble: time
// moves only when every goroutine in it is blocked, and exactly as far as
// the next timer.
func TestALeaseEndsOnlyWhileSomebodyWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(1, 10*time.Millisecond)
		long, _ := g.Enter(nil)
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if long.Lapsed() {
			t.Fatal("a lease ended with nobody waiting")
		}
		// Its lease is long over: a newcomer is let in at once.
		var admitted atomic.Bool
		next, now := g.Enter(func(*Ticket) { admitted.Store(true) })
		if now {
			t.Fatal("admitted by Enter while the slot is held")
		}
		synctest.Wait()
		if !admitted.Load() || !long.Lapsed() {
			t.Fatalf("after the holder's lease: admitted %v, holder lapsed %v", admitted.Load(), long.Lapsed())
		}
		// The lapsed ticket holds nothing: leaving frees no slot.
		long.Leave()
		if extra, now := g.Enter(nil); now {
			t.Fatal("leaving a lapsed ticket freed the slot the next one holds")
		} else {
			extra.Leave()
		}
		next.Leave()
	})
}

func TestALeaseRunsFromAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(1, 10*time.Millisecond)
		first, _ := g.Enter(nil)
		time.Sleep(7 * time.Millisecond)
		var admitted atomic.Bool
		waiter, _ := g.Enter(func(*Ticket) { admitted.Store(true) })
		time.Sleep(2 * time.Millisecond) // 9 ms into first's lease
		synctest.Wait()
		if admitted.Load() {
			t.Fatal("admitted before first's lease (10 ms) ended")
		}
		time.Sleep(2 * time.Millisecond) // 11 ms
		synctest.Wait()
		if !admitted.Load() {
			t.Fatal("not admitted 1 ms after first's lease ended")
		}
		first.Leave()
		waiter.Leave()
	})
}

// Many goroutines enter and leave at random, some withdrawing while they
// wait: never more tickets are seen to hold a slot than there are slots,
// admitted is called at most once a ticket, and every slot is free at the
// end.
func TestSlotsAreNeverOverbookedNorLost(t *testing.T) {
	const slots, workers, rounds = 4, 32, 300
	g := New(slots, forever)
	var inside, most atomic.Int64
	in := func() {
		n := inside.Add(1)
		if n > slots {
			t.Errorf("%d tickets hold a slot, with %d slots", n, slots)
		}
		if n > most.Load() {
			most.Store(n)
		}
		// Hold the slot across a yield, so that others run meanwhile
		// even on a loaded machine (else the test may not contend).
		runtime.Gosched()
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				var calls atomic.Int32
				ch := make(chan *Ticket, 1)
				tk, now := g.Enter(func(got *Ticket) {
					calls.Add(1)
					ch <- got
				})
				switch {
				case now:
				case rand.IntN(4) == 0:
					tk.Leave() // withdraw, or give back if admitted meanwhile
					continue
				default:
					if got := <-ch; got != tk {
						t.Error("admitted was given another ticket")
					}
				}
				if !tk.Holds() {
					t.Error("an admitted ticket that nobody left holds no slot")
				}
				in()
				inside.Add(-1)
				tk.Leave()
				if tk.Holds() {
					t.Error("a ticket holds its slot after Leave")
				}
				if calls.Load() > 1 {
					t.Errorf("admitted called %d times", calls.Load())
				}
			}
		})
	}
	wg.Wait()
	if g.free != slots || g.queue.Len() != 0 || g.held.Len() != 0 {
		t.Fatalf("at the end: %d free, %d waiting, %d held", g.free, g.queue.Len(), g.held.Len())
	}
	if most.Load() < 2 {
		t.Fatalf("at most %d held at once: the test did not contend", most.Load())
	}
}

// admitted runs where an actor's message may be handled at once (a
// synchronized dispatcher): it can leave and enter again without a
// deadlock. It once ran with the gate's lock held, and a CI run hung.
func TestAdmittedMayUseTheGate(t *testing.T) {
	g := New(1, forever)
	first, _ := g.Enter(nil)
	done := make(chan struct{})
	var again *Ticket
	g.Enter(func(tk *Ticket) {
		tk.Leave()
		again, _ = g.Enter(nil)
		close(done)
	})
	left := make(chan struct{})
	go func() { first.Leave(); close(left) }()
	select {
	case <-left:
	case <-time.After(10 * time.Second):
		t.Fatal("Leave did not return: admitted deadlocked on the gate")
	}
	<-done
	if !again.Holds() {
		t.Fatal("the ticket entered from admitted holds no slot")
	}
	again.Leave()
}
