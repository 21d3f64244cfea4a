package admin

import (
	"net/http"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// StopRequest is the optional body of stop and resume.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
}

// StopList is the answer of GET .../stops.
type StopList struct {
	Stops []killswitch.Stop `json:"stops"`
}

func (h *Handler) listStops(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	ss, err := h.b.Stops(r.Context(), t.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if ss == nil {
		ss = []killswitch.Stop{}
	}
	writeJSON(w, http.StatusOK, StopList{Stops: ss})
}

// stop serves stop (on) and resume (!on) of a server, or of one of its
// tools (tool). The server must be registered; a tool name is taken as
// given (tools come from the upstream, and stopping one before it appears
// is allowed).
func (h *Handler) stop(on, tool bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, ok := h.tenant(w, r)
		if !ok {
			return
		}
		var req StopRequest
		if err := readJSON(w, r, &req); err != nil {
			h.fail(w, r, err)
			return
		}
		server, toolName := r.PathValue("server"), ""
		if tool {
			if toolName = r.PathValue("tool"); toolName == "" {
				h.fail(w, r, badField("tool", "required"))
				return
			}
		}
		ss, err := h.b.Servers(r.Context(), t.ID)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		found := false
		for _, s := range ss {
			found = found || s.Name == server
		}
		if !found {
			writeError(w, info(r).corr, http.StatusNotFound, CodeNotFound, "tenant "+t.ID+" has no server "+server, "")
			return
		}
		ri, now := info(r), h.o.Now().UTC()
		by := ri.principal
		if req.By != "" {
			by = req.By + " via " + ri.principal
		}
		st := killswitch.Stop{Tenant: t.ID, Server: server, Tool: toolName, Reason: req.Reason, By: by, At: now}
		method := "killswitch.stop"
		if on {
			err = h.b.PutStop(r.Context(), st)
		} else {
			method = "killswitch.resume"
			err = h.b.DeleteStop(r.Context(), t.ID, server, toolName)
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		rec := audit.Record{Time: now, Tenant: t.ID, Caller: by, CorrelationID: ri.corr, Layer: string(refusal.LayerGateway),
			Method: method, Server: server, Tool: toolName, Outcome: audit.OutcomeAllowed, PolicyHash: audit.PolicyHashNone,
			Detail: "by=" + quote(by)}
		if req.Reason != "" {
			rec.Detail += " reason=" + quote(req.Reason)
		}
		h.record(r.Context(), rec)
		writeJSON(w, http.StatusOK, map[string]any{"stopped": on, "stop": st})
	}
}
