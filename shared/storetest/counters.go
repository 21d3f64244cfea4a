package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func testCounters(t *testing.T, nb NewBackend) {
	b := nb(t, Options{})
	k, c := b, ctx(t)
	exp := t0.Add(time.Minute)

	for i := int64(1); i <= 3; i++ {
		n, ok, err := k.Incr(c, "a", 3, exp)
		if err != nil || !ok || n != i {
			t.Fatalf("Incr #%d = %d, %v, %v; want %d, true", i, n, ok, err, i)
		}
	}
	n, ok, err := k.Incr(c, "a", 3, exp)
	if err != nil || ok || n != 3 {
		t.Fatalf("Incr at limit = %d, %v, %v; want 3, false (unchanged)", n, ok, err)
	}
	// A higher limit admits again: the limit is the caller's, not the counter's.
	if n, ok, err := k.Incr(c, "a", 5, exp); err != nil || !ok || n != 4 {
		t.Fatalf("Incr with higher limit = %d, %v, %v; want 4, true", n, ok, err)
	}
	// No limit.
	for i := int64(1); i <= 5; i++ {
		if n, ok, err := k.Incr(c, "b", 0, exp); err != nil || !ok || n != i {
			t.Fatalf("Incr(no limit) #%d = %d, %v, %v", i, n, ok, err)
		}
	}
	// Keys are independent.
	if n, ok, err := k.Incr(c, "a#2", 3, exp); err != nil || !ok || n != 1 {
		t.Fatalf("Incr(other key) = %d, %v, %v; want 1, true", n, ok, err)
	}

	t.Run("Value reads without counting", func(t *testing.T) {
		for _, want := range []struct {
			key string
			n   int64
		}{{"a", 4}, {"b", 5}, {"never-counted", 0}} {
			for range 2 { // reading twice: the read changed nothing
				if n, err := k.Value(c, want.key); err != nil || n != want.n {
					t.Fatalf("Value(%s) = %d, %v; want %d", want.key, n, err, want.n)
				}
			}
		}
		if n, ok, err := k.Incr(c, "b", 0, exp); err != nil || !ok || n != 6 {
			t.Fatalf("Incr after Value = %d, %v, %v; want 6", n, ok, err)
		}
		if n, err := k.Value(c, "b"); err != nil || n != 6 {
			t.Fatalf("Value after Incr = %d, %v; want 6", n, err)
		}
	})

	t.Run("Decr gives back one unit, never below zero", func(t *testing.T) {
		for range 3 {
			if _, ok, err := k.Incr(c, "give", 3, exp); err != nil || !ok {
				t.Fatalf("Incr: %v %v", ok, err)
			}
		}
		if _, ok, _ := k.Incr(c, "give", 3, exp); ok {
			t.Fatal("fourth Incr admitted at limit 3")
		}
		if err := k.Decr(c, "give"); err != nil {
			t.Fatal(err)
		}
		if n, ok, err := k.Incr(c, "give", 3, exp); err != nil || !ok || n != 3 {
			t.Fatalf("Incr after Decr = %d, %v, %v; want 3, true", n, ok, err)
		}
		for range 5 {
			if err := k.Decr(c, "give"); err != nil {
				t.Fatal(err)
			}
		}
		if err := k.Decr(c, "never-counted"); err != nil {
			t.Fatalf("Decr of an absent counter: %v", err)
		}
		if n, ok, err := k.Incr(c, "give", 3, exp); err != nil || !ok || n != 1 {
			t.Fatalf("Incr after draining = %d, %v, %v; want 1, true", n, ok, err)
		}
	})

	t.Run("100 parallel, limit 30", func(t *testing.T) {
		var admitted, refused atomic.Int64
		var wg sync.WaitGroup
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, err := k.Incr(c, "parallel", 30, exp)
				switch {
				case err != nil:
					t.Errorf("Incr: %v", err)
				case ok:
					admitted.Add(1)
				default:
					refused.Add(1)
				}
			}()
		}
		wg.Wait()
		if admitted.Load() != 30 || refused.Load() != 70 {
			t.Fatalf("admitted %d, refused %d; want 30, 70", admitted.Load(), refused.Load())
		}
	})
}
