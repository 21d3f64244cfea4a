package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// ApprovalItem is one approval as the admin API shows it. Params are the
// call's arguments with sensitive values masked; Status is "expired" for a
// pending, approved or denied approval past Expires, and "unsettled" for a
// running one past its use's lease (approval.Approval.Shown). Use is the
// call that took it (running, unsettled or consumed): its correlation id,
// lease and, once settled, outcome.
type ApprovalItem struct {
	ID         string          `json:"id"`
	Tenant     string          `json:"tenant"`
	Caller     string          `json:"caller"`
	Server     string          `json:"server"`
	Tool       string          `json:"tool"`
	Params     json.RawMessage `json:"params"`
	ParamsHash string          `json:"params_hash"`
	Status     approval.Status `json:"status"`
	Created    time.Time       `json:"created"`
	Expires    time.Time       `json:"expires"`
	DecidedBy  string          `json:"decided_by,omitempty"`
	DecidedAt  time.Time       `json:"decided_at,omitzero"`
	Reason     string          `json:"reason,omitempty"`
	ConsumedAt time.Time       `json:"consumed_at,omitzero"`
	Use        *approval.Use   `json:"use,omitempty"`
}

// ApprovalList is the answer of GET /admin/v1/approvals.
type ApprovalList struct {
	Approvals []ApprovalItem `json:"approvals"`
}

// DecisionRequest is the optional body of approve and deny.
type DecisionRequest struct {
	Reason string `json:"reason,omitempty"`
	// By names the person deciding, recorded with the authenticated
	// principal ("alice via admin-key").
	By string `json:"by,omitempty"`
}

func item(a approval.Approval, now time.Time) ApprovalItem {
	p := json.RawMessage(a.Params)
	if len(p) == 0 {
		p = json.RawMessage("null")
	}
	return ApprovalItem{
		ID: a.ID, Tenant: a.Tenant, Caller: a.Caller, Server: a.Server, Tool: a.Tool,
		Params: p, ParamsHash: a.ParamsHash, Status: a.Shown(now), Created: a.Created, Expires: a.Expires,
		DecidedBy: a.DecidedBy, DecidedAt: a.DecidedAt, Reason: a.Reason, ConsumedAt: a.ConsumedAt, Use: a.Use,
	}
}

// statuses are the shown statuses the list filters on, in the order the
// bad-field message names them.
var statuses = []approval.Status{
	approval.Pending, approval.Approved, approval.Denied, approval.Running,
	approval.Unsettled, approval.Consumed, approval.Expired,
}

// statusesWord is statuses as the bad-field message says them.
func statusesWord() string {
	w := ""
	for i, st := range statuses {
		switch {
		case i == len(statuses)-1:
			w += " or "
		case i > 0:
			w += ", "
		}
		w += string(st)
	}
	return w
}

func (h *Handler) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(statuses, approval.Status(status)) {
		h.fail(w, r, badField("status", "want "+statusesWord()))
		return
	}
	list, err := h.b.ListApprovals(r.Context(), approval.Filter{Tenant: q.Get("tenant")})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	now := h.o.Now()
	out := ApprovalList{Approvals: []ApprovalItem{}}
	for _, a := range list {
		it := item(a, now)
		if status == "" || string(it.Status) == status {
			out.Approvals = append(out.Approvals, it)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) getApproval(w http.ResponseWriter, r *http.Request) {
	a, err := h.b.GetApproval(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, item(a, h.o.Now()))
}

func (h *Handler) decide(st approval.Status) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req DecisionRequest
		if err := readJSON(w, r, &req); err != nil {
			h.fail(w, r, err)
			return
		}
		if len(req.Reason) > 1000 {
			h.fail(w, r, badField("reason", "at most 1000 characters"))
			return
		}
		ri := info(r)
		by := ri.principal
		if req.By != "" {
			by = req.By + " via " + ri.principal
		}
		id, now := r.PathValue("id"), h.o.Now()
		a, err := h.b.DecideApproval(r.Context(), id, approval.Decision{Status: st, By: by, Reason: req.Reason}, now)
		if errors.Is(err, store.ErrConflict) {
			msg := "approval " + id + " can no longer be decided"
			if a.ID != "" {
				msg = "approval " + id + " is already " + string(a.Shown(now))
			}
			writeError(w, ri.corr, http.StatusConflict, CodeConflict, msg, "")
			return
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		event := approval.EventApproved
		if st == approval.Denied {
			event = approval.EventDenied
		}
		h.record(r.Context(), approval.Record(a, event, by, req.Reason, ri.corr, audit.PolicyHashNone, now))
		writeJSON(w, http.StatusOK, item(a, now))
	}
}

// record writes an operator action to the audit trail (or, when that
// write fails, the log).
func (h *Handler) record(ctx context.Context, rec audit.Record) {
	rec = rec.Bounded()
	if err := h.b.Write(context.WithoutCancel(ctx), rec); err != nil {
		h.o.Logger.ErrorContext(ctx, "audit write failed; record kept in this log line", "record", rec, "err", err)
	}
}

// fail answers err: 400 for a bad field, 404, 409, else 503 (logged, never
// shown).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	corr := info(r).corr
	var fe *fieldError
	switch {
	case errors.As(err, &fe):
		writeError(w, corr, http.StatusBadRequest, CodeBadRequest, fe.Error(), fe.field)
	case errors.Is(err, store.ErrNotFound):
		writeError(w, corr, http.StatusNotFound, CodeNotFound, "not found: "+r.URL.Path, "")
	case errors.Is(err, registry.ErrPinLimit):
		writeError(w, corr, http.StatusConflict, CodeConflict, fmt.Sprintf("conflict: %s: the tenant's pins are at their limit (%d pins, %d bytes in all); unpin entries no longer used first", r.URL.Path, registry.MaxPinsPerTenant, registry.MaxPinBytesPerTenant), "")
	case errors.Is(err, store.ErrConflict):
		writeError(w, corr, http.StatusConflict, CodeConflict, "conflict: "+r.URL.Path, "")
	default:
		h.o.Logger.ErrorContext(r.Context(), "admin request failed", "correlation_id", corr, "path", r.URL.Path, "err", err)
		writeError(w, corr, http.StatusServiceUnavailable, CodeUnavailable, "a store could not be reached; correlation id "+corr, "")
	}
}
