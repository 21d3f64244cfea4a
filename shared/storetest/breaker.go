package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/store"
)

// testBreaker is the contract of breaker.Store: circuits written only over
// the version read, leases limited across callers and freed by expiry.
func testBreaker(t *testing.T, nb func(t *testing.T) backend.Backend) {
	t.Run("circuit", func(t *testing.T) {
		s, c := nb(t), ctx(t)
		got, err := s.Circuit(c, "a#s")
		if err != nil || got.Version != 0 || got.State != nil || !got.OpenUntil.IsZero() {
			t.Fatalf("absent circuit = %+v, %v; want zero", got, err)
		}
		w := breaker.Circuit{State: []byte(`{"state":2}`), OpenUntil: t0.Add(10 * time.Second), Failures: 5, Probe: "p1", ProbeUntil: t0.Add(time.Minute)}
		if err := s.PutCircuit(c, "a#s", w); err != nil {
			t.Fatal(err)
		}
		got, err = s.Circuit(c, "a#s")
		if err != nil || got.Version != 1 || string(got.State) != `{"state":2}` || !got.OpenUntil.Equal(w.OpenUntil) ||
			got.Failures != 5 || got.Probe != "p1" || !got.ProbeUntil.Equal(w.ProbeUntil) {
			t.Fatalf("read back %+v, %v", got, err)
		}
		// A writer that read version 0 has lost.
		if err := s.PutCircuit(c, "a#s", w); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("stale write = %v; want ErrConflict", err)
		}
		got.Probe, got.ProbeUntil, got.OpenUntil = "", time.Time{}, time.Time{}
		if err := s.PutCircuit(c, "a#s", got); err != nil {
			t.Fatal(err)
		}
		got, _ = s.Circuit(c, "a#s")
		if got.Version != 2 || got.Probe != "" || !got.OpenUntil.IsZero() {
			t.Fatalf("after clearing = %+v", got)
		}
		// Keys are independent.
		if o, _ := s.Circuit(c, "a#other"); o.Version != 0 {
			t.Fatalf("other key = %+v", o)
		}
		// Racing writers on one version: exactly one wins.
		var wins atomic.Int64
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if s.PutCircuit(c, "a#s", got) == nil {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d racing writers won; want 1", wins.Load())
		}
	})
	t.Run("leases", func(t *testing.T) {
		s, c := nb(t), ctx(t)
		exp := t0.Add(time.Minute)
		for _, h := range []string{"h1", "h2"} {
			if ok, err := s.AcquireLease(c, "k", h, 2, t0, exp); err != nil || !ok {
				t.Fatalf("acquire %s = %v, %v", h, ok, err)
			}
		}
		if ok, _ := s.AcquireLease(c, "k", "h3", 2, t0, exp); ok {
			t.Fatal("third lease admitted with limit 2")
		}
		if err := s.ReleaseLease(c, "k", "h1"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := s.AcquireLease(c, "k", "h3", 2, t0, exp); !ok {
			t.Fatal("lease refused after a release")
		}
		if n, err := s.InFlight(c, "k", t0); err != nil || n != 2 {
			t.Fatalf("InFlight = %d, %v; want 2 (h2, h3)", n, err)
		}
		if n, err := s.InFlight(c, "k", exp); err != nil || n != 0 {
			t.Fatalf("InFlight at the leases' expiry = %d, %v; want 0", n, err)
		}
		if n, err := s.InFlight(c, "never-leased", t0); err != nil || n != 0 {
			t.Fatalf("InFlight of a key never leased = %d, %v; want 0", n, err)
		}
		if err := s.ReleaseLease(c, "k", "absent"); err != nil {
			t.Fatalf("releasing an absent lease = %v", err)
		}
		// A holder that died: its lease stops counting once it expires.
		if ok, _ := s.AcquireLease(c, "k", "h4", 2, exp.Add(-time.Second), exp.Add(time.Minute)); ok {
			t.Fatal("admitted before the leases expired")
		}
		if ok, _ := s.AcquireLease(c, "k", "h4", 2, exp, exp.Add(time.Minute)); !ok {
			t.Fatal("expired leases still count")
		}
		// Other keys are independent.
		if ok, _ := s.AcquireLease(c, "k2", "h1", 1, t0, exp); !ok {
			t.Fatal("other key refused")
		}
		// Parallel: exactly limit admitted.
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if ok, err := s.AcquireLease(c, "par", "p"+string(rune('a'+i)), 5, t0, exp); err == nil && ok {
					admitted.Add(1)
				}
			}()
		}
		wg.Wait()
		if admitted.Load() != 5 {
			t.Fatalf("admitted %d of 20 with limit 5", admitted.Load())
		}
	})
}
