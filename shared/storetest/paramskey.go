package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/store"
)

func newKey(t *testing.T) audit.ParamsKey {
	t.Helper()
	k, err := audit.GenerateParamsKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testParamsKey(t *testing.T, fresh func(*testing.T) backend.Backend) {
	b, c := fresh(t), ctx(t)
	if ks, err := b.ParamsKeys(c); err != nil || len(ks) != 0 {
		t.Fatalf("ParamsKeys(empty) = %v, %v", ks, err)
	}
	if err := b.RotateParamsKey(c, "0000000000000000", audit.StoredKey{Key: newKey(t), Created: t0}, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RotateParamsKey with no key = %v, want ErrNotFound", err)
	}

	// Several instances start at once: one key wins, all get it.
	var wg sync.WaitGroup
	got := make([]audit.StoredKey, 8)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = b.InitParamsKey(c, audit.StoredKey{Key: newKey(t), Created: t0})
		})
	}
	wg.Wait()
	first := got[0]
	for i := range got {
		if errs[i] != nil || got[i].Key.ID() != first.Key.ID() || got[i].Key.FormatSecret() != first.Key.FormatSecret() {
			t.Fatalf("InitParamsKey %d = %v, %v; want the one key %v", i, got[i].Key, errs[i], first.Key)
		}
	}
	if !first.Created.Equal(t0) || !first.Retired.IsZero() {
		t.Fatalf("first key = %+v", first.Info())
	}
	if k, err := audit.LoadParamsKey(c, b, t0); err != nil || k.ID() != first.Key.ID() {
		t.Fatalf("LoadParamsKey = %v, %v; want the stored key", k, err)
	}

	// Rotation: conditional on the current id; the old key is kept, retired.
	next := audit.StoredKey{Key: newKey(t), Created: t0.Add(time.Hour)}
	if err := b.RotateParamsKey(c, next.Key.ID(), next, t0.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("RotateParamsKey(wrong prev) = %v, want ErrConflict", err)
	}
	if err := b.RotateParamsKey(c, first.Key.ID(), next, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := b.RotateParamsKey(c, first.Key.ID(), audit.StoredKey{Key: newKey(t), Created: t0}, t0.Add(time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second RotateParamsKey from the retired key = %v, want ErrConflict", err)
	}
	ks, err := b.ParamsKeys(c)
	if err != nil || len(ks) != 2 {
		t.Fatalf("ParamsKeys after rotation = %v, %v", ks, err)
	}
	if ks[0].Key.ID() != next.Key.ID() || !ks[0].Retired.IsZero() || ks[0].Key.FormatSecret() != next.Key.FormatSecret() {
		t.Fatalf("current after rotation = %+v", ks[0].Info())
	}
	if ks[1].Key.ID() != first.Key.ID() || !ks[1].Retired.Equal(t0.Add(time.Hour)) || ks[1].Key.FormatSecret() != first.Key.FormatSecret() {
		t.Fatalf("retired after rotation = %+v", ks[1].Info())
	}
	// Init after a rotation keeps the current key.
	if k, err := b.InitParamsKey(c, audit.StoredKey{Key: newKey(t), Created: t0}); err != nil || k.Key.ID() != next.Key.ID() {
		t.Fatalf("InitParamsKey after rotation = %v, %v", k.Key, err)
	}
	if k, err := audit.LoadParamsKey(c, b, t0); err != nil || k.ID() != next.Key.ID() {
		t.Fatalf("LoadParamsKey after rotation = %v, %v", k, err)
	}
}
