package auditchain_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/auditchaintest"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// TestWriterConcurrent: calls write at once through one writer whose
// checkpoints come every few records and every few milliseconds; after
// Close every record is signed and the trail verifies.
func TestWriterConcurrent(t *testing.T) {
	st := memstore.New()
	s, v := auditchaintest.Key(t)
	w, err := auditchain.New(st, auditchain.Options{Kind: "serve", Signer: s, Checkpoints: st, Records: 16, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				r := auditchaintest.Record(g*50 + i)
				if g%2 == 1 {
					r.Tenant = "beta" // a second chain in the same writer
				}
				if err := w.Write(context.Background(), r); err != nil {
					t.Error(err)
				}
				if i%10 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "beta"} {
		d, err := auditchain.Collect(ctx, st, tenant, auditchaintest.T0.Add(-time.Hour), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		rep := auditchain.Verify(d, []*auditchain.Verifier{v})
		if !rep.OK() || len(rep.Writers) != 1 || rep.Writers[0].Records != 200 || rep.Writers[0].Unsigned != 0 || rep.Checkpoints < 2 {
			t.Fatalf("%s: %+v; want 200 records, all signed, no fault", tenant, rep)
		}
	}
	// After Close, records are still written (chained, not checkpointed).
	if err := w.Write(ctx, auditchaintest.Record(999)); err != nil {
		t.Fatal(err)
	}
}

// TestWriterInterval: a checkpoint comes Interval after the first record
// past the last one, with no more records written.
func TestWriterInterval(t *testing.T) {
	st := memstore.New()
	s, _ := auditchaintest.Key(t)
	w, err := auditchain.New(st, auditchain.Options{Kind: "serve", Signer: s, Checkpoints: st, Records: 1000, Interval: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abandon()
	if err := w.Write(context.Background(), auditchaintest.Record(1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		cps, _, err := st.QueryCheckpoints(context.Background(), audit.Query{Tenant: auditchaintest.Tenant, From: time.Unix(0, 0), To: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint 5 s after a record, with Interval 30 ms: %d", len(cps))
		}
		time.Sleep(5 * time.Millisecond)
	}
}
