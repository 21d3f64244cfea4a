// Package memstore is the embedded state store used by `aegis serve`: every
// concern's store interface implemented in process memory, safe for
// concurrent use. It is the reference the DynamoDB store is tested against
// (shared/storetest runs one contract suite on both).
package memstore

import (
	"github.com/aegis-gw/aegis/shared/backend"
	"sync"

	"github.com/aegis-gw/aegis/shared/killswitch"
)

// Store is the embedded store. The zero value is not usable; call New.
type Store struct {
	mu       sync.Mutex
	tenants  map[string]tenantRec
	keys     map[string]keyRec
	sessions map[string]sessionRec
	sweep    sessionSweep                // session.go, under mu
	stops    map[stopKey]killswitch.Stop // killswitch.go, under mu

	counters  counters     // counters.go, own lock
	audit     auditLog     // audit.go, own lock
	approvals approvals    // approval.go, own lock
	breaker   breakerState // breaker.go, own lock
	idem      idemLedger   // idempotency.go, own lock
}

// New returns an empty store.
func New() *Store {
	return &Store{
		tenants:  map[string]tenantRec{},
		keys:     map[string]keyRec{},
		sessions: map[string]sessionRec{},
	}
}

// InProcess implements backend.Backend: every store is in this process.
func (*Store) InProcess() bool { return true }

var _ backend.Backend = (*Store)(nil)
