// Package approval is the pipeline's "approval" check (-32061): a call to a
// tool that needs a human's approval is held until an operator approves it,
// and then runs exactly once.
//
// An approval is tied to one slot: the tenant, the caller, the server, the
// tool and the hash of the canonical JSON of the call's arguments. A slot has
// at most one current approval. Holding the same call again while it is
// pending returns the same approval; once approved, the next identical call
// consumes it (atomically: of two racing calls exactly one runs) and the one
// after that is held afresh. Approval and denial apply only until Expires,
// APPROVAL_TTL_SECS after the call was first held.
//
// The use of an approval is recorded before the call is sent and settled
// after it: ConsumeApproval moves it from approved to running (with a Use
// naming the call), and when the call has ended SettleApproval moves it to
// consumed with the Outcome, or ReleaseApproval gives it back (approved
// again) when the call was refused before it was sent. A gateway that dies
// in between leaves it running: nothing ever makes a running approval
// approved again (the call may have been sent), and operators see it as
// "unsettled" once its lease has passed (docs/design/approvals.md).
//
// The check fails closed: when the store cannot be reached the call is
// refused with status "unavailable" and never runs.
package approval

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

// Status is the stored state of an approval. Expiry is not a stored state:
// an approval whose Expires has passed is expired whatever its Status says.
type Status string

// Stored statuses.
const (
	Pending  Status = "pending"
	Approved Status = "approved"
	Denied   Status = "denied"
	Running  Status = "running"  // approved, then taken by one call (its Use) that has not been settled
	Consumed Status = "consumed" // approved, then used by one call, settled with its Outcome
)

// Shown statuses (never stored).
const (
	// Expired: a pending, approved or denied approval past Expires.
	Expired Status = "expired"
	// Unsettled: a running approval past its Use's LeaseUntil: the gateway
	// that took it should have settled it by then, so it most likely died
	// between taking it and settling it, and the call may or may not have
	// run. An operator must find out (docs/approvals.md).
	Unsettled Status = "unsettled"
)

// Outcome is how the call that used an approval ended, as far as the
// gateway knows.
type Outcome string

// Outcomes of a Use.
const (
	Answered      Outcome = "answered"      // the upstream answered (a result, or its own error)
	Failed        Outcome = "failed"        // the call was sent and failed (say, the upstream could not be reached): it may have run
	Indeterminate Outcome = "indeterminate" // sent and not answered in time: it may have run
	NotSent       Outcome = "not_sent"      // refused before it was sent, and the approval could not be given back (expired or superseded meanwhile)
)

// Use is the one call that took an approved approval. It is stored before
// the call is sent (ConsumeApproval) and settled after it (SettleApproval).
type Use struct {
	ID            string    `json:"id"`             // names this use: settling and giving back are conditional on it
	CorrelationID string    `json:"correlation_id"` // of the call that took it (its audit records carry the same)
	Started       time.Time `json:"started"`        // when it was taken, before the call was sent
	// LeaseUntil is when the use should have been settled if its gateway
	// lived: after it the approval shows as Unsettled. Nothing acts on it:
	// a running approval stays running whatever the time.
	LeaseUntil time.Time `json:"lease_until"`
	Outcome    Outcome   `json:"outcome,omitempty"`   // once settled
	SettledAt  time.Time `json:"settled_at,omitzero"` // once settled
}

// Approval is one held call and its decision.
type Approval struct {
	ID         string `json:"id"`
	Tenant     string `json:"tenant"`
	Caller     string `json:"caller"`
	Server     string `json:"server"`
	Tool       string `json:"tool"` // the tool's name on its server
	ParamsHash string `json:"params_hash"`
	// Params are the call's arguments with sensitive values masked (Mask),
	// for the approver to read. The raw arguments are never stored.
	Params        []byte    `json:"params,omitempty"`
	Status        Status    `json:"status"`
	Created       time.Time `json:"created"` // when the call was first held
	Expires       time.Time `json:"expires"` // Created + APPROVAL_TTL_SECS
	CorrelationID string    `json:"correlation_id,omitempty"`
	DecidedBy     string    `json:"decided_by,omitempty"`
	DecidedAt     time.Time `json:"decided_at,omitzero"`
	Reason        string    `json:"reason,omitempty"`
	ConsumedAt    time.Time `json:"consumed_at,omitzero"` // when its Use began
	// Use is the call that took it: set while Running and once Consumed.
	Use *Use `json:"use,omitempty"`
}

// Slot is the identity an approval is tied to: who calls what, with which
// arguments.
type Slot struct {
	Tenant, Caller, Server, Tool, ParamsHash string
}

// Slot returns a's slot.
func (a Approval) Slot() Slot {
	return Slot{a.Tenant, a.Caller, a.Server, a.Tool, a.ParamsHash}
}

// Digest is a fixed-length name for s inside its tenant: the hex SHA-256 of
// its fields, each length-prefixed so that no two slots share a digest.
func (s Slot) Digest() string {
	h := sha256.New()
	for _, f := range []string{s.Caller, s.Server, s.Tool, s.ParamsHash} {
		fmt.Fprintf(h, "%d:%s;", len(f), f)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Live reports whether a is in force at now: held or decided, not taken by
// a call, not expired. A slot whose approval is not live gets a new one at
// the next hold.
func (a Approval) Live(now time.Time) bool {
	return a.Status != Running && a.Status != Consumed && now.Before(a.Expires)
}

// Shown is the status an operator sees at now: the stored status;
// "expired" for a pending, approved or denied approval past Expires;
// "unsettled" for a running approval past its lease (expired or not: it was
// taken by a call, so it never shows as expired or approved).
func (a Approval) Shown(now time.Time) Status {
	switch {
	case a.Status == Running:
		if a.Use == nil || !now.Before(a.Use.LeaseUntil) {
			return Unsettled
		}
		return Running
	case a.Status != Consumed && !now.Before(a.Expires):
		return Expired
	}
	return a.Status
}

// Settled returns a as consumed by its Use, ended with o at now (what
// SettleApproval stores).
func (a Approval) Settled(o Outcome, now time.Time) Approval {
	a.Status = Consumed
	if a.Use != nil {
		u := *a.Use
		u.Outcome, u.SettledAt = o, now.UTC()
		a.Use = &u
	}
	return a
}

// Decision is an operator's answer to a pending approval.
type Decision struct {
	Status Status // Approved or Denied
	By     string // who decided (admin principal)
	Reason string // optional
}

// Filter selects approvals to list. Empty fields select everything.
type Filter struct {
	Tenant string
}

// Store keeps approvals. Every method returns store.ErrUnavailable (wrapped
// or not) when the backing store cannot be reached; the check then fails
// closed.
type Store interface {
	// HoldApproval returns the current live approval of cand's slot (created false),
	// or stores cand as the slot's new current approval (created true) when
	// the slot has none, or only a running, consumed or expired one. A
	// running one so superseded is kept, visible to GetApproval and
	// ListApprovals, until it is settled. cand comes with ID, Status
	// Pending, Created and Expires filled in. Of two racing Holds of one
	// slot, both return the same approval.
	HoldApproval(ctx context.Context, cand Approval, now time.Time) (a Approval, created bool, err error)
	// SlotApproval returns slot s's current approval (found false: none),
	// as HoldApproval reads it, and writes nothing: the check reads it
	// early (Check.Prefetch), with the call's other store work.
	SlotApproval(ctx context.Context, s Slot) (a Approval, found bool, err error)
	// ConsumeApproval records u as the use of the approved approval a, before
	// the call is sent: approved becomes running (ConsumedAt now, Use u),
	// durably, iff a is still the slot's current approval, approved, and not
	// expired at now. Otherwise it returns store.ErrConflict: of two racing
	// Consumes exactly one wins, and a running approval is never taken again.
	ConsumeApproval(ctx context.Context, a Approval, u Use, now time.Time) (Approval, error)
	// SettleApproval records how the call that took a (as ConsumeApproval
	// returned it) ended: running becomes consumed with o (a.Settled), iff
	// a is still running with the same Use, whether or not it has expired or
	// been superseded since. Otherwise store.ErrConflict (already settled or
	// given back). A superseded approval, once settled, is no longer kept.
	SettleApproval(ctx context.Context, a Approval, o Outcome, now time.Time) (Approval, error)
	// ReleaseApproval gives back a, as ConsumeApproval returned it, when the
	// call that took it was refused before it was sent (an open circuit, an
	// idempotency conflict): running becomes approved again (no Use), iff a
	// is still the slot's current approval, running with the same Use, and
	// not expired at now. Otherwise store.ErrConflict, and a is still
	// running: settle it (NotSent).
	ReleaseApproval(ctx context.Context, a Approval, now time.Time) (Approval, error)
	// DecideApproval approves or denies the pending approval id. store.ErrNotFound
	// for an id never issued; store.ErrConflict (with the approval as it is)
	// when it is already decided, consumed, expired at now, or superseded by
	// a newer approval of its slot.
	DecideApproval(ctx context.Context, id string, d Decision, now time.Time) (Approval, error)
	// GetApproval returns the approval id: store.ErrNotFound when it was never
	// issued or has been superseded by a newer approval of its slot, unless
	// it is still running (a superseded running approval is kept until it is
	// settled).
	GetApproval(ctx context.Context, id string) (Approval, error)
	// ListApprovals returns the current approval of every slot matching f
	// (expired ones included) and every superseded approval still running,
	// oldest first.
	ListApprovals(ctx context.Context, f Filter) ([]Approval, error)
}

// NewID returns a random version-4 UUID.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("approval: no randomness: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
