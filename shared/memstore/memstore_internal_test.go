package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/session"
)

// Sessions minted and never used again are forgotten once expired, as
// DynamoDB's TTL forgets them there: a client minting a session per call
// must not grow `aegis serve` without end.
func TestExpiredSessionsAreSwept(t *testing.T) {
	s := New()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := session.Limits{Lifetime: time.Hour, Idle: 10 * time.Minute}
	for i := range sweepEvery {
		if err := s.Create(ctx, session.Record{ID: fmt.Sprint("old-", i), Tenant: "acme", Created: t0, LastSeen: t0}); err != nil {
			t.Fatal(err)
		}
	}
	later := t0.Add(11 * time.Minute)
	live := session.Record{ID: "live", Tenant: "acme", Created: later, LastSeen: later}
	if err := s.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Touch(ctx, "acme", "live", later, l); err != nil {
		t.Fatal(err)
	}
	for i := range sweepEvery {
		if err := s.Create(ctx, session.Record{ID: fmt.Sprint("new-", i), Tenant: "acme", Created: later, LastSeen: later}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	n := len(s.sessions.m)
	_, kept := s.sessions.m[sessionKey("acme", "live")]
	s.mu.Unlock()
	if n != sweepEvery+1 || !kept {
		t.Fatalf("%d sessions after the sweep (live kept: %v); want %d: the expired ones gone", n, kept, sweepEvery+1)
	}
}

// Without any Touch (a client that only mints sessions), the limits the
// store was given and the creation times of new sessions drive the sweep.
func TestSweepWithoutTouch(t *testing.T) {
	s := New()
	s.SetSessionLimits(session.Limits{Lifetime: time.Hour, Idle: 10 * time.Minute})
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range 3 * sweepEvery {
		at := t0.Add(time.Duration(i) * time.Second) // one new session a second
		if err := s.Create(ctx, session.Record{ID: fmt.Sprint(i), Tenant: "acme", Created: at, LastSeen: at}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	n := len(s.sessions.m)
	s.mu.Unlock()
	// Each creation sweeps the expired: only the sessions of the last 10
	// minutes are live.
	if n > 600 {
		t.Fatalf("%d sessions kept of %d minted; the expired ones should be gone", n, 3*sweepEvery)
	}
}
