package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/store"
)

// testIdempotency is the contract of idempotency.Store.
func testIdempotency(t *testing.T, nb func(t *testing.T) backend.Backend) {
	s := nb(t)
	c := ctx(t)
	pending := idempotency.Record{ParamsHash: "h1", Holder: "c1", Expires: t0.Add(time.Minute)}
	if _, created, err := s.ClaimKey(c, "acme", "k", pending, t0); err != nil || !created {
		t.Fatalf("first claim = %v, %v", created, err)
	}
	got, created, err := s.ClaimKey(c, "acme", "k", idempotency.Record{ParamsHash: "h1", Holder: "c2", Expires: t0.Add(time.Minute)}, t0)
	if err != nil || created || got.Holder != "c1" || got.Done || got.ParamsHash != "h1" {
		t.Fatalf("second claim = %+v, %v, %v; want c1's pending record", got, created, err)
	}
	// Tenants are apart.
	if _, created, _ := s.ClaimKey(c, "globex", "k", pending, t0); !created {
		t.Fatal("another tenant's key collided")
	}
	// Only the holder completes.
	done := idempotency.Record{ParamsHash: "h1", Holder: "c1", Done: true, Result: []byte(`{"content":[]}`), Expires: t0.Add(24 * time.Hour)}
	if err := s.CompleteKey(c, "acme", "k", "c2", done); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("complete by another holder = %v; want ErrConflict", err)
	}
	if err := s.CompleteKey(c, "acme", "k", "c1", done); err != nil {
		t.Fatal(err)
	}
	got, created, _ = s.ClaimKey(c, "acme", "k", pending, t0.Add(time.Hour))
	if created || !got.Done || string(got.Result) != `{"content":[]}` || got.Error != nil {
		t.Fatalf("claim after completion = %+v, %v; want the recorded answer", got, created)
	}
	// Release only frees a pending claim of its holder.
	if err := s.ReleaseKey(c, "acme", "k", "c1"); err != nil {
		t.Fatal(err)
	}
	if got, created, _ := s.ClaimKey(c, "acme", "k", pending, t0.Add(time.Hour)); created || !got.Done {
		t.Fatal("release removed a done record")
	}
	errRec := idempotency.Record{ParamsHash: "h2", Holder: "c3", Expires: t0.Add(time.Minute)}
	s.ClaimKey(c, "acme", "e", errRec, t0)
	if err := s.CompleteKey(c, "acme", "e", "c3", idempotency.Record{ParamsHash: "h2", Holder: "c3", Done: true, Error: []byte(`{"code":-1,"message":"x"}`), Expires: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.ClaimKey(c, "acme", "e", errRec, t0); got.Result != nil || string(got.Error) != `{"code":-1,"message":"x"}` {
		t.Fatalf("error answer = %+v", got)
	}
	p := idempotency.Record{ParamsHash: "h3", Holder: "c4", Expires: t0.Add(time.Minute)}
	s.ClaimKey(c, "acme", "r", p, t0)
	if err := s.ReleaseKey(c, "acme", "r", "c4"); err != nil {
		t.Fatal(err)
	}
	if _, created, _ := s.ClaimKey(c, "acme", "r", p, t0); !created {
		t.Fatal("released key not claimable")
	}
	// Expiry is checked, not left to collection: a pending claim whose
	// holder died, and an answer past retention, are absent.
	if _, created, _ := s.ClaimKey(c, "acme", "r", idempotency.Record{ParamsHash: "h3", Holder: "c5", Expires: t0.Add(2 * time.Minute)}, t0.Add(time.Minute)); !created {
		t.Fatal("expired pending claim still held")
	}
	if _, created, _ := s.ClaimKey(c, "acme", "k", pending, t0.Add(25*time.Hour)); !created {
		t.Fatal("answer past retention still replayed")
	}
	// Racing claims: one wins.
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := idempotency.Record{ParamsHash: "h", Holder: string(rune('a' + i)), Expires: t0.Add(time.Minute)}
			if _, created, err := s.ClaimKey(c, "acme", "race", r, t0); err == nil && created {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d racing claims won; want 1", wins.Load())
	}
}
