package admin

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
)

// Catalog is a tenant's tool catalog as the gateway routes calls with it
// (route.Catalog): the kill switch resolves the name an operator gives with
// it, so that a stop stops what a call by that name runs. View lists the
// tools of a tenant (all servers, or only the one named); Resolve finds the
// tool a call to name (limited to server when not empty) would run.
type Catalog interface {
	View(ctx context.Context, tenant, only string) ([]route.Entry, []error, error)
	Resolve(ctx context.Context, tenant, server, name string) (route.Entry, bool, []error, error)
}

// StopRequest is the optional body of stop and resume.
type StopRequest struct {
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	// Unlisted stops (or resumes) the tool name exactly as given on the
	// server in the path, without looking it up in the tenant's catalog:
	// for a tool the server does not list yet, or when the server cannot
	// list its tools. Only with a server in the path.
	Unlisted bool `json:"unlisted,omitempty"`
}

// StopList is the answer of GET .../stops.
type StopList struct {
	Stops []killswitch.Stop `json:"stops"`
}

// StopAnswer is the answer of stop and resume: the stop as stored (its
// server and the tool's upstream name) and, when the operator named the
// tool otherwise (an exposed name such as "a.echo"), the name as given.
//
// InForceBy is when the stop (or resume) is in force on every instance:
// Stop.At plus InForceAfterSecs, each instance's re-read period
// (KILL_SWITCH_REFRESH_SECS); InForceAfterSecs is 0 when it is in force at
// once (the embedded store of aegis serve).
type StopAnswer struct {
	Stopped          bool            `json:"stopped"`
	Stop             killswitch.Stop `json:"stop"`
	Name             string          `json:"name,omitempty"`
	InForceBy        time.Time       `json:"in_force_by"`
	InForceAfterSecs float64         `json:"in_force_after_secs"`
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

// stopTarget is what a stop or resume acts on.
type stopTarget struct {
	server, tool string // tool is the upstream name; "" = the whole server
	name         string // the name as the operator gave it, when it differs
}

// stop serves stop (on) and resume (!on) of a whole server (path
// /servers/{server}/stop), of a tool of a server (/servers/{server}/tools/
// {tool}/stop) or of a tool by the name the aggregate /mcp lists
// (/tools/{tool}/stop). A stop is stored as (server, upstream tool name),
// resolved when it is made (docs/admin.md, "Kill switch"): the check
// compares it with the tool a call was routed to, whatever name the call
// used. A name that matches no tool of the tenant is refused with 404 and
// the near matches, unless Unlisted is set.
func (h *Handler) stop(on bool, kind stopKind) http.HandlerFunc {
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
		target, ok := h.target(w, r, t.ID, kind, on, req.Unlisted)
		if !ok {
			return
		}
		ri, now := info(r), h.o.Now().UTC()
		by := ri.principal
		if req.By != "" {
			by = req.By + " via " + ri.principal
		}
		st := killswitch.Stop{Tenant: t.ID, Server: target.server, Tool: target.tool, Reason: req.Reason, By: by, At: now}
		method := "killswitch.stop"
		var err error
		if on {
			err = h.b.PutStop(r.Context(), st)
		} else {
			method = "killswitch.resume"
			err = h.b.DeleteStop(r.Context(), t.ID, target.server, target.tool)
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		rec := audit.Record{Time: now, Tenant: t.ID, Caller: by, CorrelationID: ri.corr, Layer: string(refusal.LayerGateway),
			Method: method, Server: target.server, Tool: target.tool, Outcome: audit.OutcomeAllowed, PolicyHash: audit.PolicyHashNone,
			Detail: "by=" + quote(by)}
		if target.name != "" {
			rec.Detail += " name=" + quote(target.name)
		}
		if req.Unlisted {
			rec.Detail += " unlisted=true"
		}
		if req.Reason != "" {
			rec.Detail += " reason=" + quote(req.Reason)
		}
		h.record(r.Context(), rec)
		writeJSON(w, http.StatusOK, StopAnswer{Stopped: on, Stop: st, Name: target.name,
			InForceBy: now.Add(h.o.KillSwitchRefresh), InForceAfterSecs: h.o.KillSwitchRefresh.Seconds()})
	}
}

// stopKind is which of the three stop routes was taken.
type stopKind int

const (
	stopServer      stopKind = iota // /servers/{server}/stop
	stopServerTool                  // /servers/{server}/tools/{tool}/stop
	stopExposedTool                 // /tools/{tool}/stop
)

// target finds what the request stops or resumes, or answers why it
// cannot.
func (h *Handler) target(w http.ResponseWriter, r *http.Request, tenant string, kind stopKind, on, unlisted bool) (stopTarget, bool) {
	corr := info(r).corr
	server, name := r.PathValue("server"), r.PathValue("tool")
	if kind != stopServer && name == "" {
		h.fail(w, r, badField("tool", "required"))
		return stopTarget{}, false
	}
	if kind == stopExposedTool && unlisted {
		h.fail(w, r, badField("unlisted", "needs a server: use /servers/{server}/tools/{tool}/stop (CLI: --server)"))
		return stopTarget{}, false
	}
	if server != "" {
		ss, err := h.b.Servers(r.Context(), tenant)
		if err != nil {
			h.fail(w, r, err)
			return stopTarget{}, false
		}
		if !hasServer(ss, server) {
			writeError(w, corr, http.StatusNotFound, CodeNotFound, "tenant "+tenant+" has no server "+server+nearList(server, serverNames(ss)), "")
			return stopTarget{}, false
		}
	}
	if kind == stopServer || unlisted {
		return stopTarget{server: server, tool: name}, true
	}
	if !on {
		// A resume first matches a stop as stored, so that a tool that is
		// no longer listed can be resumed.
		if t, ok := h.storedStop(r.Context(), tenant, server, name); ok {
			return t, true
		}
	}
	if h.o.Catalog == nil {
		writeError(w, corr, http.StatusBadRequest, CodeBadRequest,
			"this admin API has no tool catalog, so it cannot check that "+quote(name)+" names a tool; check the name and send \"unlisted\": true (CLI: --unlisted) to stop it as given", "unlisted")
		return stopTarget{}, false
	}
	e, found, errs, err := h.o.Catalog.Resolve(r.Context(), tenant, server, name)
	if err != nil {
		h.fail(w, r, err)
		return stopTarget{}, false
	}
	if found {
		t := stopTarget{server: e.Server.Name, tool: e.Tool.Name}
		if e.Tool.Name != name {
			t.name = name
		}
		return t, true
	}
	// Not a name a call would reach: an upstream name that is exposed
	// otherwise ("echo" when a and b both list it) is still one tool when
	// one server lists it, or when the server is given.
	entries, _, err := h.o.Catalog.View(r.Context(), tenant, server)
	if err != nil {
		h.fail(w, r, err)
		return stopTarget{}, false
	}
	var hits []route.Entry
	for _, e := range entries {
		if e.Tool.Name == name {
			hits = append(hits, e)
		}
	}
	switch {
	case len(hits) == 1:
		return stopTarget{server: hits[0].Server.Name, tool: name}, true
	case len(hits) > 1:
		exposed := make([]string, len(hits))
		for i, e := range hits {
			exposed[i] = e.Name
		}
		writeError(w, corr, http.StatusConflict, CodeConflict,
			quote(name)+" is listed by "+strconv.Itoa(len(hits))+" servers of tenant "+tenant+"; name one: "+strings.Join(exposed, ", ")+" (or give the server)", "tool")
		return stopTarget{}, false
	}
	var unlistable []string
	for _, e := range errs {
		var se *route.ServerError
		if errors.As(e, &se) {
			unlistable = append(unlistable, se.Server)
		}
	}
	msg := "tenant " + tenant + " has no tool " + quote(name)
	if server != "" {
		msg = "server " + server + " of tenant " + tenant + " lists no tool " + quote(name)
	}
	msg += nearList(name, entryNames(entries))
	if len(unlistable) > 0 {
		sort.Strings(unlistable)
		msg += "; the tools of " + strings.Join(unlistable, ", ") + " could not be listed"
	}
	msg += "; to stop a tool that is not listed yet, give its server and send \"unlisted\": true (CLI: --unlisted)"
	writeError(w, corr, http.StatusNotFound, CodeNotFound, msg, "tool")
	return stopTarget{}, false
}

// storedStop finds the stop of tenant that a resume of name (on server,
// when given) means: the one stored under that tool name, when exactly one
// is.
func (h *Handler) storedStop(ctx context.Context, tenant, server, name string) (stopTarget, bool) {
	ss, err := h.b.Stops(ctx, tenant)
	if err != nil {
		return stopTarget{}, false
	}
	var hits []killswitch.Stop
	for _, s := range ss {
		if s.Tool == name && (server == "" || s.Server == server) {
			hits = append(hits, s)
		}
	}
	if len(hits) != 1 {
		return stopTarget{}, false
	}
	return stopTarget{server: hits[0].Server, tool: name}, true
}

func hasServer(ss []registry.Server, name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}

func serverNames(ss []registry.Server) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

// entryNames lists each tool by its exposed name, the name that resolves
// to it alone.
func entryNames(es []route.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Name
	}
	return out
}

// nearList is "; did you mean: x, y" for the near matches of name, or "".
func nearList(name string, names []string) string {
	near := killswitch.Near(name, names)
	if len(near) == 0 {
		return ""
	}
	q := make([]string, len(near))
	for i, n := range near {
		q[i] = quote(n)
	}
	return "; did you mean: " + strings.Join(q, ", ")
}
