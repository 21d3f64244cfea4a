package memstore_test

import (
	"testing"

	"github.com/aegis-gw/aegis/internal/auditchaintest"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// TestAuditChainTamper runs the audit chain's tamper suite on the
// embedded store.
func TestAuditChainTamper(t *testing.T) {
	auditchaintest.Run(t, func(t *testing.T) auditchaintest.Env {
		s := memstore.New()
		edit := func(f func([]audit.Record, []audit.Checkpoint) ([]audit.Record, []audit.Checkpoint)) {
			s.TamperAudit(auditchaintest.Tenant, f)
		}
		return auditchaintest.Env{Store: s,
			Replace: func(t *testing.T, old, n audit.Record) {
				edit(func(rs []audit.Record, cs []audit.Checkpoint) ([]audit.Record, []audit.Checkpoint) {
					return auditchaintest.ReplaceRecord(t, rs, old, n), cs
				})
			},
			Delete: func(t *testing.T, r audit.Record) {
				edit(func(rs []audit.Record, cs []audit.Checkpoint) ([]audit.Record, []audit.Checkpoint) {
					return auditchaintest.ReplaceRecord(t, rs, r), cs
				})
			},
			DeleteCheckpoint: func(t *testing.T, c audit.Checkpoint) {
				edit(func(rs []audit.Record, cs []audit.Checkpoint) ([]audit.Record, []audit.Checkpoint) {
					return rs, auditchaintest.ReplaceCheckpoint(t, cs, c)
				})
			},
			ReplaceCheckpoint: func(t *testing.T, old, n audit.Checkpoint) {
				edit(func(rs []audit.Record, cs []audit.Checkpoint) ([]audit.Record, []audit.Checkpoint) {
					return rs, auditchaintest.ReplaceCheckpoint(t, cs, old, n)
				})
			},
		}
	})
}
