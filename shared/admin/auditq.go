package admin

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auditchain"
)

// AuditPage is the answer of GET .../audit: records oldest first, and the
// cursor of the next page ("" on the last).
type AuditPage struct {
	Records    []audit.Record `json:"records"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// MaxExportBytes bounds one export answer: under Lambda's 6 MB response
// limit. A longer range is refused (413); export it in parts, which
// `aegis audit verify` reads together.
const MaxExportBytes = 5 << 20

// exportAudit serves GET /admin/v1/tenants/{tenant}/audit/export?from=&to=
// (RFC 3339, default the last 24 hours): the records and checkpoints of
// the range as JSON lines (auditchain.WriteExport), which verify on their
// own with the signing keys' public halves.
func (h *Handler) exportAudit(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	from, to, ok := h.auditRange(w, r)
	if !ok {
		return
	}
	d, err := auditchain.Collect(r.Context(), h.b, t.ID, from, to)
	if errors.Is(err, auditchain.ErrTooMany) {
		writeError(w, info(r).corr, http.StatusRequestEntityTooLarge, CodeTooLarge, err.Error(), "")
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var buf bytes.Buffer
	if err := auditchain.WriteExport(&buf, d, from, to); err != nil {
		h.fail(w, r, err)
		return
	}
	if buf.Len() > MaxExportBytes {
		writeError(w, info(r).corr, http.StatusRequestEntityTooLarge, CodeTooLarge,
			fmt.Sprintf("the export of this range is %d bytes, over %d: export shorter ranges", buf.Len(), MaxExportBytes), "")
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// auditRange reads from and to (RFC 3339; default the last 24 hours).
func (h *Handler) auditRange(w http.ResponseWriter, r *http.Request) (from, to time.Time, ok bool) {
	q := r.URL.Query()
	now := h.o.Now().UTC()
	from, to = now.Add(-24*time.Hour), now.Add(time.Second)
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := q.Get(p.name); v != "" {
			tm, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				h.fail(w, r, badField(p.name, "want an RFC 3339 time, e.g. 2026-11-30T12:00:00Z"))
				return from, to, false
			}
			*p.dst = tm.UTC()
		}
	}
	if !from.Before(to) {
		h.fail(w, r, badField("to", "must be after from"))
		return from, to, false
	}
	return from, to, true
}

// queryAudit serves GET /admin/v1/tenants/{tenant}/audit?from=&to=&limit=&cursor=
// with from and to in RFC 3339 (default: the last 24 hours).
func (h *Handler) queryAudit(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	from, to, ok := h.auditRange(w, r)
	if !ok {
		return
	}
	query := audit.Query{Tenant: t.ID, From: from, To: to, Cursor: q.Get("cursor")}
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
