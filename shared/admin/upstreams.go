package admin

import (
	"net/http"
	"time"

	"github.com/aegis-gw/aegis/shared/breaker"
)

// UpstreamState is one server's circuit and in-flight calls as the shared
// store holds them (every instance's view): GET .../upstreams.
type UpstreamState struct {
	Server string `json:"server"`
	// Circuit is "closed", "open" (calls fast-fail until OpenUntil) or
	// "half-open" (one probe call may go through).
	Circuit   string    `json:"circuit"`
	Failures  int       `json:"failures"`
	OpenUntil time.Time `json:"open_until,omitzero"`
	// Probing: a half-open probe call holds the circuit.
	Probing bool `json:"probing,omitempty"`
	// InFlight counts the calls holding a concurrency lease now
	// (UPSTREAM_MAX_CONCURRENT; always 0 when backpressure is off, as no
	// lease is taken then).
	InFlight int `json:"in_flight"`
}

// UpstreamList is the answer of GET /admin/v1/tenants/{tenant}/upstreams.
type UpstreamList struct {
	Upstreams []UpstreamState `json:"upstreams"`
}

// listUpstreams serves GET /admin/v1/tenants/{tenant}/upstreams: read-only,
// one entry per registered server, in the registry's order.
func (h *Handler) listUpstreams(w http.ResponseWriter, r *http.Request) {
	ss, ok := h.servers(w, r)
	if !ok {
		return
	}
	now := h.o.Now()
	out := UpstreamList{Upstreams: make([]UpstreamState, 0, len(ss))}
	for _, s := range ss {
		key := breaker.Key(s.Tenant, s.Name)
		c, err := h.b.Circuit(r.Context(), key)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		n, err := h.b.InFlight(r.Context(), key, now)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		st := UpstreamState{Server: s.Name, Circuit: breaker.StateAt(c, now), Failures: c.Failures, InFlight: n,
			Probing: c.Probe != "" && now.Before(c.ProbeUntil)}
		if st.Circuit == "open" {
			st.OpenUntil = c.OpenUntil.UTC()
		}
		out.Upstreams = append(out.Upstreams, st)
	}
	writeJSON(w, http.StatusOK, out)
}
