// Package storetest is the contract every state store keeps: one suite, run
// against the embedded store (shared/memstore) and DynamoDB (shared/dynamo,
// on moto_server). Each concern has its own file.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
)

// AuditStore is the audit side of a store.
type AuditStore interface {
	audit.Writer
	audit.Reader
}

// Backend is one store under test, every concern's interface.
type Backend struct {
	Registry registry.Store
	Sessions session.Store
	Counters ratelimit.Counter
	Stops    killswitch.Store
	Audit    AuditStore
}

// Options configure a fresh backend.
type Options struct {
	AuditRetention time.Duration    // how long audit records stay readable
	Now            func() time.Time // the clock that ages audit records
}

// NewBackend returns a fresh, empty backend; it registers its own cleanup.
type NewBackend func(t *testing.T, o Options) Backend

// Run runs the whole contract.
func Run(t *testing.T, nb NewBackend) {
	t.Run("registry", func(t *testing.T) { testRegistry(t, nb) })
	t.Run("session", func(t *testing.T) { testSession(t, nb) })
	t.Run("counters", func(t *testing.T) { testCounters(t, nb) })
	t.Run("killswitch", func(t *testing.T) { testKillSwitch(t, nb) })
	t.Run("audit", func(t *testing.T) { testAudit(t, nb) })
}

// t0 is the suite's reference instant.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}
