package memstore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

func TestAuditIsBounded(t *testing.T) {
	s := New()
	now := time.Now()
	ctx := context.Background()
	for i := 0; i < MaxAuditRecords+50; i++ {
		if err := s.Write(ctx, audit.Record{Tenant: "a", Time: now.Add(time.Duration(i) * time.Millisecond), Outcome: "allowed"}); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	q := audit.Query{Tenant: "a", From: now.Add(-time.Hour), To: now.Add(time.Hour), Limit: 1000}
	for {
		recs, next, err := s.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n += len(recs)
		if n == len(recs) && len(recs) > 0 && !recs[0].Time.Equal(now.Add(50*time.Millisecond)) {
			t.Fatalf("oldest kept record is %v, want the 51st", recs[0].Time)
		}
		if next == "" {
			break
		}
		q.Cursor = next
	}
	if n != MaxAuditRecords {
		t.Fatalf("kept %d records, want %d", n, MaxAuditRecords)
	}
}

// TestAuditKeepsOrderAcrossReuse: records written out of time order (a
// few places, and more than lateSteps), over many times the bound (so the log's array is reused and
// grown many times), come back as the newest bound records in sort order,
// each once: the same as sorting everything and keeping the tail.
func TestAuditKeepsOrderAcrossReuse(t *testing.T) {
	s := New()
	s.bounds.auditRecords = 100
	now := time.Now()
	ctx := context.Background()
	var want []time.Time
	for i := 0; i < 2000; i++ {
		at := now.Add(time.Duration(i) * time.Millisecond)
		switch {
		case i%7 == 3:
			at = at.Add(-3 * time.Millisecond) // late arrival of an earlier call
		case i%50 == 17:
			at = at.Add(-40 * time.Millisecond) // later than lateSteps places: found by search
		}
		want = append(want, at)
		if err := s.Write(ctx, audit.Record{Tenant: "a", Time: at, Outcome: "allowed", Tool: at.Format(time.RFC3339Nano)}); err != nil {
			t.Fatal(err)
		}
		if got := s.Usage().AuditRecords; got != min(i+1, 100) {
			t.Fatalf("after %d writes the log holds %d records", i+1, got)
		}
	}
	slices.SortStableFunc(want, func(a, b time.Time) int { return a.Compare(b) })
	want = want[len(want)-100:]
	recs, _, err := s.Query(ctx, audit.Query{Tenant: "a", From: now.Add(-time.Hour), To: now.Add(time.Hour), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("kept %d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if !r.Time.Equal(want[i]) || r.Tool != want[i].Format(time.RFC3339Nano) {
			t.Fatalf("record %d is %v, want %v", i, r.Time, want[i])
		}
	}
}
