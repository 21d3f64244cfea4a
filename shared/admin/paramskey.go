package admin

import (
	"errors"
	"net/http"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/store"
)

// ParamsKeyList is the answer of GET /admin/v1/params-keys: every params
// key of the deployment, current first, by id and dates; never a secret.
type ParamsKeyList struct {
	Keys []audit.KeyInfo `json:"keys"`
}

// RotateRequest is the optional body of a rotation: who and why (logged).
type RotateRequest struct {
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// RotateAnswer is the answer of POST /admin/v1/params-keys/rotate.
type RotateAnswer struct {
	Current audit.KeyInfo `json:"current"`
	Retired audit.KeyInfo `json:"retired"`
}

func (h *Handler) listParamsKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := h.b.ParamsKeys(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := ParamsKeyList{Keys: make([]audit.KeyInfo, len(ks))}
	for i, k := range ks {
		out.Keys[i] = k.Info()
	}
	writeJSON(w, http.StatusOK, out)
}

// rotateParamsKey makes a fresh key current and retires the current one
// (kept, so that older records can still be verified). Gateways read the
// key when they start: records carry the new key's id from each
// instance's next start (docs/admin.md, "Params key"). 404 when the
// deployment has no key yet (no gateway has started), 409 when another
// rotation won.
func (h *Handler) rotateParamsKey(w http.ResponseWriter, r *http.Request) {
	var req RotateRequest
	if err := readJSON(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	ks, err := h.b.ParamsKeys(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if len(ks) == 0 || !ks[0].Retired.IsZero() {
		writeError(w, info(r).corr, http.StatusNotFound, CodeNotFound, "no params key yet: one is made when a gateway first starts", "")
		return
	}
	k, err := audit.GenerateParamsKey()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	now := h.o.Now().UTC()
	next := audit.StoredKey{Key: k, Created: now}
	if err := h.b.RotateParamsKey(r.Context(), ks[0].Key.ID(), next, now); err != nil {
		if errors.Is(err, store.ErrConflict) {
			writeError(w, info(r).corr, http.StatusConflict, CodeConflict, "another rotation of the params key came first; list the keys and try again", "")
			return
		}
		h.fail(w, r, err)
		return
	}
	retired := ks[0]
	retired.Retired = now
	ri := info(r)
	h.o.Logger.InfoContext(r.Context(), "params key rotated", "by", ri.principal, "operator", req.By, "reason", req.Reason,
		"current", k.ID(), "retired", retired.Key.ID(), "correlation_id", ri.corr)
	writeJSON(w, http.StatusOK, RotateAnswer{Current: next.Info(), Retired: retired.Info()})
}
