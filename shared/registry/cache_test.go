package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/store"
)

type flaky struct {
	reads int
	err   error
	key   Key
}

func (f *flaky) Key(context.Context, string) (Key, error) {
	f.reads++
	if f.err != nil {
		return Key{}, f.err
	}
	return f.key, nil
}
func (f *flaky) Tenant(context.Context, string) (Tenant, error)    { return Tenant{}, store.ErrNotFound }
func (f *flaky) Servers(context.Context, string) ([]Server, error) { return nil, nil }

func TestCache(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	f := &flaky{key: Key{ID: "k", Tenant: "a"}}
	c := NewCache(f, 10*time.Second, time.Minute, clock)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if k, err := c.Key(ctx, "k"); err != nil || k.Tenant != "a" {
			t.Fatal(k, err)
		}
	}
	if f.reads != 1 {
		t.Fatalf("%d reads within the TTL, want 1", f.reads)
	}
	// A revocation is seen after the TTL.
	now = now.Add(11 * time.Second)
	f.key.Revoked = true
	if k, _ := c.Key(ctx, "k"); !k.Revoked {
		t.Fatal("revocation not seen after the TTL")
	}
	// Store down: last known state within the stale bound, then the error.
	f.err = store.ErrUnavailable
	now = now.Add(30 * time.Second)
	if k, err := c.Key(ctx, "k"); err != nil || !k.Revoked {
		t.Fatalf("stale read: %v %v", k, err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := c.Key(ctx, "k"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("past the stale bound: %v", err)
	}
	// Misses are cached too (no read amplification from bad keys).
	before := f.reads
	f.err = nil
	c.Tenant(ctx, "x")
	if _, err := c.Tenant(ctx, "x"); !errors.Is(err, store.ErrNotFound) || f.reads != before {
		t.Fatalf("miss: %v", err)
	}
}
