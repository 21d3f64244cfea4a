package memstore

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/store"
)

// The approvals' caps. Every approval kept, current in its slot, superseded
// while running, or superseded and kept only as its id's index entry, has
// one id: MaxApprovals counts those ids. MaxApprovalBytes counts the same
// records' estimated bytes, the masked Params being the big part (a call's
// arguments are at most MAX_BODY_BYTES, 1 MiB by default: about a hundred
// such calls fit).
const (
	MaxApprovals     = 10_000
	MaxApprovalBytes = 128 << 20
)

// ErrApprovalsFull is HoldApproval's error when a new approval would be
// over MaxApprovals or MaxApprovalBytes even after a sweep: what is left
// is live (pending or approved, or denied until it expires) or running,
// and none of that may be dropped. It wraps store.ErrUnavailable and is
// not a refusal, so the approval check fails closed: -32061 with status
// "unavailable", and the call never runs.
var ErrApprovalsFull = fmt.Errorf("memstore: approval store full: %w", store.ErrUnavailable)

// approvalSweepEvery and approvalSweepAfter are how many holds, and how
// long, pass at most between two sweeps of what is over (see sweep).
const (
	approvalSweepEvery = sweepEvery
	approvalSweepAfter = time.Minute
)

// approvals holds each slot's current approval and an index from the ids
// still kept to their slot. A superseded id still resolves to its slot,
// whose current approval then has another id, until it expires. A running
// approval that a new hold superseded moves to moved until it is settled.
//
// Holds sweep (every approvalSweepEvery holds, once approvalSweepAfter has
// passed, and whenever a cap is reached) every approval that is not
// running and is past its Expires, and the superseded ids past theirs; at
// a cap also the settled (consumed) ones and all superseded ids. A running
// approval is never swept, in its slot or moved: it is what shows that its
// call may have run. Over a cap after the sweep, a new hold is refused with
// ErrApprovalsFull.
type approvals struct {
	mu     sync.Mutex
	slots  map[approval.Slot]approval.Approval
	byID   map[string]idEntry
	moved  map[string]approval.Approval // by id: superseded while running
	failed error                        // SetApprovalFailure

	bytes     int       // estimated, of slots, moved and byID
	holds     int       // since the last sweep
	nextSweep time.Time // a hold at or after it sweeps
	// maxIDs and maxBytes are the caps in force; 0 = MaxApprovals,
	// MaxApprovalBytes (tests lower them).
	maxIDs, maxBytes int
}

// idEntry is an id's index entry: its slot, and when the approval it names
// expires (a superseded id is swept after that).
type idEntry struct {
	slot    approval.Slot
	expires time.Time
}

// Fixed parts of a record in memory, rounded up.
const (
	approvalOverhead = 384 // the Approval, its map entry and slot key
	useOverhead      = 128
	idOverhead       = 160 // an index entry: id, slot and expiry
)

func approvalSize(ap approval.Approval) int {
	n := approvalOverhead + len(ap.ID) + len(ap.Tenant) + len(ap.Caller) + len(ap.Server) + len(ap.Tool) +
		len(ap.ParamsHash) + len(ap.Params) + len(ap.CorrelationID) + len(ap.DecidedBy) + len(ap.Reason)
	if u := ap.Use; u != nil {
		n += useOverhead + len(u.ID) + len(u.CorrelationID) + len(u.Outcome)
	}
	return n
}

func idSize(id string, s approval.Slot) int {
	return idOverhead + len(id) + len(s.Tenant) + len(s.Caller) + len(s.Server) + len(s.Tool) + len(s.ParamsHash)
}

// SetApprovalFailure makes every approval method fail with err (nil to
// heal): tests use it to show the approval check failing closed.
func (s *Store) SetApprovalFailure(err error) {
	a := &s.approvals
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed = err
}

// lock takes a's lock and readies its maps, or, when a failure is set
// (SetApprovalFailure), returns it with the lock released.
func (a *approvals) lock() error {
	a.mu.Lock()
	if a.failed != nil {
		err := a.failed
		a.mu.Unlock()
		return err
	}
	a.init()
	return nil
}

func (a *approvals) init() {
	if a.slots == nil {
		a.slots = map[approval.Slot]approval.Approval{}
		a.byID = map[string]idEntry{}
		a.moved = map[string]approval.Approval{}
	}
}

// setSlot makes ap the current approval of slot, keeping the byte count.
func (a *approvals) setSlot(slot approval.Slot, ap approval.Approval) {
	if old, ok := a.slots[slot]; ok {
		a.bytes -= approvalSize(old)
	}
	a.slots[slot] = ap
	a.bytes += approvalSize(ap)
}

func (a *approvals) dropSlot(slot approval.Slot) {
	if old, ok := a.slots[slot]; ok {
		a.bytes -= approvalSize(old)
		delete(a.slots, slot)
	}
}

func (a *approvals) setMoved(ap approval.Approval) {
	a.dropMoved(ap.ID)
	a.moved[ap.ID] = ap
	a.bytes += approvalSize(ap)
}

func (a *approvals) dropMoved(id string) {
	if old, ok := a.moved[id]; ok {
		a.bytes -= approvalSize(old)
		delete(a.moved, id)
	}
}

func (a *approvals) setID(id string, e idEntry) {
	a.dropID(id)
	a.byID[id] = e
	a.bytes += idSize(id, e.slot)
}

func (a *approvals) dropID(id string) {
	if old, ok := a.byID[id]; ok {
		a.bytes -= idSize(id, old.slot)
		delete(a.byID, id)
	}
}

// caps are the caps in force.
func (a *approvals) caps() (ids, bytes int) {
	ids, bytes = MaxApprovals, MaxApprovalBytes
	if a.maxIDs > 0 {
		ids = a.maxIDs
	}
	if a.maxBytes > 0 {
		bytes = a.maxBytes
	}
	return ids, bytes
}

// fits reports whether one more id and size more bytes (freed fewer: the
// record it replaces) are within the caps.
func (a *approvals) fits(size, freed int) bool {
	ids, bytes := a.caps()
	return len(a.byID)+1 <= ids && a.bytes+size-freed <= bytes
}

// sweep forgets, at now, every approval that is not running and is past
// its Expires (pending, approved, denied or consumed), with its id, and
// every superseded id past its approval's expiry. hard (at a cap) also
// forgets the consumed approvals not yet expired (their history is the
// audit trail; the next hold of their slot makes a new one anyway) and
// every superseded id (a decision on one then answers not found rather
// than conflict). Live approvals (pending, approved, denied, not expired)
// and running ones, current or moved, are never forgotten.
func (a *approvals) sweep(now time.Time, hard bool) {
	a.holds, a.nextSweep = 0, now.Add(approvalSweepAfter)
	for slot, ap := range a.slots {
		if ap.Status == approval.Running {
			continue
		}
		if !now.Before(ap.Expires) || (hard && ap.Status == approval.Consumed) {
			a.dropSlot(slot)
			a.dropID(ap.ID)
		}
	}
	for id, e := range a.byID {
		if cur, ok := a.slots[e.slot]; ok && cur.ID == id {
			continue // current
		}
		if _, ok := a.moved[id]; ok {
			continue // running
		}
		if hard || !now.Before(e.expires) {
			a.dropID(id)
		}
	}
}

// HoldApproval implements approval.Store. A new approval that does not fit
// under MaxApprovals and MaxApprovalBytes, even after a sweep, is refused
// with ErrApprovalsFull; a live one is still returned at a cap.
func (s *Store) HoldApproval(_ context.Context, cand approval.Approval, now time.Time) (approval.Approval, bool, error) {
	a := &s.approvals
	if err := a.lock(); err != nil {
		return approval.Approval{}, false, err
	}
	defer a.mu.Unlock()
	if a.holds++; a.holds >= approvalSweepEvery || !now.Before(a.nextSweep) {
		a.sweep(now, false)
	}
	slot := cand.Slot()
	cur, ok := a.slots[slot]
	if ok && cur.Live(now) {
		return clone(cur), false, nil
	}
	cand.Params = append([]byte(nil), cand.Params...)
	size := approvalSize(cand) + idSize(cand.ID, slot)
	freed := func() int {
		if cur, ok := a.slots[slot]; ok && cur.Status != approval.Running {
			return approvalSize(cur) // replaced; a running one is moved, not freed
		}
		return 0
	}
	if !a.fits(size, freed()) {
		a.sweep(now, true)
		if !a.fits(size, freed()) {
			return approval.Approval{}, false, ErrApprovalsFull
		}
	}
	if cur, ok := a.slots[slot]; ok && cur.Status == approval.Running {
		a.setMoved(cur) // its call may still be running: kept until settled
	}
	a.setSlot(slot, cand)
	a.setID(cand.ID, idEntry{slot: slot, expires: cand.Expires})
	return clone(cand), true, nil
}

// SlotApproval implements approval.Store.
func (s *Store) SlotApproval(_ context.Context, sl approval.Slot) (approval.Approval, bool, error) {
	a := &s.approvals
	if err := a.lock(); err != nil {
		return approval.Approval{}, false, err
	}
	defer a.mu.Unlock()
	cur, ok := a.slots[sl]
	if !ok {
		return approval.Approval{}, false, nil
	}
	return clone(cur), true, nil
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
	if err := a.lock(); err != nil {
		return approval.Approval{}, err
	}
	defer a.mu.Unlock()
	if ap.Use == nil {
		return approval.Approval{}, store.ErrConflict
	}
	if cur, ok := a.slots[ap.Slot()]; ok && sameUse(cur, ap) {
		cur = cur.Settled(o, now)
		a.setSlot(ap.Slot(), cur)
		return clone(cur), nil
	}
	if cur, ok := a.moved[ap.ID]; ok && sameUse(cur, ap) {
		a.dropMoved(ap.ID)
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
	if err := a.lock(); err != nil {
		return approval.Approval{}, err
	}
	defer a.mu.Unlock()
	cur, ok := a.slots[ap.Slot()]
	if !ok || cur.ID != ap.ID || cur.Status != from || !now.Before(cur.Expires) ||
		(from == approval.Running && !sameUse(cur, ap)) {
		return approval.Approval{}, store.ErrConflict
	}
	change(&cur)
	a.setSlot(ap.Slot(), cur)
	return clone(cur), nil
}

// DecideApproval implements approval.Store.
func (s *Store) DecideApproval(_ context.Context, id string, d approval.Decision, now time.Time) (approval.Approval, error) {
	a := &s.approvals
	if err := a.lock(); err != nil {
		return approval.Approval{}, err
	}
	defer a.mu.Unlock()
	e, ok := a.byID[id]
	if !ok {
		return approval.Approval{}, store.ErrNotFound
	}
	slot := e.slot
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
	a.setSlot(slot, cur)
	return clone(cur), nil
}

// GetApproval implements approval.Store.
func (s *Store) GetApproval(_ context.Context, id string) (approval.Approval, error) {
	a := &s.approvals
	if err := a.lock(); err != nil {
		return approval.Approval{}, err
	}
	defer a.mu.Unlock()
	if m, ok := a.moved[id]; ok {
		return clone(m), nil
	}
	e, ok := a.byID[id]
	if !ok || a.slots[e.slot].ID != id {
		return approval.Approval{}, store.ErrNotFound
	}
	return clone(a.slots[e.slot]), nil
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
