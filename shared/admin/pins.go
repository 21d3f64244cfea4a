package admin

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/store"
)

// routePins adds the rug-pull pins' routes to m.
func (h *Handler) routePins(m *http.ServeMux) {
	m.HandleFunc("GET /admin/v1/tenants/{tenant}/pins", h.listPins)
	// {kind} is tools, prompts, resources or templates; {name} the
	// entry's name (a uri or uriTemplate path-escaped, "/" as %2F).
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/servers/{server}/{kind}/{name}/pin", h.pin(true))
	m.HandleFunc("DELETE /admin/v1/tenants/{tenant}/servers/{server}/{kind}/{name}/pin", h.pin(false))
	m.HandleFunc("GET /admin/v1/tenants/{tenant}/new-tools", h.getNewTools)
	m.HandleFunc("PUT /admin/v1/tenants/{tenant}/new-tools", h.putNewTools)
}

// PinView is one pin as GET .../pins answers it: the pin (of a tool,
// prompt, resource or resource template: Pin.Kind, absent for a tool),
// and, when the tenant's catalog of that kind is at hand and lists the
// entry, its definition now (canonical form and hash) and whether it
// differs from the pin: the review of a rug pull. Listed is false for a
// pinned entry its server no longer lists. A legacy pin (hash format 1)
// that approves the definition listed now is not Changed: the gateway
// rewrites it in the current format when it next meets it
// (registry.PinApproves).
type PinView struct {
	registry.Pin
	Listed     bool            `json:"listed"`
	Changed    bool            `json:"changed"`
	CurrentDef json.RawMessage `json:"current_def,omitempty"`
	Current    string          `json:"current,omitempty"`
	// Held is set on an unpinned tool the gateway holds for review
	// (refused with -32051 "held-for-review" and left out of tools/list
	// under THREAT_MODE=block): every unpinned tool under new_tools
	// "hold", and a suspected rename under either setting. Prompts,
	// resources and templates are never held: they are pinned on first
	// use.
	Held bool `json:"held,omitempty"`
	// RenamedFrom names, on an unpinned tool, the pinned tool its server
	// no longer lists that it looks like (registry.RenameOf), with their
	// Similarity; on that pin, RenamedTo names the newcomer.
	RenamedFrom string  `json:"renamed_from,omitempty"`
	RenamedTo   string  `json:"renamed_to,omitempty"`
	Similarity  float64 `json:"similarity,omitempty"`
}

// PinList is the answer of GET .../pins. Unpinned are the entries listed
// now that have no pin yet (new ones, or a renamed tool next to the pin
// of its old name), with their current hash. Renames pairs each
// suspected rename: a pin its server no longer lists and the unpinned
// tool that looks like it, to be reviewed together. NewTools is the
// tenant's setting (registry.NewToolsModes).
type PinList struct {
	NewTools string    `json:"new_tools"`
	Pins     []PinView `json:"pins"`
	Unpinned []PinView `json:"unpinned"`
	Renames  []Rename  `json:"renames"`
}

// Rename is one suspected rename in a PinList: the pin of the tool that
// disappeared (From, its Listed false) and the tool that appeared (To,
// unpinned, held), from one server.
type Rename struct {
	Server     string  `json:"server"`
	From       string  `json:"from"`
	To         string  `json:"to"`
	Similarity float64 `json:"similarity"`
}

// NewToolsSetting is the body and answer of GET and PUT
// .../new-tools: the tenant's registry.Tenant.NewTools.
type NewToolsSetting struct {
	NewTools string `json:"new_tools"`
}

// PinRequest is the optional body of POST .../pin: Hash pins that hash
// (without the catalog, or to approve a definition seen elsewhere);
// without it the tool's definition as the catalog lists it now is pinned.
type PinRequest struct {
	Hash string `json:"hash,omitempty"`
	By   string `json:"by,omitempty"`
}

// PinAnswer is the answer of POST and DELETE .../pin.
type PinAnswer struct {
	Pinned bool         `json:"pinned"`
	Pin    registry.Pin `json:"pin"`
}

// ListingsOf is Options.Listings of a gateway's catalogs
// (gateway.Gateway.Catalogs): its prompts, resources and templates.
func ListingsOf(cats route.Catalogs) map[string]Catalog {
	out := map[string]Catalog{}
	for kind, cat := range map[string]*route.Catalog{registry.PinPrompt: cats.Prompts, registry.PinResource: cats.Resources, registry.PinTemplate: cats.Templates} {
		if cat != nil {
			out[kind] = cat
		}
	}
	return out
}

// entryKey names one entry of a tenant's lists: server, kind and name.
type entryKey struct{ server, kind, name string }

func keyOf(p registry.Pin) entryKey { return entryKey{p.Server, p.Kind, p.Tool} }

// catalogOf is the catalog of kind's entries; nil when there is none.
func (h *Handler) catalogOf(kind string) Catalog {
	if kind == registry.PinTool {
		return h.o.Catalog
	}
	return h.o.Listings[kind]
}

// current is the catalogs' definitions of tenant's tools, prompts,
// resources and templates (of server only, when not ""); a kind without
// a catalog, or whose catalog cannot be read, has none.
func (h *Handler) current(r *http.Request, tenant, server string) map[entryKey]json.RawMessage {
	out := map[entryKey]json.RawMessage{}
	for _, kind := range registry.PinKinds {
		cat := h.catalogOf(kind)
		if cat == nil {
			continue
		}
		entries, _, err := cat.View(r.Context(), tenant, server)
		if err != nil {
			continue
		}
		for _, e := range entries {
			out[entryKey{e.Server.Name, kind, e.Tool.Name}] = e.Tool.Def
		}
	}
	return out
}

func (h *Handler) listPins(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	server := r.URL.Query().Get("server")
	pins, err := h.b.Pins(r.Context(), t.ID, server)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	cur := h.current(r, t.ID, server)
	out := PinList{Pins: []PinView{}, Unpinned: []PinView{}}
	seen := map[entryKey]bool{}
	for _, p := range pins {
		v := PinView{Pin: p}
		k := keyOf(p)
		seen[k] = true
		if def, ok := cur[k]; ok {
			v.Listed = true
			if canon, hash, err := registry.Canonical(p.Kind, def); err == nil {
				legacy := ""
				if p.Kind == registry.PinTool {
					legacy, _ = registry.LegacyToolHash(def)
				}
				same, _ := registry.PinApproves(p.Hash, hash, legacy)
				v.Current, v.Changed = hash, !same
				if v.Changed {
					v.CurrentDef = canon
				}
			}
		}
		out.Pins = append(out.Pins, v)
	}
	for k, def := range cur {
		if seen[k] {
			continue
		}
		canon, hash, err := registry.Canonical(k.kind, def)
		if err != nil {
			continue
		}
		held := t.HoldsNewTools() && k.kind == registry.PinTool
		out.Unpinned = append(out.Unpinned, PinView{Pin: registry.Pin{Tenant: t.ID, Server: k.server, Kind: k.kind, Tool: k.name}, Listed: true, Current: hash, CurrentDef: canon, Held: held})
	}
	slices.SortFunc(out.Unpinned, func(a, b PinView) int { return registry.ComparePins(a.Pin, b.Pin) })
	out.NewTools = cmp.Or(t.NewTools, registry.NewToolsPin)
	out.Renames = renames(&out, cur)
	writeJSON(w, http.StatusOK, out)
}

// renames pairs each unpinned tool of out with the tool pin of its server
// that it looks like renamed (registry.RenameOf, the gateway's own rule),
// marks both, and returns the pairs. Unpinned tools are taken in order; a
// pin is the origin of one rename at most. Other kinds are not paired.
func renames(out *PinList, cur map[entryKey]json.RawMessage) []Rename {
	found := []Rename{}
	taken := map[int]bool{}
	for i := range out.Unpinned {
		u := &out.Unpinned[i]
		if u.Kind != registry.PinTool {
			continue
		}
		var cands []registry.Pin
		var idx []int
		for j, p := range out.Pins {
			if p.Server == u.Server && p.Kind == registry.PinTool && !taken[j] {
				cands = append(cands, p.Pin)
				idx = append(idx, j)
			}
		}
		listed := func(tool string) bool { _, ok := cur[entryKey{u.Server, registry.PinTool, tool}]; return ok }
		from, score, ok := registry.RenameOf(u.CurrentDef, u.Tool, cands, listed)
		if !ok {
			continue
		}
		for n, p := range cands {
			if p.Tool == from.Tool {
				j := idx[n]
				taken[j] = true
				out.Pins[j].RenamedTo, out.Pins[j].Similarity = u.Tool, score
			}
		}
		u.Held, u.RenamedFrom, u.Similarity = true, from.Tool, score
		found = append(found, Rename{Server: u.Server, From: from.Tool, To: u.Tool, Similarity: score})
	}
	return found
}

func (h *Handler) getNewTools(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, NewToolsSetting{NewTools: cmp.Or(t.NewTools, registry.NewToolsPin)})
}

// putNewTools sets the tenant's new_tools: "pin" (trust on first use) or
// "hold" (new tools await an operator's pin). Audited.
func (h *Handler) putNewTools(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	var req NewToolsSetting
	if err := readJSON(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if req.NewTools == "" || registry.ValidateNewTools(req.NewTools) != nil {
		h.fail(w, r, badField("new_tools", "want "+strings.Join(registry.NewToolsModes, " or ")))
		return
	}
	t.NewTools = req.NewTools
	if err := h.b.PutTenant(r.Context(), t); err != nil {
		h.fail(w, r, err)
		return
	}
	ri, now := info(r), h.o.Now()
	h.record(r.Context(), audit.Record{Time: now, Tenant: t.ID, Caller: ri.principal, CorrelationID: ri.corr, Layer: string(refusal.LayerGateway),
		Method: "tenants.new_tools", Outcome: audit.OutcomeAllowed, PolicyHash: audit.PolicyHashNone, Detail: "new_tools=" + quote(req.NewTools)})
	writeJSON(w, http.StatusOK, req)
}

// pin serves POST (on) and DELETE (!on) of
// /tenants/{tenant}/servers/{server}/{kind}/{name}/pin: pin the
// definition of the server's tool, prompt, resource or template (as
// listed now, or the hash given), or drop its pin so that the next
// listing pins it on first use. {kind} is the plural (tools, prompts,
// resources, templates); an unknown one is 404.
func (h *Handler) pin(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		kind, ok := registry.ParsePinKindPlural(r.PathValue("kind"))
		if !ok {
			h.fail(w, r, store.ErrNotFound)
			return
		}
		t, ok := h.tenant(w, r)
		if !ok {
			return
		}
		server, tool := r.PathValue("server"), r.PathValue("name")
		var req PinRequest
		if on {
			if err := readJSON(w, r, &req); err != nil {
				h.fail(w, r, err)
				return
			}
			if req.Hash != "" && !registry.ValidPinHash(req.Hash) {
				h.fail(w, r, badField("hash", "want v2:sha256: and 64 hex digits (or version 1's sha256: and 64 hex digits), as GET .../pins shows it"))
				return
			}
		}
		ri, now := info(r), h.o.Now()
		by := ri.principal
		if req.By != "" {
			by = req.By + " via " + ri.principal
		}
		p := registry.Pin{Tenant: t.ID, Server: server, Kind: kind, Tool: tool, Hash: req.Hash, By: by, At: now}
		what := registry.PinKindName(kind)
		method := "pins.pin"
		var err error
		switch {
		case !on:
			method = "pins.unpin"
			err = h.b.DeletePin(r.Context(), t.ID, server, kind, tool)
		case p.Hash == "":
			def, listed := h.current(r, t.ID, server)[entryKey{server, kind, tool}]
			if !listed {
				h.fail(w, r, badField("hash", "the "+what+" is not listed by its server now; give the hash to pin"))
				return
			}
			if p.Def, p.Hash, err = registry.Canonical(kind, def); err != nil {
				h.fail(w, r, badField("hash", "the listed definition is not a JSON object; give the hash to pin"))
				return
			}
			fallthrough
		default:
			err = h.b.PutPin(r.Context(), p)
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		named := tool
		if kind != registry.PinTool {
			named = kind + ":" + tool // as the gateway's records name it
		}
		h.record(r.Context(), audit.Record{Time: now, Tenant: t.ID, Caller: by, CorrelationID: ri.corr, Layer: string(refusal.LayerGateway),
			Method: method, Server: server, Tool: named, Outcome: audit.OutcomeAllowed, PolicyHash: audit.PolicyHashNone,
			Detail: "by=" + quote(by) + " hash=" + quote(p.Hash)})
		writeJSON(w, http.StatusOK, PinAnswer{Pinned: on, Pin: p})
	}
}
