package memstore

import (
	"context"
	"errors"

	"github.com/aegis-gw/aegis/shared/store"
	"github.com/aegis-gw/aegis/shared/tenantview"
)

// TenantView implements tenantview.Reader. The pins and their tally are
// read together under the pins' lock, so a tally's version always
// describes the pins read with it.
func (s *Store) TenantView(ctx context.Context, tenant string, pins bool) (tenantview.View, error) {
	t, err := s.Tenant(ctx, tenant)
	if errors.Is(err, store.ErrNotFound) {
		return tenantview.View{}, nil
	}
	v := tenantview.View{Tenant: t, Found: true, PinsRead: pins}
	v.Servers, _ = s.Servers(ctx, tenant)
	v.Stops, _ = s.Stops(ctx, tenant)
	s.pins.mu.Lock()
	v.Tally = s.pins.tallies[tenant]
	if pins {
		v.Pins = s.pins.list(tenant, "")
	}
	s.pins.mu.Unlock()
	return v, nil
}

var _ tenantview.Reader = (*Store)(nil)
