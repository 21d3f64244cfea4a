package memstore

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/store"
)

// approvals holds each slot's current approval and an index from every id
// ever issued to its slot. A superseded id still resolves to its slot, whose
// current approval then has another id. A running approval that a new hold
// superseded moves to moved until it is settled.
type approvals struct {
	mu     sync.Mutex
	slots  map[approval.Slot]approval.Approval
	byID   map[string]approval.Slot
	moved  map[string]approval.Approval // by id: superseded while running
	failed error                        // SetApprovalFailure
}

// SetApprovalFailure makes every approval method fail with err (nil to
// heal): tests use it to show the approval check failing closed.
func (s *Store) SetApprovalFailure(err error) {
	a := &s.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed = err
}

func (a *approvals) init() {
	if a.slots == nil {
		a.slots = map[approval.Slot]approval.Approval{}
		a.byID = map[string]approval.Slot{}
		a.moved = map[string]approval.Approval{}
	}
}

// HoldApproval implements approval.Store.
func (s *Store) HoldApproval(_ context.Context, cand approval.Approval, now time.Time) (approval.Approval, bool, error) {
	a := &s.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		return approval.Approval{}, false, a.failed
	}
	a.init()
	slot := cand.Slot()
	cur, ok := a.slots[slot]
	if ok && cur.Live(now) {
		return clone(cur), false, nil
	}
	if ok && cur.Status == approval.Running {
		a.moved[cur.ID] = cur // its call may still be running: kept until settled
	}
	cand.Params = append([]byte(nil), cand.Params...)
	a.slots[slot] = cand
	a.byID[cand.ID] = slot
	return clone(cand), true, nil
}

// ConsumeApproval implements approval.Store.
func (s *Store) ConsumeApproval(_ context.Context, ap approval.Approval, u approval.Use, now time.Time) (approval.Approval, error) {
	return s.moveSlot(ap, approval.Approved, now, func(cur *approval.Approval) {
		cur.Status, cur.ConsumedAt, cur.Use = approval.Running, now.UTC(), &u
	})
}

// ReleaseApproval implements approval.Store.
func (s *Store) ReleaseApproval(_ context.Context, ap approval.Approval, now time.Time) (approval.Approval, error) {
	if ap.Use == nil {
		return approval.Approval{}, store.ErrConflict
	}
	return s.moveSlot(ap, approval.Running, now, func(cur *approval.Approval) {
		cur.Status, cur.ConsumedAt, cur.Use = approval.Approved, time.Time{}, nil
	})
}

// SettleApproval implements approval.Store: in its slot, or, superseded,
// among the moved ones (then it is dropped: its history is the audit trail).
func (s *Store) SettleApproval(_ context.Context, ap approval.Approval, o approval.Outcome, now time.Time) (approval.Approval, error) {
	a := &s.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		return approval.Approval{}, a.failed
	}
	a.init()
	if ap.Use == nil {
		return approval.Approval{}, store.ErrConflict
	}
	if cur, ok := a.slots[ap.Slot()]; ok && sameUse(cur, ap) {
		cur = cur.Settled(o, now)
		a.slots[ap.Slot()] = cur
		return clone(cur), nil
	}
	if cur, ok := a.moved[ap.ID]; ok && sameUse(cur, ap) {
		delete(a.moved, ap.ID)
		return clone(cur.Settled(o, now)), nil
	}
	return approval.Approval{}, store.ErrConflict
}

// sameUse reports whether cur is ap, running under ap's Use.
func sameUse(cur, ap approval.Approval) bool {
	return cur.ID == ap.ID && cur.Status == approval.Running && cur.Use != nil && ap.Use != nil && cur.Use.ID == ap.Use.ID
}

// moveSlot applies change to ap iff ap is still its slot's current
// approval, in status from (running under ap's Use when from is Running),
// and not expired at now; store.ErrConflict otherwise.
func (s *Store) moveSlot(ap approval.Approval, from approval.Status, now time.Time, change func(*approval.Approval)) (approval.Approval, error) {
	a := &s.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		return approval.Approval{}, a.failed
	}
	a.init()
	cur, ok := a.slots[ap.Slot()]
	if !ok || cur.ID != ap.ID || cur.Status != from || !now.Before(cur.Expires) ||
		(from == approval.Running && !sameUse(cur, ap)) {
		return approval.Approval{}, store.ErrConflict
	}
	change(&cur)
	a.slots[ap.Slot()] = cur
	return clone(cur), nil
}

// DecideApproval implements approval.Store.
func (s *Store) DecideApproval(_ context.Context, id string, d approval.Decision, now time.Time) (approval.Approval, error) {
	a := &s.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		return approval.Approval{}, a.failed
	}
	a.init()
	slot, ok := a.byID[id]
	if !ok {
		return approval.Approval{}, store.ErrNotFound
	}
	if m, ok := a.moved[id]; ok {
		return clone(m), store.ErrConflict // superseded, and still running
	}
	cur := a.slots[slot]
	if cur.ID != id {
		return approval.Approval{}, store.ErrConflict
	}
	if cur.Status != approval.Pending || !now.Before(cur.Expires) {
		return clone(cur), store.ErrConflict
	}
	cur.Status, cur.DecidedBy, cur.DecidedAt, cur.Reason = d.Status, d.By, now.UTC(), d.Reason
	a.slots[slot] = cur
	return clone(cur), nil
}

// GetApproval implements approval.Store.
func (s *Store) GetApproval(_ context.Context, id string) (approval.Approval, error) {
	a := &s.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		return approval.Approval{}, a.failed
	}
	a.init()
	if m, ok := a.moved[id]; ok {
		return clone(m), nil
	}
	slot, ok := a.byID[id]
	if !ok || a.slots[slot].ID != id {
		return approval.Approval{}, store.ErrNotFound
	}
	return clone(a.slots[slot]), nil
}

// ListApprovals implements approval.Store: oldest first, then by id.
func (s *Store) ListApprovals(_ context.Context, f approval.Filter) ([]approval.Approval, error) {
	a := &s.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failed != nil {
		return nil, a.failed
	}
	var out []approval.Approval
	for _, ap := range a.slots {
		if f.Tenant == "" || ap.Tenant == f.Tenant {
			out = append(out, clone(ap))
		}
	}
	for _, ap := range a.moved {
		if f.Tenant == "" || ap.Tenant == f.Tenant {
			out = append(out, clone(ap))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func clone(a approval.Approval) approval.Approval {
	a.Params = append([]byte(nil), a.Params...)
	if a.Use != nil {
		u := *a.Use
		a.Use = &u
	}
	return a
}

var _ approval.Store = (*Store)(nil)
