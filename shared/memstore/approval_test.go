package memstore_test

import (
	"testing"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/storetest"
)

func TestApprovalContract(t *testing.T) {
	storetest.RunApprovals(t, func(*testing.T) approval.Store { return memstore.New() })
}
