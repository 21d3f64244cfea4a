package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

func testSession(t *testing.T, nb NewBackend) {
	b := nb(t, Options{})
	s, c := b, ctx(t)
	l := session.Limits{Lifetime: time.Hour, Idle: 10 * time.Minute}

	rec := session.Record{ID: "s1", Tenant: "acme", Caller: "agent", Protocol: "2025-11-25", Created: t0, LastSeen: t0}
	if err := s.Create(c, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(c, rec); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Create(existing) err = %v, want ErrConflict", err)
	}
	// Same id under another tenant is another session.
	if err := s.Create(c, session.Record{ID: "s1", Tenant: "beta", Caller: "x", Created: t0, LastSeen: t0}); err != nil {
		t.Fatalf("Create(same id, other tenant): %v", err)
	}

	now := t0.Add(5 * time.Minute)
	got, err := s.Touch(c, "acme", "s1", now, l)
	want := rec
	want.LastSeen = now
	if err != nil || !sameSession(got, want) {
		t.Fatalf("Touch = %+v, %v; want %+v", got, err, want)
	}
	if _, err := s.Touch(c, "acme", "nope", now, l); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Touch(unknown) err = %v, want ErrNotFound", err)
	}
	if _, err := s.Touch(c, "gamma", "s1", now, l); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Touch(other tenant) err = %v, want ErrNotFound", err)
	}

	// Upstream session ids travel with the record.
	if err := s.SetUpstream(c, "acme", "s1", "payments", "up-123"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUpstream(c, "acme", "s1", "docs", "up-456"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUpstream(c, "acme", "s1", "docs", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUpstream(c, "acme", "nope", "docs", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetUpstream(unknown) err = %v, want ErrNotFound", err)
	}
	now = now.Add(5 * time.Minute)
	got, err = s.Touch(c, "acme", "s1", now, l)
	want.LastSeen, want.Upstream = now, map[string]string{"payments": "up-123"}
	if err != nil || !sameSession(got, want) {
		t.Fatalf("Touch after SetUpstream = %+v, %v; want %+v", got, err, want)
	}

	// Idle clock: expired exactly at LastSeen+Idle.
	if _, err := s.Touch(c, "acme", "s1", now.Add(l.Idle), l); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Touch at idle expiry err = %v, want ErrNotFound", err)
	}
	// Lifetime clock: keep it busy until Created+Lifetime.
	for at := now.Add(9 * time.Minute); at.Before(t0.Add(l.Lifetime)); at = at.Add(9 * time.Minute) {
		if _, err := s.Touch(c, "acme", "s1", at, l); err != nil {
			t.Fatalf("Touch at %v (busy, within lifetime): %v", at.Sub(t0), err)
		}
	}
	if _, err := s.Touch(c, "acme", "s1", t0.Add(l.Lifetime), l); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Touch at lifetime expiry err = %v, want ErrNotFound", err)
	}
	// Zero limits: no clock.
	if _, err := s.Touch(c, "beta", "s1", t0.Add(1000*time.Hour), session.Limits{}); err != nil {
		t.Fatalf("Touch with no limits: %v", err)
	}

	// Session reads without writing: LastSeen stays what the last Touch
	// wrote, and the clocks run from it.
	seen := t0.Add(1000 * time.Hour) // the Touch with no limits above wrote it
	lr := session.Limits{Idle: 10 * time.Minute}
	for _, at := range []time.Duration{time.Second, 9 * time.Minute} {
		got, err := s.Session(c, "beta", "s1", seen.Add(at), lr)
		if err != nil || !got.LastSeen.Equal(seen) || got.Caller != "x" {
			t.Fatalf("Session at +%v = %+v, %v; want the record with LastSeen unchanged", at, got, err)
		}
	}
	if _, err := s.Session(c, "beta", "s1", seen.Add(lr.Idle), lr); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Session at idle expiry err = %v, want ErrNotFound", err)
	}
	if _, err := s.Session(c, "beta", "nope", seen, lr); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Session(unknown) err = %v, want ErrNotFound", err)
	}
	if _, err := s.Session(c, "beta", "s1", seen.Add(time.Second), session.Limits{Lifetime: time.Hour}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Session past its lifetime err = %v, want ErrNotFound", err)
	}

	if err := s.Delete(c, "acme", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(c, "acme", "s1"); err != nil {
		t.Fatalf("Delete(absent) = %v, want nil", err)
	}
	if _, err := s.Touch(c, "acme", "s1", t0, session.Limits{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Touch(deleted) err = %v, want ErrNotFound", err)
	}
}

// sameSession compares records, treating a nil and an empty Upstream alike.
func sameSession(a, b session.Record) bool {
	if len(a.Upstream) == 0 && len(b.Upstream) == 0 {
		a.Upstream, b.Upstream = nil, nil
	}
	return a.ID == b.ID && a.Tenant == b.Tenant && a.Caller == b.Caller && a.Protocol == b.Protocol &&
		a.Created.Equal(b.Created) && a.LastSeen.Equal(b.LastSeen) && reflect.DeepEqual(a.Upstream, b.Upstream)
}
