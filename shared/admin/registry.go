package admin

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

var headerPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)

// validRef is the config file's rule for a credential reference
// (registry.ValidateCredentialRef).
func validRef(ref string) bool { return registry.ValidateCredentialRef(ref) == nil }

// TenantRequest creates a tenant.
type TenantRequest struct {
	ID               string `json:"id"`
	Tier             string `json:"tier,omitempty"`          // free (default), growth, enterprise
	RefusalShape     string `json:"refusal_shape,omitempty"` // error (default) or result
	WebhookURL       string `json:"webhook_url,omitempty"`
	WebhookSecretRef string `json:"webhook_secret_ref,omitempty"`
	NewTools         string `json:"new_tools,omitempty"` // pin (default) or hold
	// Issuers are the OAuth authorization servers whose tokens the
	// tenant accepts (registry.Issuer, docs/oauth.md).
	Issuers []registry.Issuer `json:"issuers,omitempty"`
}

// IssuersRequest replaces a tenant's issuers (PUT .../issuers); an empty
// list leaves the tenant with API keys only.
type IssuersRequest struct {
	Issuers []registry.Issuer `json:"issuers"`
}

// TenantList is the answer of GET /admin/v1/tenants.
type TenantList struct {
	Tenants []registry.Tenant `json:"tenants"`
}

func (h *Handler) listTenants(w http.ResponseWriter, r *http.Request) {
	ts, err := h.b.ListTenants(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if ts == nil {
		ts = []registry.Tenant{}
	}
	writeJSON(w, http.StatusOK, TenantList{Tenants: ts})
}

func (h *Handler) getTenant(w http.ResponseWriter, r *http.Request) {
	t, err := h.b.Tenant(r.Context(), r.PathValue("tenant"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (h *Handler) createTenant(w http.ResponseWriter, r *http.Request) {
	var req TenantRequest
	if err := readJSON(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.validTenant(&req); err != nil {
		h.fail(w, r, err)
		return
	}
	switch _, err := h.b.Tenant(r.Context(), req.ID); {
	case err == nil:
		writeError(w, info(r).corr, http.StatusConflict, CodeConflict, "tenant "+req.ID+" already exists", "id")
		return
	case !errors.Is(err, store.ErrNotFound):
		h.fail(w, r, err)
		return
	}
	t := registry.Tenant{ID: req.ID, Tier: req.Tier, RefusalShape: req.RefusalShape, WebhookURL: req.WebhookURL,
		WebhookSecretRef: req.WebhookSecretRef, NewTools: req.NewTools, Issuers: req.Issuers, Created: h.o.Now().UTC()}
	if err := h.b.PutTenant(r.Context(), t); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, t)
}

func (h *Handler) validTenant(req *TenantRequest) error {
	if err := registry.ValidateTenantID(req.ID); err != nil {
		return badField("id", err.Error())
	}
	switch req.Tier {
	case "":
		req.Tier = registry.TierFree
	case registry.TierFree, registry.TierGrowth, registry.TierEnterprise:
	default:
		return badField("tier", "want free, growth or enterprise")
	}
	switch req.RefusalShape {
	case "", registry.ShapeError, registry.ShapeResult:
	default:
		return badField("refusal_shape", "want error or result")
	}
	if registry.ValidateNewTools(req.NewTools) != nil {
		return badField("new_tools", "want "+strings.Join(registry.NewToolsModes, " or "))
	}
	// One rule with the config file and the notifier: a webhook_url needs
	// a webhook_secret_ref (approval.ValidateWebhook).
	var we *approval.WebhookError
	if err := approval.ValidateWebhook(req.WebhookURL, req.WebhookSecretRef, h.o.LocalMode); errors.As(err, &we) {
		return badField(we.Field, we.Reason)
	} else if err != nil {
		return badField("webhook_url", err.Error())
	}
	if req.WebhookSecretRef != "" && !validRef(req.WebhookSecretRef) {
		return badField("webhook_secret_ref", "want env:NAME, file:/path, secretsmanager:ID or ssm:/name")
	}
	return h.validIssuers(req.Issuers)
}

// validIssuers applies the config file's rule (registry.ValidateIssuers),
// naming the field.
func (h *Handler) validIssuers(issuers []registry.Issuer) error {
	var ie *registry.IssuerError
	if err := registry.ValidateIssuers(issuers, h.o.LocalMode); errors.As(err, &ie) {
		return badField(fmt.Sprintf("issuers[%d].%s", ie.Index, ie.Field), ie.Reason)
	} else if err != nil {
		return badField("issuers", err.Error())
	}
	return nil
}

// putIssuers replaces a tenant's trusted issuers. The tenant record is
// read and written back whole (last write wins, as for every tenant
// field); the gateway sees the change within its registry cache's TTL.
func (h *Handler) putIssuers(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	var req IssuersRequest
	if err := readJSON(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.validIssuers(req.Issuers); err != nil {
		h.fail(w, r, err)
		return
	}
	t.Issuers = req.Issuers
	if len(t.Issuers) == 0 {
		t.Issuers = nil
	}
	if err := h.b.PutTenant(r.Context(), t); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// ServerRequest registers (or replaces) an upstream server of a tenant.
type ServerRequest struct {
	Name       string               `json:"name"`
	URL        string               `json:"url"`
	Credential *registry.Credential `json:"credential,omitempty"`
	// Auth "oauth" makes each caller connect with their own grant, with
	// OAuth the tenant's client there (registry.ValidateServerAuth).
	Auth  string                           `json:"auth,omitempty"`
	OAuth *registry.OAuthClient            `json:"oauth,omitempty"`
	Tools map[string]registry.ToolSettings `json:"tools,omitempty"`
}

// ServerList is the answer of GET .../servers.
type ServerList struct {
	Servers []registry.Server `json:"servers"`
}

// tenant reads the path's tenant, answering 404 when it does not exist.
func (h *Handler) tenant(w http.ResponseWriter, r *http.Request) (registry.Tenant, bool) {
	t, err := h.b.Tenant(r.Context(), r.PathValue("tenant"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, info(r).corr, http.StatusNotFound, CodeNotFound, "no tenant "+r.PathValue("tenant"), "")
		return t, false
	}
	if err != nil {
		h.fail(w, r, err)
		return t, false
	}
	return t, true
}

// servers reads the servers of the request's tenant; false: the answer
// (404, or the store's failure) was written.
func (h *Handler) servers(w http.ResponseWriter, r *http.Request) ([]registry.Server, bool) {
	t, ok := h.tenant(w, r)
	if !ok {
		return nil, false
	}
	ss, err := h.b.Servers(r.Context(), t.ID)
	if err != nil {
		h.fail(w, r, err)
		return nil, false
	}
	return ss, true
}

func (h *Handler) listServers(w http.ResponseWriter, r *http.Request) {
	ss, ok := h.servers(w, r)
	if !ok {
		return
	}
	if ss == nil {
		ss = []registry.Server{}
	}
	writeJSON(w, http.StatusOK, ServerList{Servers: ss})
}

func (h *Handler) putServer(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	var req ServerRequest
	if err := readJSON(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.validServer(req); err != nil {
		h.fail(w, r, err)
		return
	}
	s := registry.Server{Tenant: t.ID, Name: req.Name, URL: req.URL, Credential: req.Credential, Auth: req.Auth, OAuth: req.OAuth, Tools: req.Tools, Created: h.o.Now().UTC()}
	if err := h.b.PutServer(r.Context(), s); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s)
}

func (h *Handler) validServer(req ServerRequest) error {
	if err := registry.ValidateServerName(req.Name); err != nil {
		return badField("name", err.Error())
	}
	if req.URL == "" {
		return badField("url", "required")
	}
	if err := netguard.ValidateURL(req.URL, h.o.LocalMode); err != nil {
		return badField("url", err.Error())
	}
	if c := req.Credential; c != nil {
		if !headerPattern.MatchString(c.Header) {
			return badField("credential.header", "want an HTTP header name")
		}
		if !validRef(c.Ref) {
			return badField("credential.ref", "want env:NAME, file:/path, secretsmanager:ID or ssm:/name (the value itself is never stored)")
		}
	}
	// One rule with the config file (registry.ValidateServerAuth).
	var ae *registry.AuthError
	if err := registry.ValidateServerAuth(req.Auth, req.OAuth, req.Credential); errors.As(err, &ae) {
		return badField(ae.Field, ae.Reason)
	} else if err != nil {
		return badField("auth", err.Error())
	}
	for name := range req.Tools {
		if name == "" || len(name) > 128 {
			return badField("tools", "tool names must be 1 to 128 characters")
		}
	}
	return nil
}

// KeyRequest issues an API key.
type KeyRequest struct {
	Caller string `json:"caller"`
	// Roles are the tenant's roles the key's caller holds; Manifest
	// narrows the tenant's session manifest for its sessions.
	Roles    []string         `json:"roles,omitempty"`
	Manifest *policy.Manifest `json:"manifest,omitempty"`
}

// IssuedKey is the answer of POST .../keys: Key is the secret, shown this
// once and stored only as a hash.
type IssuedKey struct {
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Caller  string    `json:"caller"`
	Created time.Time `json:"created"`
	Key     string    `json:"key"`
}

// KeyList is the answer of GET .../keys (hashes never shown).
type KeyList struct {
	Keys []KeyInfo `json:"keys"`
}

// KeyInfo is a key record without its hash.
type KeyInfo struct {
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Caller  string    `json:"caller"`
	Created time.Time `json:"created"`
	Revoked bool      `json:"revoked"`
}

func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	ks, err := h.b.ListKeys(r.Context(), t.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := KeyList{Keys: []KeyInfo{}}
	for _, k := range ks {
		out.Keys = append(out.Keys, KeyInfo{ID: k.ID, Tenant: k.Tenant, Caller: k.Caller, Created: k.Created.UTC(), Revoked: k.Revoked})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	var req KeyRequest
	if err := readJSON(w, r, &req); err != nil {
		h.fail(w, r, err)
		return
	}
	if err := registry.ValidateCaller(req.Caller); err != nil {
		h.fail(w, r, badField("caller", err.Error()))
		return
	}
	if err := req.Manifest.Validate(); err != nil {
		h.fail(w, r, badField("manifest", err.Error()))
		return
	}
	secret, rec := auth.NewKey(t.ID, req.Caller, h.o.Now().UTC())
	rec.Roles, rec.Manifest = req.Roles, req.Manifest
	if err := h.b.PutKey(r.Context(), rec); err != nil {
		h.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, IssuedKey{ID: rec.ID, Tenant: rec.Tenant, Caller: rec.Caller, Created: rec.Created, Key: secret})
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := h.b.RevokeKey(r.Context(), t.ID, id); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "tenant": t.ID, "revoked": true})
}
