// Package memstore is the embedded state store used by `aegis serve`: every
// concern's store interface implemented in process memory, safe for
// concurrent use. It is the reference the DynamoDB store is tested against
// (shared/storetest runs one contract suite on both).
//
// Every structure it keeps is bounded by count and by bytes (the caps
// below; docs/state.md, "In-memory bounds", and docs/design/bounds.md):
// what expires is swept, and what is over a cap is dropped oldest first.
// Usage reports what is held.
package memstore

import (
	"sync"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/killswitch"
)

// The embedded store's caps. Bytes are estimates: the lengths of a
// record's strings and byte slices plus a fixed overhead per record.
const (
	// MaxSessions and MaxSessionBytes cap the gateway sessions of all
	// tenants. Over either, the session seen least recently is forgotten
	// (and its upstream sessions ended, see OnSessionEnd); expired ones
	// are swept as new ones are created.
	MaxSessions     = 50_000
	MaxSessionBytes = 32 << 20
	// MaxUpstreamIDBytes caps one upstream session (its protocol version
	// and Mcp-Session-Id) that SetUpstream keeps; a longer one is refused
	// and the next call initializes afresh.
	MaxUpstreamIDBytes = 1024
	// MaxAuditBytes caps one tenant's audit log, with MaxAuditRecords
	// (audit.go); the oldest records go first.
	MaxAuditBytes = 8 << 20
	// MaxLedgerRecords and MaxLedgerBytes cap the idempotency ledger of
	// all tenants (idempotency.go). Over either, expired records are swept,
	// then the oldest completed ones are forgotten; pending claims are
	// never dropped, and a claim that finds no room is refused with
	// ErrLedgerFull (the call goes on without the ledger).
	MaxLedgerRecords = 10_000
	MaxLedgerBytes   = 32 << 20
	// MaxEndQueue caps the forgotten sessions whose upstream sessions wait
	// to be ended (sweep.go); past it they are left to the upstream's own
	// idle expiry, and counted in Usage.EndsDropped.
	MaxEndQueue = 4096
)

// bounds are the caps in force: the constants above, lowered by tests.
type bounds struct {
	sessions, sessionBytes int
	auditRecords           int
	auditBytes             int
	ledgerRecords          int
	ledgerBytes            int
	endQueue               int
}

func defaultBounds() bounds {
	return bounds{
		sessions: MaxSessions, sessionBytes: MaxSessionBytes,
		auditRecords: MaxAuditRecords, auditBytes: MaxAuditBytes,
		ledgerRecords: MaxLedgerRecords, ledgerBytes: MaxLedgerBytes,
		endQueue: MaxEndQueue,
	}
}

// Store is the embedded store. The zero value is not usable; call New.
type Store struct {
	bounds bounds // set by New, read-only after

	mu         sync.Mutex
	tenants    map[string]tenantRec
	keys       map[string]keyRec
	sessions   sessionTable                // session.go, under mu
	stops      map[stopKey]killswitch.Stop // killswitch.go, under mu
	paramsKeys []audit.StoredKey           // paramskey.go, under mu; current first

	counters  counters     // counters.go, own lock
	audit     auditLog     // audit.go, own lock
	approvals approvals    // approval.go, own lock
	breaker   breakerState // breaker.go, own lock
	idem      idemLedger   // idempotency.go, own lock
	ends      endQueue     // sweep.go, own lock
	pins      pinTable     // pins.go, own lock
	conns     connTable    // connect.go, own lock
}

// New returns an empty store.
func New() *Store {
	return &Store{
		bounds:   defaultBounds(),
		tenants:  map[string]tenantRec{},
		keys:     map[string]keyRec{},
		sessions: sessionTable{m: map[string]*sessionEntry{}},
	}
}

// Usage is what the store holds of its bounded structures, by count and
// estimated bytes.
type Usage struct {
	Sessions, SessionBytes int
	// AuditRecords and AuditBytes are summed over tenants.
	AuditRecords, AuditBytes   int
	LedgerRecords, LedgerBytes int
	// Approvals is how many approvals are kept (current in their slots, or
	// superseded while running); ApprovalIDs how many ids resolve (those,
	// and superseded ones not yet swept), the count MaxApprovals caps;
	// ApprovalBytes the estimate of all of it, which MaxApprovalBytes caps.
	Approvals, ApprovalIDs, ApprovalBytes int
	// EndQueue is how many forgotten sessions wait for their upstream
	// sessions to be ended; EndsDropped how many were not queued since
	// the store was made (the queue was full).
	EndQueue    int
	EndsDropped int64
}

// Usage reports what the store holds now.
func (s *Store) Usage() Usage {
	var u Usage
	s.mu.Lock()
	u.Sessions, u.SessionBytes = len(s.sessions.m), s.sessions.bytes
	s.mu.Unlock()
	s.audit.mu.Lock()
	for _, t := range s.audit.byTenant {
		u.AuditRecords += len(t.live())
		u.AuditBytes += t.bytes
	}
	s.audit.mu.Unlock()
	s.idem.mu.Lock()
	u.LedgerRecords, u.LedgerBytes = len(s.idem.m), s.idem.bytes
	s.idem.mu.Unlock()
	s.approvals.mu.Lock()
	u.Approvals = len(s.approvals.slots) + len(s.approvals.moved)
	u.ApprovalIDs, u.ApprovalBytes = len(s.approvals.byID), s.approvals.bytes
	s.approvals.mu.Unlock()
	s.ends.mu.Lock()
	u.EndQueue, u.EndsDropped = len(s.ends.q), s.ends.dropped
	s.ends.mu.Unlock()
	return u
}

// InProcess implements backend.Backend: every store is in this process.
func (*Store) InProcess() bool { return true }

var _ backend.Backend = (*Store)(nil)
