package memstore_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestPolicyContract(t *testing.T) {
	storetest.RunPolicy(t, func(*testing.T, storetest.Options) backend.Backend { return memstore.New() })
}
