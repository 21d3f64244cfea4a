package memstore

import (
	"context"
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
