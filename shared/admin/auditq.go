package admin

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
)

// AuditPage is the answer of GET .../audit: records oldest first, and the
// cursor of the next page ("" on the last).
type AuditPage struct {
	Records    []audit.Record `json:"records"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// queryAudit serves GET /admin/v1/tenants/{tenant}/audit?from=&to=&limit=&cursor=
// with from and to in RFC 3339 (default: the last 24 hours).
func (h *Handler) queryAudit(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	now := h.o.Now().UTC()
	query := audit.Query{Tenant: t.ID, From: now.Add(-24 * time.Hour), To: now.Add(time.Second), Cursor: q.Get("cursor")}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &query.From}, {"to", &query.To}} {
		if v := q.Get(p.name); v != "" {
			tm, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				h.fail(w, r, badField(p.name, "want an RFC 3339 time, e.g. 2026-11-30T12:00:00Z"))
				return
			}
			*p.dst = tm.UTC()
		}
	}
	if !query.From.Before(query.To) {
		h.fail(w, r, badField("to", "must be after from"))
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxPageSize {
			h.fail(w, r, badField("limit", "want 1 to "+strconv.Itoa(audit.MaxPageSize)))
			return
		}
		query.Limit = n
	}
	recs, next, err := h.b.Query(r.Context(), query)
	if errors.Is(err, audit.ErrBadCursor) {
		h.fail(w, r, badField("cursor", "not a cursor from this query"))
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if recs == nil {
		recs = []audit.Record{}
	}
	writeJSON(w, http.StatusOK, AuditPage{Records: recs, NextCursor: next})
}
