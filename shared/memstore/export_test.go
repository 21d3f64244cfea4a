package memstore

import (
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/registry"
)

// SetPinBounds lowers each tenant's pin bounds, for the contract test.
func (s *Store) SetPinBounds(b registry.PinBounds) {
	s.pins.mu.Lock()
	defer s.pins.mu.Unlock()
	s.pins.bounds = b
}

// TamperAudit edits tenant's stored records and checkpoints behind the
// store's back, as someone with write access to it could (the tamper
// suite of shared/auditchain).
func (s *Store) TamperAudit(tenant string, f func([]audit.Record, []audit.Checkpoint) ([]audit.Record, []audit.Checkpoint)) {
	a := &s.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.byTenant[tenant]
	if t == nil {
		return
	}
	var recs []audit.Record
	for _, r := range t.live() {
		recs = append(recs, r.r)
	}
	recs, cps := f(recs, append([]audit.Checkpoint(nil), t.cps...))
	nt := &tenantAudit{cps: cps, dropped: t.dropped}
	for _, r := range recs {
		a.seq++
		rec := auditRec{sk: auditSortKey(r.Time, a.seq), r: r}
		rec.size = len(rec.sk) + r.Size()
		nt.insert(rec)
		nt.bytes += rec.size
	}
	a.byTenant[tenant] = nt
}
