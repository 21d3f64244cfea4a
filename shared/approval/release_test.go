package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// An approval is used up by the call that runs, not by a call that a
// later check (the breaker, the idempotency ledger) refuses before it is
// sent: that refusal gives it back, and the next identical call runs on
// the same approval. A call that was sent keeps it used, whatever the
// upstream answered.
func TestApprovalGivenBackWhenRefusedAfterwards(t *testing.T) {
	st := memstore.New()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	k := approval.New(st, approval.Options{Now: func() time.Time { return now }, ParamsKey: testParamsKey(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := &registry.Server{Tenant: "acme", Name: "payments"}
	call := func() *pipeline.Call {
		return &pipeline.Call{
			Tenant: registry.Tenant{ID: "acme"}, Caller: "agent", Method: "tools/call",
			ID: json.RawMessage(`1`), Params: json.RawMessage(`{"name":"transfer","arguments":{"amount":5}}`),
			Tool: "transfer", UpstreamTool: "transfer", Server: srv, Inline: true,
			Settings: registry.ToolSettings{RequiresApproval: true},
		}
	}
	ctx := context.Background()
	held := func() string {
		t.Helper()
		var ref *refusal.Refusal
		if err := k.Check(ctx, call()); !errors.As(err, &ref) || ref.Code != refusal.CodeApprovalRequired {
			t.Fatalf("want -32061, got %v", err)
		}
		id, _ := ref.Fields["approval_id"].(string)
		status, _ := ref.Fields["status"].(string)
		return id + " " + status
	}
	first := held()
	id := first[:len(first)-len(" pending")]
	if _, err := st.DecideApproval(ctx, id, approval.Decision{Status: approval.Approved, By: "alice"}, now); err != nil {
		t.Fatal(err)
	}

	// Approved; the breaker then refuses the call: the approval comes back.
	c := call()
	if err := k.Check(ctx, c); err != nil {
		t.Fatalf("approved call refused: %v", err)
	}
	c.Finish(audit.OutcomeRefused)
	if a, err := st.GetApproval(ctx, id); err != nil || a.Status != approval.Approved {
		t.Fatalf("after a refusal further on: %+v, %v; want %s approved again", a, err, id)
	}

	// The next identical call runs on it and uses it up for good.
	c = call()
	if err := k.Check(ctx, c); err != nil {
		t.Fatalf("call after give-back refused: %v", err)
	}
	c.Finish(audit.OutcomeIndeterminate) // sent; the upstream timed out: it may have run
	if a, err := st.GetApproval(ctx, id); err != nil || a.Status != approval.Consumed {
		t.Fatalf("after a sent call: %+v, %v; want consumed", a, err)
	}
	if got := held(); got == first || got[len(got)-len("pending"):] != "pending" {
		t.Fatalf("next call: %s; want a new pending approval", got)
	}
}
