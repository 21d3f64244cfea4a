package memstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

var apT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const apTTL = time.Hour

// apCand is a pending candidate for slot hash at now, with params.
func apCand(hash string, params []byte, now time.Time) approval.Approval {
	return approval.Approval{
		ID: approval.NewID(), Tenant: "acme", Caller: "agent", Server: "payments", Tool: "transfer",
		ParamsHash: hash, Params: params, Status: approval.Pending,
		Created: now, Expires: now.Add(apTTL), CorrelationID: "corr-" + hash,
	}
}

func apHold(t *testing.T, s *Store, c approval.Approval, now time.Time) approval.Approval {
	t.Helper()
	a, created, err := s.HoldApproval(context.Background(), c, now)
	if err != nil || !created {
		t.Fatalf("HoldApproval(%s) = created %v, %v; want a new approval", c.ParamsHash, created, err)
	}
	return a
}

// apRunning holds hash's call, approves it and takes it for a call: the
// running approval.
func apRunning(t *testing.T, s *Store, hash string, now time.Time) approval.Approval {
	t.Helper()
	ctx := context.Background()
	a := apHold(t, s, apCand(hash, []byte(`{"amount":5}`), now), now)
	if _, err := s.DecideApproval(ctx, a.ID, approval.Decision{Status: approval.Approved, By: "alice"}, now); err != nil {
		t.Fatal(err)
	}
	u := approval.Use{ID: approval.NewID(), CorrelationID: "use-" + hash, Started: now, LeaseUntil: now.Add(time.Minute)}
	run, err := s.ConsumeApproval(ctx, a, u, now)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Issue 11 item 9: 80 held calls with 1 MB (masked) arguments are kept
// while they are pending, and forgotten once past APPROVAL_TTL, by the
// store's accounting and by the heap.
func TestApprovalsSweptAfterTTL(t *testing.T) {
	const n, mb = 80, 1 << 20
	base := heapAlloc()
	s := New()
	params := append(append([]byte(`{"blob":"`), bytes.Repeat([]byte("x"), mb)...), `"}`...)
	for i := range n {
		apHold(t, s, apCand(fmt.Sprint("big-", i), params, apT0), apT0)
	}
	params = nil
	if u := s.Usage(); u.Approvals != n || u.ApprovalIDs != n || u.ApprovalBytes < n*mb {
		t.Fatalf("while held: %+v; want %d approvals of over 1 MB", u, n)
	}
	if held := heapAlloc(); held < base+n*mb {
		t.Fatalf("heap %d MB over the start while %d MB are held", (held-base)>>20, n)
	}
	// The next hold after the TTL sweeps them.
	later := apT0.Add(apTTL + time.Second)
	apHold(t, s, apCand("small", []byte(`{"amount":5}`), later), later)
	if u := s.Usage(); u.Approvals != 1 || u.ApprovalIDs != 1 || u.ApprovalBytes > 4<<10 {
		t.Fatalf("after the TTL: %+v; want only the new approval", u)
	}
	if after := heapAlloc(); after > base+16<<20 {
		t.Fatalf("heap still %d MB over the start after the sweep", (after-base)>>20)
	}
	runtime.KeepAlive(s)
}

// A running approval, in its slot or superseded while running, is never
// swept, by time or at a cap, and never becomes usable again; settled and
// expired ones, and superseded ids, are.
func TestRunningApprovalSurvivesSweep(t *testing.T) {
	ctx := context.Background()
	s := New()
	inSlot := apRunning(t, s, "in-slot", apT0)
	movedRun := apRunning(t, s, "moved", apT0)
	super := apHold(t, s, apCand("moved", []byte(`{"amount":5}`), apT0), apT0) // supersedes movedRun
	settled := apRunning(t, s, "settled", apT0)
	if _, err := s.SettleApproval(ctx, settled, approval.Answered, apT0); err != nil {
		t.Fatal(err)
	}
	pending := apHold(t, s, apCand("pending", nil, apT0), apT0)

	// Past the TTL and every lease, by time.
	later := apT0.Add(2 * apTTL)
	next := apHold(t, s, apCand("next", nil, later), later)
	for _, run := range []approval.Approval{inSlot, movedRun} {
		got, err := s.GetApproval(ctx, run.ID)
		if err != nil || got.Status != approval.Running || got.Use == nil || got.Use.ID != run.Use.ID {
			t.Fatalf("running %s after the sweep: %+v, %v; want it kept, running", run.ParamsHash, got, err)
		}
	}
	for _, gone := range []approval.Approval{super, settled, pending} {
		if _, err := s.GetApproval(ctx, gone.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s past its TTL: %v; want it swept", gone.ParamsHash, err)
		}
	}
	if u := s.Usage(); u.Approvals != 3 || u.ApprovalIDs != 3 {
		t.Fatalf("after the sweep: %+v; want the two running ones and %s", u, next.ID)
	}

	// At a cap, the hard sweep keeps them too, and the hold is refused.
	s.approvals.maxIDs = 3
	if _, _, err := s.HoldApproval(ctx, apCand("refused", nil, later), later); !errors.Is(err, ErrApprovalsFull) {
		t.Fatalf("hold at the cap = %v; want ErrApprovalsFull", err)
	}
	s.approvals.maxIDs = 0
	// Neither is usable again: the same call is held afresh, the running
	// one moves and stays.
	again := apHold(t, s, apCand("in-slot", nil, later), later)
	if again.ID == inSlot.ID || again.Status != approval.Pending {
		t.Fatalf("the call of a running approval got %+v; want a new pending approval", again)
	}
	if _, err := s.ConsumeApproval(ctx, inSlot, *inSlot.Use, later); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ConsumeApproval(running) = %v; want ErrConflict", err)
	}
	for _, run := range []approval.Approval{inSlot, movedRun} {
		done, err := s.SettleApproval(ctx, run, approval.Indeterminate, later)
		if err != nil || done.Status != approval.Consumed {
			t.Fatalf("settle %s after the sweeps: %+v, %v", run.ParamsHash, done, err)
		}
	}
}

// At the count cap, a new hold fails with an error that is not a
// refusal, and what is held stays: nothing live is dropped to make room.
// The approval check then answers -32061 "unavailable" (fails closed).
func TestApprovalCountCap(t *testing.T) {
	ctx := context.Background()
	s := New()
	s.approvals.maxIDs = 3
	var held []approval.Approval
	for i := range 3 {
		held = append(held, apHold(t, s, apCand(fmt.Sprint("p-", i), nil, apT0), apT0))
	}
	_, _, err := s.HoldApproval(ctx, apCand("p-3", nil, apT0), apT0)
	var ref *refusal.Refusal
	if !errors.Is(err, ErrApprovalsFull) || !errors.Is(err, store.ErrUnavailable) || errors.As(err, &ref) {
		t.Fatalf("hold over the cap = %v; want ErrApprovalsFull, store.ErrUnavailable, no refusal", err)
	}
	for _, h := range held {
		if got, err := s.GetApproval(ctx, h.ID); err != nil || got.Status != approval.Pending {
			t.Fatalf("%s after the refused hold: %+v, %v; want it still pending", h.ParamsHash, got, err)
		}
		// A live approval is still answered at the cap.
		if got, created, err := s.HoldApproval(ctx, apCand(h.ParamsHash, nil, apT0), apT0); err != nil || created || got.ID != h.ID {
			t.Fatalf("hold of held %s at the cap = %s created %v, %v", h.ParamsHash, got.ID, created, err)
		}
	}

	// Through the check and the pipeline: -32061, status unavailable.
	p := apPipeline(t, s)
	c := &pipeline.Call{
		Tenant: registry.Tenant{ID: "acme"}, Caller: "agent", Method: "tools/call", CorrelationID: "corr-full",
		ID: json.RawMessage(`1`), Params: json.RawMessage(`{"name":"transfer","arguments":{"amount":6}}`),
		Tool: "transfer", UpstreamTool: "transfer", Server: &registry.Server{Tenant: "acme", Name: "payments"},
		Settings: registry.ToolSettings{RequiresApproval: true},
	}
	err = p.Run(ctx, c)
	if !errors.As(err, &ref) || ref.Code != refusal.CodeApprovalRequired || ref.Fields["status"] != refusal.ApprovalUnavailable {
		t.Fatalf("call at the cap = %v; want -32061 unavailable", err)
	}
	if u := s.Usage(); u.ApprovalIDs != 3 {
		t.Fatalf("%+v; want the three held", u)
	}
}

// At the byte cap, settled (consumed) approvals are dropped to make room;
// live and running ones are not, and the hold is refused when only they
// are left.
func TestApprovalByteCap(t *testing.T) {
	ctx := context.Background()
	s := New()
	kb := bytes.Repeat([]byte("y"), 1<<10)
	live := apHold(t, s, apCand("live", kb, apT0), apT0)
	run := apRunning(t, s, "run", apT0)
	settled := apRunning(t, s, "settled", apT0)
	if _, err := s.SettleApproval(ctx, settled, approval.Answered, apT0); err != nil {
		t.Fatal(err)
	}
	s.approvals.maxBytes = s.Usage().ApprovalBytes + 1<<10 // room for less than one more with 1 KiB params
	next := apHold(t, s, apCand("next", kb, apT0), apT0)   // fits once the settled one is gone
	if _, err := s.GetApproval(ctx, settled.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("settled approval at the byte cap: %v; want it dropped", err)
	}
	if _, _, err := s.HoldApproval(ctx, apCand("over", kb, apT0), apT0); !errors.Is(err, ErrApprovalsFull) {
		t.Fatalf("hold over the byte cap = %v; want ErrApprovalsFull", err)
	}
	for _, a := range []approval.Approval{live, run, next} {
		if _, err := s.GetApproval(ctx, a.ID); err != nil {
			t.Fatalf("%s at the byte cap: %v; want it kept", a.ParamsHash, err)
		}
	}
	if u := s.Usage(); u.ApprovalBytes > s.approvals.maxBytes {
		t.Fatalf("%+v; over the byte cap %d", u, s.approvals.maxBytes)
	}
}

// The store's byte count follows every change, back to zero when all is
// swept.
func TestApprovalBytesBalance(t *testing.T) {
	ctx := context.Background()
	s := New()
	a := apHold(t, s, apCand("a", []byte(`{"amount":5}`), apT0), apT0)
	if _, err := s.DecideApproval(ctx, a.ID, approval.Decision{Status: approval.Approved, By: "alice", Reason: "ok, go"}, apT0); err != nil {
		t.Fatal(err)
	}
	u := approval.Use{ID: approval.NewID(), CorrelationID: "c", Started: apT0, LeaseUntil: apT0.Add(time.Minute)}
	run, err := s.ConsumeApproval(ctx, a, u, apT0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReleaseApproval(ctx, run, apT0); err != nil {
		t.Fatal(err)
	}
	if run, err = s.ConsumeApproval(ctx, a, u, apT0); err != nil {
		t.Fatal(err)
	}
	apHold(t, s, apCand("a", nil, apT0), apT0) // moves run
	if _, err := s.SettleApproval(ctx, run, approval.Answered, apT0); err != nil {
		t.Fatal(err)
	}
	s.approvals.mu.Lock()
	want := 0
	for _, ap := range s.approvals.slots {
		want += approvalSize(ap)
	}
	for _, ap := range s.approvals.moved {
		want += approvalSize(ap)
	}
	for id, e := range s.approvals.byID {
		want += idSize(id, e.slot)
	}
	got := s.approvals.bytes
	s.approvals.sweep(apT0.Add(apTTL), true)
	left := s.approvals.bytes
	s.approvals.mu.Unlock()
	if got != want || want == 0 {
		t.Fatalf("counted %d bytes; the records add up to %d", got, want)
	}
	if left != 0 {
		t.Fatalf("%d bytes counted after everything was swept", left)
	}
}

// apPipeline is a pipeline with only the approval check, wired as the
// gateway's stage table wires it (fails closed, approval.Unavailable).
func apPipeline(t *testing.T, s *Store) *pipeline.Pipeline {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var st []pipeline.Stage
	for _, slot := range append(append([]pipeline.Slot{}, pipeline.Order[:]...), pipeline.ResultOrder[:]...) {
		row := pipeline.Stage{Slot: slot, Scope: pipeline.Decided, Mode: pipeline.FailClosed}
		if slot == pipeline.Approval {
			row.Check = approval.New(s, approval.Options{Logger: quiet, Now: func() time.Time { return apT0 }})
			row.Unavailable = approval.Unavailable
		}
		st = append(st, row)
	}
	p, err := pipeline.New(st, &pipeline.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
