package gateway

import (
	"time"

	"github.com/aegis-gw/aegis/shared/content"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/tenantview"
)

// stopsPart is the kill-switch check as a part of the tenants' views.
type stopsPart struct{ k *killswitch.Check }

func (p stopsPart) Due(tenant string, now time.Time) bool { return p.k.Due(tenant, now) }

func (p stopsPart) Fill(tenant string, v *tenantview.View, at time.Time) {
	p.k.Fill(tenant, v.Stops, at)
}

// pinsPart is the rug-pull check's pins as a part of the tenants' views.
type pinsPart struct{ c *content.Check }

func (p pinsPart) Due(tenant string, now time.Time) bool { return p.c.PinsDue(tenant, now) }

func (p pinsPart) Fill(tenant string, v *tenantview.View, at time.Time) {
	names := make([]string, len(v.Servers))
	for i, sv := range v.Servers {
		names[i] = sv.Name
	}
	p.c.FillPins(tenant, names, v.Pins, v.PinsRead, at)
}

var (
	_ tenantview.Part = stopsPart{}
	_ tenantview.Part = pinsPart{}
)
