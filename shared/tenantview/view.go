// Package tenantview folds the periodic re-reads of a tenant's registry
// state into one read: its record, servers, kill switches and pins' tally
// (and, when asked, its pins), all in the tenant's partition of the store,
// come back from one TenantView call (on DynamoDB one Query), and one
// Cache hands each cache that keeps a part of it (the registry's, the
// kill switch's, the rug-pull check's pins) its fresh copy at once.
//
// Every part keeps its own lifetime: the Cache reads again when any part
// of a tenant is due, and fills every part, each stamped with the time
// of the read, so that no part is ever served older than its own
// lifetime (a fill only makes a copy fresher). Pins are read only when
// their tally's version says they changed since the copy was read:
// docs/design/cost.md, "Idle and cold instances".
package tenantview

import (
	"context"

	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/registry"
)

// View is what one TenantView read gives of a tenant.
type View struct {
	// Tenant is the tenant's record; Found is false when there is none
	// (then nothing else is set).
	Tenant registry.Tenant
	Found  bool
	// Servers are its servers and Stops its kill switches, in the store's
	// order.
	Servers []registry.Server
	Stops   []killswitch.Stop
	// Tally is its pins' tally (registry.PinTally).
	Tally registry.PinTally
	// Pins are its pins (of every server), when they were asked for
	// (PinsRead); sorted as registry.PinStore.Pins sorts them.
	Pins     []registry.Pin
	PinsRead bool
}

// Reader reads a tenant's view, with its pins when pins is set, in one
// request where the store can: the tenant's record, servers, kill
// switches and pin tally as of one moment.
type Reader interface {
	TenantView(ctx context.Context, tenant string, pins bool) (View, error)
}
