package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// testCheckpoints: checkpoints are written once (the same note again is
// fine, another note under the same writer, number and time is refused),
// read by time range in pages, never read past retention, and kept apart
// from records (a record query never returns one).
func testCheckpoints(t *testing.T, nb NewBackend) {
	now := t0.Add(48 * time.Hour)
	b := nb(t, Options{AuditRetention: 24 * time.Hour, Now: func() time.Time { return now }})
	c := ctx(t)
	cp := func(n uint64, at time.Duration) audit.Checkpoint {
		return audit.Checkpoint{Writer: "serve-0a1b2c3d4e5f.1", Number: n, Time: t0.Add(at), Note: fmt.Sprintf("note %d\n", n)}
	}
	expired := cp(1, 0)
	want := []audit.Checkpoint{cp(2, 30*time.Hour), cp(3, 31*time.Hour), cp(4, 40*time.Hour)}
	for _, x := range append([]audit.Checkpoint{expired}, want...) {
		if err := b.PutCheckpoint(c, "acme", x); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutCheckpoint(c, "acme", want[0]); err != nil {
		t.Fatalf("the same checkpoint again: %v", err)
	}
	other := want[0]
	other.Note = "forged\n"
	if err := b.PutCheckpoint(c, "acme", other); !errors.Is(err, audit.ErrCheckpointConflict) {
		t.Fatalf("another note for checkpoint 2: %v; want ErrCheckpointConflict", err)
	}
	if err := b.PutCheckpoint(c, "acme", audit.Checkpoint{Writer: "w", Number: 5, Time: now, Note: string(make([]byte, audit.MaxNoteBytes+1))}); err == nil {
		t.Fatal("an oversized note was stored")
	}
	var got []audit.Checkpoint
	q := audit.Query{Tenant: "acme", From: t0, To: now, Limit: 1}
	for {
		page, next, err := b.QueryCheckpoints(c, q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		q.Cursor = next
	}
	if len(got) != len(want) {
		t.Fatalf("checkpoints %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i].Writer != want[i].Writer || got[i].Number != want[i].Number || !got[i].Time.Equal(want[i].Time) || got[i].Note != want[i].Note {
			t.Errorf("checkpoint %d = %+v; want %+v", i, got[i], want[i])
		}
	}
	if page, _, err := b.QueryCheckpoints(c, audit.Query{Tenant: "acme", From: t0.Add(31 * time.Hour), To: t0.Add(40 * time.Hour)}); err != nil || len(page) != 1 || page[0].Number != 3 {
		t.Fatalf("[31h, 40h): %+v %v; want checkpoint 3", page, err)
	}
	if page, _, err := b.QueryCheckpoints(c, audit.Query{Tenant: "beta", From: t0, To: now}); err != nil || len(page) != 0 {
		t.Fatalf("another tenant's: %+v %v", page, err)
	}
	if recs, _, err := b.Query(c, audit.Query{Tenant: "acme", From: t0, To: now.Add(time.Hour)}); err != nil || len(recs) != 0 {
		t.Fatalf("a record query returned %+v %v", recs, err)
	}
	if since, err := b.KeptSince(c, "acme"); err != nil || since.After(now.Add(-24*time.Hour).Add(time.Second)) || since.Before(now.Add(-24*time.Hour)) {
		t.Fatalf("KeptSince = %v %v; want the retention horizon %v", since, err, now.Add(-24*time.Hour))
	}
}
