// Package storetest is the contract every state store keeps: one suite over
// a backend.Backend, run against the embedded store (shared/memstore) and
// DynamoDB (shared/dynamo, on moto_server). Each concern has its own file.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/backend"
)

// Options configure a fresh backend.
type Options struct {
	AuditRetention time.Duration    // how long audit records stay readable
	Now            func() time.Time // the clock that ages audit records
}

// NewBackend returns a fresh, empty backend; it registers its own cleanup.
type NewBackend func(t *testing.T, o Options) backend.Backend

// Run runs the whole contract: every concern of backend.Backend.
func Run(t *testing.T, nb NewBackend) {
	fresh := func(t *testing.T) backend.Backend { return nb(t, Options{}) }
	t.Run("registry", func(t *testing.T) { testRegistry(t, nb) })
	t.Run("session", func(t *testing.T) { testSession(t, nb) })
	t.Run("session windows", func(t *testing.T) { testSessionWindows(t, nb) })
	t.Run("session admit counters", func(t *testing.T) { testSessionAdmitCounters(t, nb) })
	t.Run("asked", func(t *testing.T) { testAsked(t, nb) })
	t.Run("counters", func(t *testing.T) { testCounters(t, nb) })
	t.Run("killswitch", func(t *testing.T) { testKillSwitch(t, nb) })
	t.Run("tenantview", func(t *testing.T) { testTenantView(t, nb) })
	t.Run("audit", func(t *testing.T) { testAudit(t, nb) })
	t.Run("checkpoints", func(t *testing.T) { testCheckpoints(t, nb) })
	t.Run("approvals", func(t *testing.T) { testApprovals(t, fresh) })
	t.Run("breaker", func(t *testing.T) { testBreaker(t, fresh) })
	t.Run("idempotency", func(t *testing.T) { testIdempotency(t, fresh) })
	t.Run("paramskey", func(t *testing.T) { testParamsKey(t, fresh) })
	t.Run("connections", func(t *testing.T) { testConnections(t, fresh) })
}

// t0 is the suite's reference instant.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}
