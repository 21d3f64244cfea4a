package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
)

func testAudit(t *testing.T, nb NewBackend) {
	now := t0.Add(48 * time.Hour)
	b := nb(t, Options{AuditRetention: 24 * time.Hour, Now: func() time.Time { return now }})
	a, c := b, ctx(t)

	rec := func(tenant string, at time.Duration, i int) audit.Record {
		return audit.Record{
			Time: t0.Add(at), Tenant: tenant, Caller: "agent", Session: "s1",
			CorrelationID: fmt.Sprintf("corr-%d", i), Layer: "gateway", Method: "tools/call",
			Server: "docs", Tool: "search", ParamsHash: "sha256:abc", Code: int(refusal.CodeRateLimited), Word: string(refusal.RateLimited), Slot: "ratelimit",
			Outcome: audit.OutcomeRefused, LatencyMs: 1.25, PolicyHash: audit.PolicyHashNone, Detail: "d",
			Degraded: []string{"ratelimit", "quota"},
			Findings: []audit.Finding{
				{At: audit.AtArguments, Kind: "card", Rule: "card-luhn", Action: audit.ActionLogged},
				{At: audit.AtResult, Kind: "email", Rule: "email", Action: audit.ActionRedacted},
			},
			FindingsCut: 2,
		}
	}
	// Written out of order; one record is past retention (older than now-24h).
	var want []audit.Record
	expired := rec("acme", 0, 0)
	for i, at := range []time.Duration{30 * time.Hour, 26 * time.Hour, 40 * time.Hour, 26 * time.Hour, 35 * time.Hour} {
		r := rec("acme", at, i+1)
		if err := a.Write(c, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	if err := a.Write(c, expired); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(c, rec("beta", 30*time.Hour, 99)); err != nil {
		t.Fatal(err)
	}
	ordered := []audit.Record{want[1], want[3], want[0], want[4], want[2]} // by time; ties by arrival

	// Whole range, one page.
	got, next, err := a.Query(c, audit.Query{Tenant: "acme", From: t0.Add(-time.Hour), To: now})
	if err != nil || next != "" || !sameRecords(got, ordered) {
		t.Fatalf("Query(all) = %d records, next %q, %v; want the 5 unexpired in time order\n got %+v", len(got), next, err, got)
	}
	// From inclusive, To exclusive.
	got, _, err = a.Query(c, audit.Query{Tenant: "acme", From: t0.Add(26 * time.Hour), To: t0.Add(35 * time.Hour)})
	if err != nil || !sameRecords(got, ordered[:3]) {
		t.Fatalf("Query([26h,35h)) = %+v, %v; want 3 records", got, err)
	}
	// Pages of two.
	var paged []audit.Record
	cursor := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("pagination does not end")
		}
		got, next, err := a.Query(c, audit.Query{Tenant: "acme", From: t0, To: now, Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 2 {
			t.Fatalf("page of %d records, limit 2", len(got))
		}
		paged = append(paged, got...)
		if next == "" {
			break
		}
		cursor = next
	}
	if !sameRecords(paged, ordered) {
		t.Fatalf("paged = %+v; want %+v", paged, ordered)
	}
	// Tenants are apart.
	got, _, err = a.Query(c, audit.Query{Tenant: "beta", From: t0, To: now})
	if err != nil || len(got) != 1 || got[0].Tenant != "beta" {
		t.Fatalf("Query(beta) = %+v, %v", got, err)
	}
	if _, _, err := a.Query(c, audit.Query{Tenant: "acme", From: t0, To: now, Cursor: "!!not-ours"}); err == nil {
		t.Fatal("Query with a foreign cursor: want an error")
	}
}

func sameRecords(a, b []audit.Record) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.Time.Equal(y.Time) {
			return false
		}
		x.Time, y.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
