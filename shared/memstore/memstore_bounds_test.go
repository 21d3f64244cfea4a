package memstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

var b0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// ends collects what the OnSessionEnd hook is told.
type ends struct {
	mu   sync.Mutex
	recs map[string]session.Record
}

func hook(s *Store) *ends {
	e := &ends{recs: map[string]session.Record{}}
	s.OnSessionEnd(func(r session.Record) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.recs[r.ID] = r
	})
	return e
}

// wait waits until n records were reported, or fails.
func (e *ends) wait(t *testing.T, n int) map[string]session.Record {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		e.mu.Lock()
		got := len(e.recs)
		e.mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hook told of %d sessions; want %d", got, n)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recs
}

func mustCreate(t *testing.T, s *Store, id string, at time.Time, up map[string]string) {
	t.Helper()
	if err := s.Create(context.Background(), session.Record{ID: id, Tenant: "acme", Caller: "agent", Created: at, LastSeen: at, Upstream: up}); err != nil {
		t.Fatal(err)
	}
}

// Past MaxSessions the session seen least recently is forgotten, and the
// hook is told of it so that its upstream sessions are ended.
func TestSessionCountCap(t *testing.T) {
	s := New()
	s.bounds.sessions = 100
	e := hook(s)
	ctx := context.Background()
	for i := range 100 {
		mustCreate(t, s, fmt.Sprint(i), b0, map[string]string{"demo": "2025-11-25 up-" + fmt.Sprint(i)})
	}
	// 0 is used again: 1 is now the least recently seen.
	if _, err := s.Touch(ctx, "acme", "0", b0.Add(time.Second), session.Limits{}); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 110; i++ {
		mustCreate(t, s, fmt.Sprint(i), b0, nil)
	}
	if u := s.Usage(); u.Sessions != 100 {
		t.Fatalf("%d sessions kept; want the cap, 100", u.Sessions)
	}
	if _, err := s.Touch(ctx, "acme", "0", b0.Add(2*time.Second), session.Limits{}); err != nil {
		t.Errorf("the session touched last was forgotten: %v", err)
	}
	for i := 1; i <= 10; i++ {
		if _, err := s.Touch(ctx, "acme", fmt.Sprint(i), b0, session.Limits{}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("session %d (among the least recently seen) kept: %v", i, err)
		}
	}
	got := e.wait(t, 10)
	for i := 1; i <= 10; i++ {
		if r := got[fmt.Sprint(i)]; r.Upstream["demo"] != "2025-11-25 up-"+fmt.Sprint(i) {
			t.Errorf("hook told of session %d with upstream %v", i, r.Upstream)
		}
	}
}

// The byte cap holds too, whatever the count: large upstream session ids
// (an upstream's choice) fill it sooner.
func TestSessionByteCap(t *testing.T) {
	s := New()
	s.bounds.sessionBytes = 64 << 10
	ctx := context.Background()
	big := "2025-11-25 " + strings.Repeat("u", MaxUpstreamIDBytes-11)
	for i := range 1000 {
		id := fmt.Sprint(i)
		mustCreate(t, s, id, b0, nil)
		if err := s.SetUpstream(ctx, "acme", id, "demo", big); err != nil {
			t.Fatal(err)
		}
	}
	u := s.Usage()
	if u.SessionBytes > 64<<10+2<<10 || u.Sessions < 40 || u.Sessions > 64 {
		t.Fatalf("%d sessions in %d bytes; want about 64 KiB of them", u.Sessions, u.SessionBytes)
	}
	if err := s.SetUpstream(ctx, "acme", "999", "demo", big+"u"); err == nil {
		t.Error("an upstream session over MaxUpstreamIDBytes was kept")
	}
	// Deleting gives the bytes back.
	for i := range 1000 {
		_ = s.Delete(ctx, "acme", fmt.Sprint(i))
	}
	if u := s.Usage(); u.Sessions != 0 || u.SessionBytes != 0 {
		t.Fatalf("after deleting all: %+v", u)
	}
}

// Expired sessions are swept as new ones are created, and the hook is told
// of those that hold upstream sessions; so is an upstream session recorded
// for a session already gone.
func TestSweptSessionsAreReported(t *testing.T) {
	s := New()
	s.SetSessionLimits(session.Limits{Lifetime: time.Hour, Idle: time.Minute})
	e := hook(s)
	ctx := context.Background()
	mustCreate(t, s, "old", b0, map[string]string{"demo": "2025-11-25 up-old"})
	mustCreate(t, s, "bare", b0, nil)
	mustCreate(t, s, "new", b0.Add(time.Minute), nil) // "old" and "bare" idle since b0: swept
	if u := s.Usage(); u.Sessions != 1 {
		t.Fatalf("%d sessions; want 1 (the expired two swept)", u.Sessions)
	}
	if err := s.SetUpstream(ctx, "acme", "gone", "demo", "2025-11-25 up-gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetUpstream(gone) = %v; want ErrNotFound", err)
	}
	got := e.wait(t, 2)
	if got["old"].Upstream["demo"] != "2025-11-25 up-old" || got["gone"].Upstream["demo"] != "2025-11-25 up-gone" {
		t.Errorf("hook told of %v", got)
	}
	if _, ok := got["bare"]; ok {
		t.Error("hook told of a session without upstream sessions")
	}
}

// The queue of sessions waiting for the hook is bounded: past MaxEndQueue
// they are dropped and counted.
func TestEndQueueIsBounded(t *testing.T) {
	s := New()
	s.bounds.endQueue = 10
	release := make(chan struct{})
	var mu sync.Mutex
	n := 0
	s.OnSessionEnd(func(session.Record) {
		<-release
		mu.Lock()
		n++
		mu.Unlock()
	})
	for i := range 100 {
		_ = s.SetUpstream(context.Background(), "acme", fmt.Sprint(i), "demo", "2025-11-25 x")
	}
	u := s.Usage()
	close(release)
	// Up to endWorkers records were taken off the queue before it filled.
	if u.EndQueue > 10 || u.EndsDropped < 100-10-endWorkers || u.EndsDropped > 90 {
		t.Fatalf("queue %d, dropped %d; want at most 10 queued and the rest dropped", u.EndQueue, u.EndsDropped)
	}
	ran := func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return int64(n)
	}
	for deadline := time.Now().Add(5 * time.Second); ran()+u.EndsDropped < 100 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := ran(); got+u.EndsDropped != 100 || s.Usage().EndQueue != 0 {
		t.Fatalf("hook ran %d times and %d were dropped; want 100 in all, and the queue empty", got, u.EndsDropped)
	}
}

// Audit records are kept Bounded, and one tenant's log is capped by bytes
// as well as by count.
func TestAuditIsBoundedByBytes(t *testing.T) {
	s := New()
	s.bounds.auditBytes = 256 << 10
	ctx := context.Background()
	huge := strings.Repeat("t", 1<<20)
	for i := range 300 {
		r := audit.Record{Tenant: "acme", Time: b0.Add(time.Duration(i) * time.Millisecond), Outcome: audit.OutcomeRefused, Tool: huge, Detail: huge}
		if err := s.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	u := s.Usage()
	if u.AuditBytes > 256<<10 || u.AuditRecords < 20 {
		t.Fatalf("%d records in %d bytes; want at most 256 KiB", u.AuditRecords, u.AuditBytes)
	}
	recs, _, err := s.Query(ctx, audit.Query{Tenant: "acme", From: b0, To: b0.Add(time.Hour), Limit: 1000})
	if err != nil || len(recs) != u.AuditRecords {
		t.Fatalf("Query = %d records, %v; want %d", len(recs), err, u.AuditRecords)
	}
	last := recs[len(recs)-1]
	if !last.Time.Equal(b0.Add(299 * time.Millisecond)) {
		t.Errorf("newest record kept is from %v; want the last written", last.Time)
	}
	if want := huge[:audit.MaxFieldBytes] + "…[cut 1048064 bytes]"; last.Tool != want {
		t.Errorf("tool kept as %d bytes; want it cut to %d and marked", len(last.Tool), len(want))
	}
}

func idemRec(holder string, done bool, answer int, exp time.Time) idempotency.Record {
	r := idempotency.Record{ParamsHash: "h", Holder: holder, Done: done, Expires: exp}
	if answer > 0 {
		r.Result = make([]byte, answer)
	}
	return r
}

// The ledger is capped by count and bytes: expired records go first, then
// the oldest completed ones; a pending claim is never dropped, and a claim
// that finds only pending ones is refused.
func TestLedgerCaps(t *testing.T) {
	ctx := context.Background()
	t.Run("count", func(t *testing.T) {
		s := New()
		s.bounds.ledgerRecords = 10
		for i := range 30 {
			k := fmt.Sprint(i)
			if _, ok, err := s.ClaimKey(ctx, "acme", k, idemRec(k, false, 0, b0.Add(time.Minute)), b0); err != nil || !ok {
				t.Fatalf("claim %d: %v, %v", i, ok, err)
			}
			if err := s.CompleteKey(ctx, "acme", k, k, idemRec(k, true, 100, b0.Add(24*time.Hour))); err != nil {
				t.Fatal(err)
			}
		}
		if u := s.Usage(); u.LedgerRecords != 10 {
			t.Fatalf("%d records; want 10", u.LedgerRecords)
		}
		if got, ok, _ := s.ClaimKey(ctx, "acme", "29", idemRec("x", false, 0, b0.Add(time.Minute)), b0); ok || !got.Done {
			t.Error("the newest answer was dropped")
		}
		if _, ok, _ := s.ClaimKey(ctx, "acme", "0", idemRec("x", false, 0, b0.Add(time.Minute)), b0); !ok {
			t.Error("the oldest answer was kept past the cap")
		}
	})
	t.Run("bytes", func(t *testing.T) {
		s := New()
		s.bounds.ledgerBytes = 1 << 20
		for i := range 40 { // 40 answers of 100 KiB: 4 MB offered
			k := fmt.Sprint(i)
			s.ClaimKey(ctx, "acme", k, idemRec(k, false, 0, b0.Add(time.Minute)), b0)
			if err := s.CompleteKey(ctx, "acme", k, k, idemRec(k, true, 100<<10, b0.Add(24*time.Hour))); err != nil {
				t.Fatal(err)
			}
		}
		if u := s.Usage(); u.LedgerBytes > 1<<20 || u.LedgerRecords < 8 {
			t.Fatalf("%d records in %d bytes; want at most 1 MiB", u.LedgerRecords, u.LedgerBytes)
		}
	})
	t.Run("pending are kept", func(t *testing.T) {
		s := New()
		s.bounds.ledgerRecords = 5
		for i := range 5 {
			k := fmt.Sprint(i)
			s.ClaimKey(ctx, "acme", k, idemRec(k, false, 0, b0.Add(time.Minute)), b0)
		}
		if _, _, err := s.ClaimKey(ctx, "acme", "x", idemRec("x", false, 0, b0.Add(time.Minute)), b0); !errors.Is(err, ErrLedgerFull) {
			t.Fatalf("claim with only pending claims held: %v; want ErrLedgerFull", err)
		}
		// Once their leases have run out they are swept, and there is room.
		if _, ok, err := s.ClaimKey(ctx, "acme", "x", idemRec("x", false, 0, b0.Add(3*time.Minute)), b0.Add(2*time.Minute)); err != nil || !ok {
			t.Fatalf("claim after the leases expired: %v, %v", ok, err)
		}
		if u := s.Usage(); u.LedgerRecords != 1 {
			t.Fatalf("%d records; want 1 (the expired ones swept)", u.LedgerRecords)
		}
	})
	t.Run("expired are swept", func(t *testing.T) {
		s := New()
		for i := range sweepEvery - 1 { // the next claim is the sweepEvery-th
			k := fmt.Sprint(i)
			s.ClaimKey(ctx, "acme", k, idemRec(k, false, 0, b0.Add(time.Minute)), b0)
			s.CompleteKey(ctx, "acme", k, k, idemRec(k, true, 10, b0.Add(time.Hour)))
		}
		s.ClaimKey(ctx, "acme", "late", idemRec("late", false, 0, b0.Add(3*time.Hour)), b0.Add(2*time.Hour))
		if u := s.Usage(); u.LedgerRecords != 1 {
			t.Fatalf("%d records; want 1 (the expired ones swept)", u.LedgerRecords)
		}
	})
}
