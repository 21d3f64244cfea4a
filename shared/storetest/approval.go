package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/store"
)

// NewApprovalStore returns a fresh, empty approval store; it registers its
// own cleanup.

// testApprovals is the approval store's contract (shared/approval.Store).
func testApprovals(t *testing.T, nb func(t *testing.T) backend.Backend) {
	t.Run("hold", func(t *testing.T) { testApprovalHold(t, nb(t)) })
	t.Run("decide", func(t *testing.T) { testApprovalDecide(t, nb(t)) })
	t.Run("consume", func(t *testing.T) { testApprovalConsume(t, nb(t)) })
	t.Run("release", func(t *testing.T) { testApprovalRelease(t, nb(t)) })
	t.Run("expiry", func(t *testing.T) { testApprovalExpiry(t, nb(t)) })
	t.Run("races", func(t *testing.T) { testApprovalRaces(t, nb(t)) })
	t.Run("list", func(t *testing.T) { testApprovalList(t, nb(t)) })
	t.Run("settle", func(t *testing.T) { testApprovalSettle(t, nb(t)) })
	t.Run("in use", func(t *testing.T) { testApprovalInUse(t, nb(t)) })
	t.Run("in use past expiry", func(t *testing.T) { testApprovalInUseExpiry(t, nb(t)) })
	t.Run("use races", func(t *testing.T) { testApprovalUseRaces(t, nb(t)) })
}

const approvalTTL = time.Hour

func cand(tenant, caller, tool, hash string, now time.Time) approval.Approval {
	return approval.Approval{
		ID: approval.NewID(), Tenant: tenant, Caller: caller, Server: "payments", Tool: tool,
		ParamsHash: hash, Params: []byte(`{"amount":5,"to":"acct-1"}`), Status: approval.Pending,
		Created: now, Expires: now.Add(approvalTTL), CorrelationID: "corr-" + tool,
	}
}

func hold(t *testing.T, s approval.Store, c approval.Approval, now time.Time) (approval.Approval, bool) {
	t.Helper()
	a, created, err := s.HoldApproval(ctx(t), c, now)
	if err != nil {
		t.Fatalf("HoldApproval: %v", err)
	}
	return a, created
}

func sameApproval(t *testing.T, what string, got, want approval.Approval) {
	t.Helper()
	if got.ID != want.ID || got.Slot() != want.Slot() || got.Status != want.Status ||
		!got.Created.Equal(want.Created) || !got.Expires.Equal(want.Expires) ||
		string(got.Params) != string(want.Params) || got.CorrelationID != want.CorrelationID ||
		got.DecidedBy != want.DecidedBy || got.Reason != want.Reason || !got.DecidedAt.Equal(want.DecidedAt) ||
		!got.ConsumedAt.Equal(want.ConsumedAt) {
		t.Fatalf("%s = %+v\nwant %+v", what, got, want)
	}
}

func testApprovalHold(t *testing.T, s approval.Store) {
	c := cand("acme", "agent-1", "transfer", "h1", t0)
	a, created := hold(t, s, c, t0)
	if !created {
		t.Fatal("first hold: created = false")
	}
	sameApproval(t, "first hold", a, c)
	got, err := s.GetApproval(ctx(t), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameApproval(t, "GetApproval", got, c)

	// The same call again, later: the same approval.
	again, created := hold(t, s, cand("acme", "agent-1", "transfer", "h1", t0.Add(time.Minute)), t0.Add(time.Minute))
	if created || again.ID != c.ID {
		t.Fatalf("repeat hold = %s created=%v, want %s", again.ID, created, c.ID)
	}
	// Another caller, other params, another tool or tenant: their own.
	for _, o := range []approval.Approval{
		cand("acme", "agent-2", "transfer", "h1", t0),
		cand("acme", "agent-1", "transfer", "h2", t0),
		cand("acme", "agent-1", "refund", "h1", t0),
		cand("beta", "agent-1", "transfer", "h1", t0),
	} {
		if a, created := hold(t, s, o, t0); !created || a.ID != o.ID {
			t.Fatalf("hold of %+v = %s created=%v; want its own approval", o.Slot(), a.ID, created)
		}
	}
	if _, err := s.GetApproval(ctx(t), approval.NewID()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetApproval(unknown) = %v, want ErrNotFound", err)
	}
}

func testApprovalDecide(t *testing.T, s approval.Store) {
	c := cand("acme", "agent-1", "transfer", "h1", t0)
	hold(t, s, c, t0)
	if _, err := s.DecideApproval(ctx(t), approval.NewID(), approval.Decision{Status: approval.Approved, By: "ops"}, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DecideApproval(unknown) = %v, want ErrNotFound", err)
	}
	at := t0.Add(2 * time.Minute)
	a, err := s.DecideApproval(ctx(t), c.ID, approval.Decision{Status: approval.Approved, By: "alice", Reason: "ticket 7"}, at)
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.Status, want.DecidedBy, want.Reason, want.DecidedAt = approval.Approved, "alice", "ticket 7", at
	sameApproval(t, "approved", a, want)
	if got, _ := s.GetApproval(ctx(t), c.ID); got.Status != approval.Approved {
		t.Fatalf("GetApproval after approve: status %s", got.Status)
	}
	// Deciding again, either way, is a conflict that shows the approval as it is.
	for _, st := range []approval.Status{approval.Approved, approval.Denied} {
		got, err := s.DecideApproval(ctx(t), c.ID, approval.Decision{Status: st, By: "bob"}, at)
		if !errors.Is(err, store.ErrConflict) || got.Status != approval.Approved || got.DecidedBy != "alice" {
			t.Fatalf("second decision (%s) = %+v, %v; want ErrConflict with alice's approval", st, got, err)
		}
	}
	// A denial is what a repeat hold then sees.
	d := cand("acme", "agent-1", "transfer", "h-denied", t0)
	hold(t, s, d, t0)
	if _, err := s.DecideApproval(ctx(t), d.ID, approval.Decision{Status: approval.Denied, By: "alice", Reason: "no"}, at); err != nil {
		t.Fatal(err)
	}
	if a, created := hold(t, s, cand("acme", "agent-1", "transfer", "h-denied", at), at); created || a.ID != d.ID || a.Status != approval.Denied || a.Reason != "no" {
		t.Fatalf("hold after denial = %+v created=%v; want the denial", a, created)
	}
}

// slotIs checks that SlotApproval finds approval id (none: "") in
// status st in slot sl.
func slotIs(t *testing.T, s approval.Store, sl approval.Slot, id string, st approval.Status) {
	t.Helper()
	a, found, err := s.SlotApproval(ctx(t), sl)
	if err != nil || found != (id != "") || (found && (a.ID != id || a.Status != st || a.Slot() != sl)) {
		t.Fatalf("SlotApproval = %+v, %v, %v; want %q %s", a, found, err, id, st)
	}
}

func testApprovalConsume(t *testing.T, s approval.Store) {
	c := cand("acme", "agent-1", "transfer", "h1", t0)
	slotIs(t, s, c.Slot(), "", "")
	hold(t, s, c, t0)
	slotIs(t, s, c.Slot(), c.ID, approval.Pending)
	slotIs(t, s, cand("acme", "agent-2", "transfer", "h1", t0).Slot(), "", "") // another caller's slot
	if _, err := s.ConsumeApproval(ctx(t), c, use(t0), t0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ConsumeApproval(pending) = %v, want ErrConflict", err)
	}
	at := t0.Add(time.Minute)
	if _, err := s.DecideApproval(ctx(t), c.ID, approval.Decision{Status: approval.Approved, By: "alice"}, at); err != nil {
		t.Fatal(err)
	}
	slotIs(t, s, c.Slot(), c.ID, approval.Approved)
	a, created := hold(t, s, cand("acme", "agent-1", "transfer", "h1", at), at)
	if created || a.Status != approval.Approved {
		t.Fatalf("hold after approval = %+v created=%v", a, created)
	}
	used, err := s.ConsumeApproval(ctx(t), a, use(at), at)
	if err != nil || used.Status != approval.Running || !used.ConsumedAt.Equal(at) {
		t.Fatalf("ConsumeApproval = %+v, %v; want running since %v", used, err, at)
	}
	slotIs(t, s, c.Slot(), c.ID, approval.Running)
	if _, err := s.ConsumeApproval(ctx(t), a, use(at), at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second ConsumeApproval = %v, want ErrConflict", err)
	}
	if _, err := s.SettleApproval(ctx(t), used, approval.Answered, at); err != nil {
		t.Fatal(err)
	}
	// The next identical call is held afresh; the used approval is superseded.
	next, created := hold(t, s, cand("acme", "agent-1", "transfer", "h1", at), at)
	if !created || next.ID == c.ID || next.Status != approval.Pending {
		t.Fatalf("hold after consumption = %+v created=%v; want a new pending approval", next, created)
	}
	if _, err := s.GetApproval(ctx(t), c.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetApproval(superseded) = %v, want ErrNotFound", err)
	}
	if _, err := s.DecideApproval(ctx(t), c.ID, approval.Decision{Status: approval.Approved, By: "alice"}, at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("DecideApproval(superseded) = %v, want ErrConflict", err)
	}
	if _, err := s.ConsumeApproval(ctx(t), a, use(at), at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ConsumeApproval(superseded) = %v, want ErrConflict", err)
	}
}

func testApprovalRelease(t *testing.T, s approval.Store) {
	c := cand("acme", "agent-1", "transfer", "h1", t0)
	hold(t, s, c, t0)
	if _, err := s.DecideApproval(ctx(t), c.ID, approval.Decision{Status: approval.Approved, By: "alice"}, t0); err != nil {
		t.Fatal(err)
	}
	a, _ := hold(t, s, cand("acme", "agent-1", "transfer", "h1", t0), t0)
	if _, err := s.ReleaseApproval(ctx(t), a, t0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReleaseApproval(not consumed) = %v, want ErrConflict", err)
	}
	at := t0.Add(time.Minute)
	used, err := s.ConsumeApproval(ctx(t), a, use(at), at)
	if err != nil {
		t.Fatal(err)
	}
	back, err := s.ReleaseApproval(ctx(t), used, at)
	if err != nil || back.Status != approval.Approved || !back.ConsumedAt.IsZero() || back.ID != c.ID {
		t.Fatalf("ReleaseApproval = %+v, %v; want %s approved again", back, err, c.ID)
	}
	// The next identical call finds it approved, and can use it once.
	cur, created := hold(t, s, cand("acme", "agent-1", "transfer", "h1", at), at)
	if created || cur.ID != c.ID || cur.Status != approval.Approved || cur.DecidedBy != "alice" {
		t.Fatalf("hold after release = %+v created=%v; want the same approval, approved by alice", cur, created)
	}
	if _, err := s.ReleaseApproval(ctx(t), used, at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second ReleaseApproval = %v, want ErrConflict", err)
	}
	again, err := s.ConsumeApproval(ctx(t), cur, use(at), at)
	if err != nil {
		t.Fatal(err)
	}
	// Superseded by a new hold: no longer the slot's approval, nothing to give back.
	hold(t, s, cand("acme", "agent-1", "transfer", "h1", at), at)
	if _, err := s.ReleaseApproval(ctx(t), again, at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReleaseApproval(superseded) = %v, want ErrConflict", err)
	}
	// Expired: cannot come back.
	e := cand("acme", "agent-1", "transfer", "h2", t0)
	hold(t, s, e, t0)
	if _, err := s.DecideApproval(ctx(t), e.ID, approval.Decision{Status: approval.Approved, By: "alice"}, t0); err != nil {
		t.Fatal(err)
	}
	ea, _ := hold(t, s, cand("acme", "agent-1", "transfer", "h2", t0), t0)
	eu, err := s.ConsumeApproval(ctx(t), ea, use(t0), t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReleaseApproval(ctx(t), eu, t0.Add(approvalTTL)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReleaseApproval(expired) = %v, want ErrConflict", err)
	}
}

func testApprovalExpiry(t *testing.T, s approval.Store) {
	end := t0.Add(approvalTTL)
	// Pending until the end: then it cannot be decided and a new hold replaces it.
	p := cand("acme", "agent-1", "transfer", "pending", t0)
	hold(t, s, p, t0)
	if got, err := s.DecideApproval(ctx(t), p.ID, approval.Decision{Status: approval.Approved, By: "late"}, end); !errors.Is(err, store.ErrConflict) || got.ID != p.ID {
		t.Fatalf("DecideApproval(expired) = %+v, %v; want ErrConflict", got, err)
	}
	if a, created := hold(t, s, cand("acme", "agent-1", "transfer", "pending", end), end); !created || a.ID == p.ID {
		t.Fatalf("hold after expiry = %s created=%v; want a new approval", a.ID, created)
	}
	// Approved, then expired before use: cannot be consumed; held afresh.
	ap := cand("acme", "agent-1", "transfer", "approved", t0)
	hold(t, s, ap, t0)
	if _, err := s.DecideApproval(ctx(t), ap.ID, approval.Decision{Status: approval.Approved, By: "alice"}, end.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	cur, _ := hold(t, s, cand("acme", "agent-1", "transfer", "approved", end.Add(-time.Second)), end.Add(-time.Second))
	if _, err := s.ConsumeApproval(ctx(t), cur, use(end), end); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ConsumeApproval(expired) = %v, want ErrConflict", err)
	}
	if a, created := hold(t, s, cand("acme", "agent-1", "transfer", "approved", end), end); !created || a.ID == ap.ID {
		t.Fatalf("hold after approved expiry = %s created=%v; want a new approval", a.ID, created)
	}
	// Denied, then expired: the denial no longer applies.
	dn := cand("acme", "agent-1", "transfer", "denied", t0)
	hold(t, s, dn, t0)
	if _, err := s.DecideApproval(ctx(t), dn.ID, approval.Decision{Status: approval.Denied, By: "alice"}, t0); err != nil {
		t.Fatal(err)
	}
	if a, created := hold(t, s, cand("acme", "agent-1", "transfer", "denied", end), end); !created || a.Status != approval.Pending {
		t.Fatalf("hold after denial expiry = %+v created=%v; want a new pending approval", a, created)
	}
}

func testApprovalRaces(t *testing.T, s approval.Store) {
	const n = 12
	// Racing holds of one slot: one approval, created once.
	var wg sync.WaitGroup
	ids := make([]string, n)
	createdN := 0
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, created, err := s.HoldApproval(ctx(t), cand("acme", "agent-1", "transfer", "race", t0), t0)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			ids[i] = a.ID
			if created {
				createdN++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if createdN != 1 {
		t.Fatalf("%d racing holds created %d approvals, want 1", n, createdN)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("racing holds returned different ids: %v", ids)
		}
	}
	if _, err := s.DecideApproval(ctx(t), ids[0], approval.Decision{Status: approval.Approved, By: "alice"}, t0); err != nil {
		t.Fatal(err)
	}
	a, _ := hold(t, s, cand("acme", "agent-1", "transfer", "race", t0), t0)
	// Racing consumptions of one approval: exactly one wins.
	won := 0
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.ConsumeApproval(ctx(t), a, use(t0), t0)
			switch {
			case err == nil:
				mu.Lock()
				won++
				mu.Unlock()
			case !errors.Is(err, store.ErrConflict):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d racing consumptions: %d won, want exactly 1", n, won)
	}
}

func testApprovalList(t *testing.T, s approval.Store) {
	if got, err := s.ListApprovals(ctx(t), approval.Filter{}); err != nil || len(got) != 0 {
		t.Fatalf("ListApprovals(empty) = %+v, %v", got, err)
	}
	a1 := cand("acme", "agent-1", "transfer", "h1", t0)
	a2 := cand("acme", "agent-2", "transfer", "h1", t0.Add(time.Second))
	b1 := cand("beta", "agent-1", "transfer", "h1", t0.Add(2*time.Second))
	for _, c := range []approval.Approval{b1, a2, a1} {
		hold(t, s, c, c.Created)
	}
	got, err := s.ListApprovals(ctx(t), approval.Filter{Tenant: "acme"})
	if err != nil || len(got) != 2 || got[0].ID != a1.ID || got[1].ID != a2.ID {
		t.Fatalf("ListApprovals(acme) = %+v, %v; want a1, a2", got, err)
	}
	sameApproval(t, "listed", got[0], a1)
	all, err := s.ListApprovals(ctx(t), approval.Filter{})
	if err != nil || len(all) != 3 || all[2].ID != b1.ID {
		t.Fatalf("ListApprovals(all) = %+v, %v; want a1, a2, b1", all, err)
	}
	// A consumed approval that was superseded is not listed; its successor is.
	if _, err := s.DecideApproval(ctx(t), a1.ID, approval.Decision{Status: approval.Approved, By: "alice"}, t0); err != nil {
		t.Fatal(err)
	}
	cur, _ := hold(t, s, cand("acme", "agent-1", "transfer", "h1", t0), t0)
	used, err := s.ConsumeApproval(ctx(t), cur, use(t0), t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SettleApproval(ctx(t), used, approval.Answered, t0); err != nil {
		t.Fatal(err)
	}
	next, _ := hold(t, s, cand("acme", "agent-1", "transfer", "h1", t0.Add(3*time.Second)), t0.Add(3*time.Second))
	got, _ = s.ListApprovals(ctx(t), approval.Filter{Tenant: "acme"})
	if len(got) != 2 || got[0].ID != a2.ID || got[1].ID != next.ID {
		t.Fatalf("ListApprovals(acme) after supersede = %+v; want a2, then the new hold", got)
	}
}

// use is a call's use of an approval, taken at now.
func use(now time.Time) approval.Use {
	id := approval.NewID()
	return approval.Use{ID: id, CorrelationID: "corr-" + id[:8], Started: now, LeaseUntil: now.Add(time.Minute)}
}

// approved holds c at now, approves it and returns it as the next hold of
// its slot sees it.
func approved(t *testing.T, s approval.Store, c approval.Approval, now time.Time) approval.Approval {
	t.Helper()
	hold(t, s, c, now)
	if _, err := s.DecideApproval(ctx(t), c.ID, approval.Decision{Status: approval.Approved, By: "alice"}, now); err != nil {
		t.Fatal(err)
	}
	a, created := hold(t, s, c, now)
	if created || a.ID != c.ID || a.Status != approval.Approved {
		t.Fatalf("hold after approval = %+v created=%v", a, created)
	}
	return a
}

// sameUse is sameApproval that also compares the Use.
func sameUse(t *testing.T, what string, got, want approval.Approval) {
	t.Helper()
	sameApproval(t, what, got, want)
	g, w := got.Use, want.Use
	if (g == nil) != (w == nil) || g != nil && (g.ID != w.ID || g.CorrelationID != w.CorrelationID ||
		!g.Started.Equal(w.Started) || !g.LeaseUntil.Equal(w.LeaseUntil) || g.Outcome != w.Outcome || !g.SettledAt.Equal(w.SettledAt)) {
		t.Fatalf("%s: use = %+v, want %+v", what, g, w)
	}
}

// listed returns the listed approval id of tenant acme (ok false when absent).
func listed(t *testing.T, s approval.Store, id string) (approval.Approval, bool) {
	t.Helper()
	all, err := s.ListApprovals(ctx(t), approval.Filter{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if a.ID == id {
			return a, true
		}
	}
	return approval.Approval{}, false
}

// The use of an approval is stored before the call is sent (running, with
// its use), and settled after it (consumed, with the outcome). Only the
// holder of the use settles it, once.
func testApprovalSettle(t *testing.T, s approval.Store) {
	at := t0.Add(time.Minute)
	a := approved(t, s, cand("acme", "agent-1", "transfer", "h1", t0), t0)
	u := use(at)
	run, err := s.ConsumeApproval(ctx(t), a, u, at)
	if err != nil {
		t.Fatal(err)
	}
	want := a
	want.Status, want.ConsumedAt, want.Use = approval.Running, at, &u
	sameUse(t, "ConsumeApproval", run, want)
	got, err := s.GetApproval(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameUse(t, "GetApproval while running", got, want)
	if l, ok := listed(t, s, a.ID); !ok {
		t.Fatal("a running approval is not listed")
	} else {
		sameUse(t, "listed while running", l, want)
	}
	if got.Shown(at) != approval.Running || got.Shown(u.LeaseUntil) != approval.Unsettled {
		t.Fatalf("shown %s within its lease and %s after; want running, unsettled", got.Shown(at), got.Shown(u.LeaseUntil))
	}

	// Another use (a stale or forged one) can neither settle nor give it back.
	other := run
	ou := use(at)
	other.Use = &ou
	if _, err := s.SettleApproval(ctx(t), other, approval.Answered, at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("SettleApproval(other use) = %v, want ErrConflict", err)
	}
	if _, err := s.ReleaseApproval(ctx(t), other, at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReleaseApproval(other use) = %v, want ErrConflict", err)
	}

	end := at.Add(time.Second)
	done, err := s.SettleApproval(ctx(t), run, approval.Answered, end)
	if err != nil {
		t.Fatal(err)
	}
	want = want.Settled(approval.Answered, end)
	if want.Status != approval.Consumed || want.Use.Outcome != approval.Answered {
		t.Fatalf("Settled = %+v", want)
	}
	sameUse(t, "SettleApproval", done, want)
	got, err = s.GetApproval(ctx(t), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameUse(t, "GetApproval after settling", got, want)

	// Settled is final: not settled again, given back, or taken again.
	if _, err := s.SettleApproval(ctx(t), run, approval.Failed, end); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second SettleApproval = %v, want ErrConflict", err)
	}
	if _, err := s.ReleaseApproval(ctx(t), run, end); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReleaseApproval(settled) = %v, want ErrConflict", err)
	}
	for _, x := range []approval.Approval{a, run, done} {
		if _, err := s.ConsumeApproval(ctx(t), x, use(end), end); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("ConsumeApproval(settled, as %s) = %v, want ErrConflict", x.Status, err)
		}
	}
	if next, created := hold(t, s, cand("acme", "agent-1", "transfer", "h1", end), end); !created || next.Status != approval.Pending {
		t.Fatalf("hold after settling = %+v created=%v; want a new pending approval", next, created)
	}

	// Every outcome is kept as given.
	for _, o := range []approval.Outcome{approval.Failed, approval.Indeterminate, approval.NotSent} {
		a := approved(t, s, cand("acme", "agent-1", "transfer", "h-"+string(o), t0), t0)
		run, err := s.ConsumeApproval(ctx(t), a, use(at), at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SettleApproval(ctx(t), run, o, end); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetApproval(ctx(t), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		sameUse(t, "settled "+string(o), got, run.Settled(o, end))
	}
}

// An approval in use is never taken again, never decided, and never given
// back once superseded; a new hold of its call supersedes it (the call is
// held afresh) but it stays visible, running, until it is settled.
func testApprovalInUse(t *testing.T, s approval.Store) {
	at := t0.Add(time.Minute)
	a := approved(t, s, cand("acme", "agent-1", "transfer", "h1", t0), t0)
	run, err := s.ConsumeApproval(ctx(t), a, use(at), at)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []approval.Approval{a, run} {
		if _, err := s.ConsumeApproval(ctx(t), x, use(at), at); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("ConsumeApproval(in use, as %s) = %v, want ErrConflict", x.Status, err)
		}
	}
	for _, st := range []approval.Status{approval.Approved, approval.Denied} {
		if got, err := s.DecideApproval(ctx(t), a.ID, approval.Decision{Status: st, By: "bob"}, at); !errors.Is(err, store.ErrConflict) || got.Status != approval.Running {
			t.Fatalf("DecideApproval(in use, %s) = %+v, %v; want ErrConflict with it running", st, got, err)
		}
	}

	// The same call again while it runs: held afresh, under a new approval.
	next, created := hold(t, s, cand("acme", "agent-1", "transfer", "h1", at), at)
	if !created || next.ID == a.ID || next.Status != approval.Pending {
		t.Fatalf("hold while in use = %+v created=%v; want a new pending approval", next, created)
	}
	if again, created := hold(t, s, cand("acme", "agent-1", "transfer", "h1", at), at); created || again.ID != next.ID {
		t.Fatalf("repeat hold = %s created=%v, want %s", again.ID, created, next.ID)
	}
	// The superseded one is still there, running, for operators to see.
	got, err := s.GetApproval(ctx(t), a.ID)
	if err != nil {
		t.Fatalf("GetApproval(superseded while running) = %v", err)
	}
	sameUse(t, "superseded while running", got, run)
	all, err := s.ListApprovals(ctx(t), approval.Filter{Tenant: "acme"})
	if err != nil || len(all) != 2 || all[0].ID != a.ID || all[1].ID != next.ID {
		t.Fatalf("ListApprovals = %+v, %v; want the running one, then the new hold", all, err)
	}
	sameUse(t, "listed superseded while running", all[0], run)
	if every, err := s.ListApprovals(ctx(t), approval.Filter{}); err != nil || len(every) != 2 {
		t.Fatalf("ListApprovals(all tenants) = %+v, %v; want 2", every, err)
	}
	if got, err := s.DecideApproval(ctx(t), a.ID, approval.Decision{Status: approval.Approved, By: "bob"}, at); !errors.Is(err, store.ErrConflict) || got.ID != a.ID {
		t.Fatalf("DecideApproval(superseded while running) = %+v, %v; want ErrConflict", got, err)
	}
	// Superseded: it cannot be given back (its slot has a new approval) ...
	if _, err := s.ReleaseApproval(ctx(t), run, at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ReleaseApproval(superseded while running) = %v, want ErrConflict", err)
	}
	if got, _ := s.GetApproval(ctx(t), a.ID); got.Status != approval.Running {
		t.Fatalf("after a refused give-back: %s, want running", got.Status)
	}
	// ... and the new approval is untouched by the old one's use.
	if got, _ := s.GetApproval(ctx(t), next.ID); got.Status != approval.Pending || got.Use != nil {
		t.Fatalf("new approval = %+v", got)
	}
	// Settling it, where it was moved, ends it: its history is the audit trail.
	end := at.Add(time.Second)
	done, err := s.SettleApproval(ctx(t), run, approval.Indeterminate, end)
	if err != nil {
		t.Fatal(err)
	}
	sameUse(t, "settled after being superseded", done, run.Settled(approval.Indeterminate, end))
	if _, err := s.GetApproval(ctx(t), a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetApproval(superseded, settled) = %v, want ErrNotFound", err)
	}
	if _, ok := listed(t, s, a.ID); ok {
		t.Fatal("a superseded, settled approval is still listed")
	}
	if _, err := s.SettleApproval(ctx(t), run, approval.Answered, end); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second SettleApproval = %v, want ErrConflict", err)
	}
	if got, _ := s.GetApproval(ctx(t), next.ID); got.Status != approval.Pending {
		t.Fatalf("new approval after the old one settled = %s, want pending", got.Status)
	}
}

// Expiry never makes an approval in use approvable again: past its TTL it
// is still running (shown unsettled), cannot be taken or given back, and
// its call is held afresh; its call can still settle it.
func testApprovalInUseExpiry(t *testing.T, s approval.Store) {
	end := t0.Add(approvalTTL)
	taken := end.Add(-time.Second)
	a := approved(t, s, cand("acme", "agent-1", "transfer", "h1", t0), t0)
	run, err := s.ConsumeApproval(ctx(t), a, use(taken), taken)
	if err != nil {
		t.Fatal(err)
	}
	b := approved(t, s, cand("acme", "agent-1", "transfer", "h2", t0), t0)
	runB, err := s.ConsumeApproval(ctx(t), b, use(taken), taken)
	if err != nil {
		t.Fatal(err)
	}
	for _, now := range []time.Time{run.Use.LeaseUntil, end.Add(10 * approvalTTL)} { // both past the TTL
		got, err := s.GetApproval(ctx(t), a.ID)
		if err != nil || got.Status != approval.Running || got.Shown(now) != approval.Unsettled {
			t.Fatalf("at %v: %+v, %v; want running, shown unsettled", now, got, err)
		}
		if _, err := s.ReleaseApproval(ctx(t), run, now); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("ReleaseApproval(in use, expired) = %v, want ErrConflict", err)
		}
		for _, x := range []approval.Approval{a, run} {
			if _, err := s.ConsumeApproval(ctx(t), x, use(now), now); !errors.Is(err, store.ErrConflict) {
				t.Fatalf("ConsumeApproval(in use, expired) = %v, want ErrConflict", err)
			}
		}
	}
	// Not even at a time before its expiry (a gateway with a slow clock).
	if _, err := s.ConsumeApproval(ctx(t), a, use(t0), t0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("ConsumeApproval(in use) = %v, want ErrConflict", err)
	}
	if got, _ := s.GetApproval(ctx(t), a.ID); got.Status != approval.Running {
		t.Fatalf("after a refused give-back and consumptions: %s, want running", got.Status)
	}
	// Its call again, past the TTL: held afresh, never run on the old one.
	next, created := hold(t, s, cand("acme", "agent-1", "transfer", "h1", end), end)
	if !created || next.ID == a.ID || next.Status != approval.Pending {
		t.Fatalf("hold after expiry of one in use = %+v created=%v; want a new pending approval", next, created)
	}
	if got, err := s.GetApproval(ctx(t), a.ID); err != nil || got.Status != approval.Running {
		t.Fatalf("superseded after expiry: %+v, %v; want running", got, err)
	}
	// A long call settles after the TTL, superseded or not.
	late := end.Add(time.Hour)
	if _, err := s.SettleApproval(ctx(t), run, approval.Answered, late); err != nil {
		t.Fatalf("SettleApproval(superseded, expired) = %v", err)
	}
	done, err := s.SettleApproval(ctx(t), runB, approval.Failed, late)
	if err != nil {
		t.Fatalf("SettleApproval(expired) = %v", err)
	}
	if got, err := s.GetApproval(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	} else {
		sameUse(t, "settled after expiry", got, done)
	}
}

// Settling and giving back race a new hold of the same call (the moved
// item): whichever lands first, the use is settled exactly once and
// nothing is left running.
func testApprovalUseRaces(t *testing.T, s approval.Store) {
	const rounds = 8
	for i := range rounds {
		hash := fmt.Sprintf("race-%d", i)
		a := approved(t, s, cand("acme", "agent-1", "transfer", hash, t0), t0)
		run, err := s.ConsumeApproval(ctx(t), a, use(t0), t0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var settleErr, releaseErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, _, err := s.HoldApproval(ctx(t), cand("acme", "agent-1", "transfer", hash, t0), t0); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if i%2 == 1 { // a refusal after the approval check: give back, else settle as not sent
				if _, releaseErr = s.ReleaseApproval(ctx(t), run, t0); releaseErr == nil {
					return
				}
			}
			_, settleErr = s.SettleApproval(ctx(t), run, approval.NotSent, t0)
		}()
		wg.Wait()
		if settleErr != nil {
			t.Fatalf("round %d: SettleApproval = %v (release %v); want it settled wherever it was", i, settleErr, releaseErr)
		}
		if releaseErr != nil && !errors.Is(releaseErr, store.ErrConflict) {
			t.Fatalf("round %d: ReleaseApproval = %v", i, releaseErr)
		}
		if _, err := s.SettleApproval(ctx(t), run, approval.Answered, t0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("round %d: second SettleApproval = %v, want ErrConflict", i, err)
		}
		got, err := s.GetApproval(ctx(t), a.ID)
		switch {
		case i%2 == 1 && releaseErr == nil:
			// Given back before the hold: the hold found it approved.
			if err != nil || got.Status != approval.Approved || got.Use != nil {
				t.Fatalf("round %d: given back = %+v, %v; want approved", i, got, err)
			}
		case err == nil && got.Status != approval.Consumed:
			t.Fatalf("round %d: %+v; want settled or gone", i, got)
		case err != nil && !errors.Is(err, store.ErrNotFound):
			t.Fatal(err)
		}
	}
	all, err := s.ListApprovals(ctx(t), approval.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if a.Status == approval.Running {
			t.Fatalf("left running after the races: %+v", a)
		}
	}
}
