package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// countingHolds counts HoldApproval calls: the reads a call makes of its
// own, after the prefetched one.
type countingHolds struct {
	*memstore.Store
	holds atomic.Int32
}

func (s *countingHolds) HoldApproval(ctx context.Context, cand approval.Approval, now time.Time) (approval.Approval, bool, error) {
	s.holds.Add(1)
	return s.Store.HoldApproval(ctx, cand, now)
}

// TestApprovalPrefetch: the slot's approval read in Prefetch answers a
// pending call and lets an approved one go straight to its consumption,
// with no HoldApproval of its own; a copy gone stale (another call used
// the approval up after it was read) loses the conditional consumption
// and the call is held afresh; a copy of another slot (the arguments
// changed before the check decided) is not used.
func TestApprovalPrefetch(t *testing.T) {
	st := &countingHolds{Store: memstore.New()}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k := approval.New(st, approval.Options{Now: func() time.Time { return now }, ParamsKey: testParamsKey(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := &registry.Server{Tenant: "acme", Name: "payments"}
	call := func(args string) *pipeline.Call {
		return &pipeline.Call{
			Tenant: registry.Tenant{ID: "acme"}, Caller: "agent", Method: "tools/call",
			ID: json.RawMessage(`1`), Params: json.RawMessage(`{"name":"transfer","arguments":` + args + `}`),
			Tool: "transfer", UpstreamTool: "transfer", Server: srv, Inline: true,
			Settings: registry.ToolSettings{RequiresApproval: true},
		}
	}
	ctx := context.Background()
	refused := func(err error, status string) string {
		t.Helper()
		var ref *refusal.Refusal
		if !errors.As(err, &ref) || ref.Code != refusal.CodeApprovalRequired || ref.Fields["status"] != status {
			t.Fatalf("want -32061 %s, got %v", status, err)
		}
		id, _ := ref.Fields["approval_id"].(string)
		return id
	}
	holds := func(want int32) {
		t.Helper()
		if got := st.holds.Swap(0); got != want {
			t.Fatalf("%d HoldApproval calls, want %d", got, want)
		}
	}
	const args = `{"amount":5}`

	// Nothing in the slot: the call holds (one HoldApproval).
	decide, _ := k.Prefetch(ctx, call(args))
	id := refused(decide(), "pending")
	holds(1)
	// Pending: answered from the prefetched copy.
	decide, _ = k.Prefetch(ctx, call(args))
	if got := refused(decide(), "pending"); got != id {
		t.Fatalf("pending again: approval %s, want %s", got, id)
	}
	holds(0)

	if _, err := st.DecideApproval(ctx, id, approval.Decision{Status: approval.Approved, By: "alice"}, now); err != nil {
		t.Fatal(err)
	}
	// Two calls read the approved copy; the first consumes it, the second's
	// copy is stale: its consumption loses, and it is held afresh.
	c1, c2 := call(args), call(args)
	d1, _ := k.Prefetch(ctx, c1)
	d2, _ := k.Prefetch(ctx, c2)
	if err := d1(); err != nil {
		t.Fatalf("approved call: %v", err)
	}
	holds(0)
	if got := refused(d2(), "pending"); got == id {
		t.Fatalf("stale copy: approval %s reused", got)
	}
	holds(1)
	c1.Finish(audit.OutcomeAllowed)

	// The arguments change between Prefetch and decide: the copy read
	// for the first slot is not used; the call's own slot is held.
	c := call(args)
	decide, _ = k.Prefetch(ctx, c)
	c.Params = json.RawMessage(`{"name":"transfer","arguments":{"amount":6}}`)
	refused(decide(), "pending")
	holds(1)
}
