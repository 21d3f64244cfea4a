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
	Consumed Status = "consumed" // approved, then used by one call
)

// Expired is the status an approval is shown with once Expires has passed
// (never stored).
const Expired Status = "expired"

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
	ConsumedAt    time.Time `json:"consumed_at,omitzero"`
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

// Live reports whether a is in force at now: held or decided, not used up,
// not expired.
func (a Approval) Live(now time.Time) bool {
	return a.Status != Consumed && now.Before(a.Expires)
}

// Shown is the status an operator sees at now: the stored status, or
// "expired" for a pending, approved or denied approval past Expires.
func (a Approval) Shown(now time.Time) Status {
	if a.Status != Consumed && !now.Before(a.Expires) {
		return Expired
	}
	return a.Status
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
	// the slot has none, or only a consumed or expired one. cand comes with
	// ID, Status Pending, Created and Expires filled in. Of two racing Holds
	// of one slot, both return the same approval.
	HoldApproval(ctx context.Context, cand Approval, now time.Time) (a Approval, created bool, err error)
	// ConsumeApproval marks the approved approval a as used, iff it is still the
	// slot's current approval, approved, and not expired at now. Otherwise
	// it returns store.ErrConflict: of two racing Consumes exactly one wins.
	ConsumeApproval(ctx context.Context, a Approval, now time.Time) (Approval, error)
	// ReleaseApproval gives back a, which ConsumeApproval returned, when the
	// call that used it was refused before it was sent (an open circuit, an
	// idempotency conflict): consumed becomes approved again, iff a is still
	// the slot's current approval, consumed, and not expired at now.
	// Otherwise store.ErrConflict.
	ReleaseApproval(ctx context.Context, a Approval, now time.Time) (Approval, error)
	// DecideApproval approves or denies the pending approval id. store.ErrNotFound
	// for an id never issued; store.ErrConflict (with the approval as it is)
	// when it is already decided, consumed, expired at now, or superseded by
	// a newer approval of its slot.
	DecideApproval(ctx context.Context, id string, d Decision, now time.Time) (Approval, error)
	// GetApproval returns the approval id: store.ErrNotFound when it was never
	// issued or has been superseded by a newer approval of its slot.
	GetApproval(ctx context.Context, id string) (Approval, error)
	// ListApprovals returns the current approval of every slot matching f (expired
	// ones included), oldest first.
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
