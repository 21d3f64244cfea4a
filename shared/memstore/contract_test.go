package memstore_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) backend.Backend {
		s := memstore.New()
		if o.AuditRetention > 0 {
			s.SetAuditRetention(o.AuditRetention, o.Now)
		}
		return s
	})
}
