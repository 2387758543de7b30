package ptyproc

import (
	"sync/atomic"
	"testing"
)

// While readMu is held (a chunk being handed over), ReadPendingOr reads
// nothing and calls retry exactly once, after the holder lets go.
func TestReadPendingOrRetriesAfterTheDelivery(t *testing.T) {
	p, err := Start(Options{Path: "cat"}, func(m any) {
		if o, ok := m.(*Output); ok {
			o.Release()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	p.readMu.Lock() // as the reader does around a read and its delivery
	var retried atomic.Int32
	if b, ok := p.ReadPendingOr(func() { retried.Add(1) }); ok || b != nil {
		t.Fatalf("got %q, %v while a delivery holds the reader; want nothing and false", b, ok)
	}
	if n := retried.Load(); n != 0 {
		t.Fatalf("retry called %d times before the delivery ended", n)
	}
	p.unlockRead()
	if n := retried.Load(); n != 1 {
		t.Fatalf("retry called %d times after the delivery ended; want once", n)
	}
	if _, ok := p.ReadPendingOr(func() { t.Error("retry called with the reader free") }); !ok {
		t.Fatal("ReadPendingOr refused with the reader free")
	}
	// A later release runs nothing left over.
	p.readMu.Lock()
	p.unlockRead()
	if n := retried.Load(); n != 1 {
		t.Fatalf("retry called %d times in all; want once", n)
	}
}
