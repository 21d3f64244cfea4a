package admin

import (
	"errors"
	"io"
	"net/http"

	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// PolicyAnswer is the answer of GET and PUT /admin/v1/tenants/{tenant}/policy:
// the tenant's set as it was sent (YAML or JSON), its policy_hash (the
// hash every audit record of the tenant carries once the gateways have it)
// and when it was stored. A tenant with no stored set answers the empty
// set: Source "", Hash audit.PolicyHashNone, Stored false.
type PolicyAnswer struct {
	Tenant  string `json:"tenant"`
	Source  string `json:"source"`
	Hash    string `json:"hash"`
	Stored  bool   `json:"stored"`
	Updated string `json:"updated,omitempty"`
}

// PolicyError is the 400 answer's detail for a set that does not load: a
// Cedar error's line and column in the cedar_policies text (0 when the
// error is elsewhere in the set).
type PolicyError struct {
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// routePolicy adds the policy routes to m.
func (h *Handler) routePolicy(m *http.ServeMux) {
	m.HandleFunc("GET /admin/v1/tenants/{tenant}/policy", h.getPolicy)
	m.HandleFunc("PUT /admin/v1/tenants/{tenant}/policy", h.putPolicy)
}

func (h *Handler) getPolicy(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	p, err := h.b.Policy(r.Context(), t.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		h.writePolicy(w, r, registry.Policy{Tenant: t.ID}, false)
		return
	case err != nil:
		h.fail(w, r, err)
		return
	}
	h.writePolicy(w, r, p, true)
}

func (h *Handler) writePolicy(w http.ResponseWriter, r *http.Request, p registry.Policy, stored bool) {
	set, err := policy.ParseSet([]byte(p.Source))
	if err != nil {
		// Stored by a writer that parsed it: only a newer format can
		// fail here, and the gateways treat it as unreadable.
		h.fail(w, r, err)
		return
	}
	hash, err := policy.Hash(set)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	a := PolicyAnswer{Tenant: p.Tenant, Source: p.Source, Hash: hash, Stored: stored}
	if stored {
		a.Updated = p.Updated.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	writeJSON(w, http.StatusOK, a)
}

// putPolicy stores the body, the tenant's whole set as YAML or JSON
// (docs/policy.md), once it parses and validates. A set that does not is
// refused with 400 naming the error, with its line and column for a Cedar
// error; nothing is stored then.
func (h *Handler) putPolicy(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	src, err := io.ReadAll(http.MaxBytesReader(w, r.Body, registry.MaxPolicyBytes))
	if err != nil {
		h.fail(w, r, badField("body", "could not be read (at most 256 KiB)"))
		return
	}
	if _, err := policy.ParseSet(src); err != nil {
		corr := info(r).corr
		var pe *policy.ParseError
		if errors.As(err, &pe) {
			writeJSON(w, http.StatusBadRequest, struct {
				ErrorBody
				Policy PolicyError `json:"policy"`
			}{ErrorBody{Error: ErrorDetail{Code: CodeBadRequest, Message: err.Error(), Field: "cedar_policies"}, CorrelationID: corr},
				PolicyError{Line: pe.Line, Column: pe.Column}})
			return
		}
		writeError(w, corr, http.StatusBadRequest, CodeBadRequest, err.Error(), "body")
		return
	}
	p := registry.Policy{Tenant: t.ID, Source: string(src), Updated: h.o.Now().UTC()}
	if err := h.b.PutPolicy(r.Context(), p); err != nil {
		h.fail(w, r, err)
		return
	}
	h.writePolicy(w, r, p, true)
}
