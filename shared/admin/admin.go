// Package admin is the operators' HTTP API under /admin/v1/: held calls
// (list, approve, deny), kill switches, the registry (tenants, servers, API
// keys) and audit queries. It is an http.Handler of the same family as the
// gateway, with its own authentication: an admin key locally
// (AEGIS_ADMIN_KEY), or API Gateway's IAM authorization on AWS when it runs
// as the AdminFunction. Tenant API keys never open it, and admin keys never
// call tools (they are not in the key registry).
//
// Errors are JSON: {"error":{"code":"...","message":"...","field":"..."},
// "correlation_id":"..."}, with a stable code per status (see docs/admin.md).
package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/console"
	"github.com/aegis-gw/aegis/shared/correlation"
)

// Prefix is where the admin API is mounted.
const Prefix = "/admin/v1/"

// MinKeyLength is the shortest admin key New accepts.
const MinKeyLength = 24

// IAMPrincipal returns the IAM principal (caller ARN) that API Gateway's IAM
// authorizer verified for r, and false when r carries none. shared/apigw
// exposes the request context it reads from.
type IAMPrincipal func(r *http.Request) (principal string, ok bool)

// Options are the handler's dependencies. Exactly one of AdminKey and
// TrustIAM must be set: there is no default and no way to turn
// authentication off.
type Options struct {
	// AdminKey is the bearer key of the local admin API (AEGIS_ADMIN_KEY),
	// compared in constant time. It must be at least MinKeyLength
	// characters and must not look like a tenant API key.
	AdminKey string
	// TrustIAM, set only by the AdminFunction on AWS whose routes use IAM
	// authorization in the template, trusts API Gateway's verification and
	// takes the principal from the request context. A request without an
	// IAM principal is refused.
	TrustIAM IAMPrincipal

	// Catalog is the tenants' tool catalog (the gateway's, aegis serve:
	// gateway.Gateway.Catalog): the kill switch resolves tool names with
	// it and refuses names that match no tool. nil (the AdminFunction,
	// which cannot reach upstreams): a tool stop must say "unlisted".
	Catalog Catalog
	// Listings are the tenants' other catalogs, by pin kind
	// (registry.PinPrompt, PinResource, PinTemplate; the gateway's,
	// gateway.Gateway.Catalogs), for the pins review: a kind without
	// one shows its pins without what its servers list now, and pinning
	// one of its entries needs the hash.
	Listings map[string]Catalog

	// KillSwitchRefresh is how long a stop or resume takes to be in force on
	// every instance: KILL_SWITCH_REFRESH_SECS, each instance's re-read
	// period; 0 when stops are read on every call (the embedded store of
	// aegis serve). Stop answers say when it is in force (StopAnswer).
	KillSwitchRefresh time.Duration

	// Connections revokes callers' connections (the gateway's broker,
	// shared/connect); nil: revocation answers 409 (the deployment makes
	// no connections), listing still works.
	Connections Revoker

	LocalMode bool             // upstream URLs may be http and loopback (aegis serve)
	Now       func() time.Time // nil = time.Now
	Logger    *slog.Logger     // nil = slog.Default()
}

// Handler serves the admin API.
type Handler struct {
	o      Options
	b      backend.Backend // the registry, approvals, stops and the audit trail
	keySum [32]byte
	mux    *http.ServeMux
	// console is the web console (shared/console), served with an admin
	// key only: on AWS, behind IAM authorization, a browser cannot sign
	// requests (docs/console.md).
	console *console.Console
}

// New returns the admin handler over b, or an error when o does not name
// exactly one way to authenticate. o is copied.
func New(b backend.Backend, o *Options) (*Handler, error) {
	if b == nil || o == nil {
		return nil, errors.New("admin: a backend and options are required")
	}
	switch {
	case o.AdminKey != "" && o.TrustIAM != nil:
		return nil, errors.New("admin: give either an admin key or IAM trust, not both")
	case o.AdminKey == "" && o.TrustIAM == nil:
		return nil, errors.New("admin: no authentication configured (set AEGIS_ADMIN_KEY, or IAM trust on the AdminFunction)")
	case o.AdminKey != "" && len(o.AdminKey) < MinKeyLength:
		return nil, errors.New("admin: AEGIS_ADMIN_KEY must be at least 24 characters")
	case strings.HasPrefix(o.AdminKey, auth.Prefix):
		return nil, errors.New("admin: AEGIS_ADMIN_KEY must not look like a tenant API key (aegis_...)")
	}
	h := &Handler{o: *o, b: b, keySum: sha256.Sum256([]byte(o.AdminKey))}
	if h.o.Now == nil {
		h.o.Now = time.Now
	}
	if h.o.Logger == nil {
		h.o.Logger = slog.Default()
	}
	if h.o.AdminKey != "" {
		c, err := console.New(&console.Options{CheckKey: h.checkKey, KillSwitchRefresh: h.o.KillSwitchRefresh, Now: h.o.Now, Logger: h.o.Logger})
		if err != nil {
			return nil, err
		}
		h.console = c
	}
	h.routes()
	return h, nil
}

// NewKey returns a fresh random admin key (for the docs' setup step and
// tests).
func NewKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "aegis-admin-" + hex.EncodeToString(b)
}

// ServeHTTP implements http.Handler: authenticate, then route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.console != nil && (strings.HasPrefix(r.URL.Path, console.Prefix) || r.URL.Path+"/" == console.Prefix) {
		h.console.ServeHTTP(w, r) // the login form is open; the rest checks the session
		return
	}
	corr := correlation.ID(r.Header.Get("traceparent"))
	w.Header().Set(correlation.Header, corr)
	principal, fail := h.authenticate(r)
	if fail != "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="aegis-admin"`)
		writeError(w, corr, http.StatusUnauthorized, "unauthorized", "unauthorized: "+fail, "")
		return
	}
	r = r.WithContext(withRequest(r.Context(), reqInfo{corr: corr, principal: principal}))
	h.mux.ServeHTTP(w, r)
}

// authenticate returns the principal, or why the request is refused.
func (h *Handler) authenticate(r *http.Request) (string, string) {
	if h.o.TrustIAM != nil {
		p, ok := h.o.TrustIAM(r)
		if !ok || p == "" {
			return "", "no IAM identity on this request"
		}
		return p, ""
	}
	if h.console != nil && r.Header.Get("Authorization") == "" {
		// The console's session cookie, with its CSRF token on changes.
		if p, fail, used := h.console.Authenticate(r); used {
			return p, fail
		}
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return "", "missing admin key; send the header Authorization: Bearer AEGIS_ADMIN_KEY"
	}
	if strings.HasPrefix(key, auth.Prefix) {
		return "", "tenant API keys cannot open admin routes"
	}
	if !h.checkKey(key) {
		return "", "invalid admin key"
	}
	return "admin-key", ""
}

// checkKey reports whether key is the admin key, comparing SHA-256 sums
// in constant time.
func (h *Handler) checkKey(key string) bool {
	if h.o.AdminKey == "" || strings.HasPrefix(key, auth.Prefix) {
		return false
	}
	sum := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare(sum[:], h.keySum[:]) == 1
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /admin/v1/approvals", h.listApprovals)
	m.HandleFunc("GET /admin/v1/approvals/{id}", h.getApproval)
	m.HandleFunc("POST /admin/v1/approvals/{id}/approve", h.decide(approval.Approved))
	m.HandleFunc("POST /admin/v1/approvals/{id}/deny", h.decide(approval.Denied))

	m.HandleFunc("GET /admin/v1/tenants", h.listTenants)
	m.HandleFunc("POST /admin/v1/tenants", h.createTenant)
	m.HandleFunc("GET /admin/v1/tenants/{tenant}", h.getTenant)
	m.HandleFunc("PUT /admin/v1/tenants/{tenant}/issuers", h.putIssuers)
	m.HandleFunc("GET /admin/v1/tenants/{tenant}/servers", h.listServers)
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/servers", h.putServer)
	m.HandleFunc("GET /admin/v1/tenants/{tenant}/keys", h.listKeys)
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/keys", h.createKey)
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/keys/{id}/revoke", h.revokeKey)
	m.HandleFunc("GET /admin/v1/tenants/{tenant}/connections", h.listConnections)               // connections.go
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/connections/{id}/revoke", h.revokeConnection) // connections.go
	h.routePolicy(m)                                                                            // policy.go

	m.HandleFunc("GET /admin/v1/tenants/{tenant}/stops", h.listStops)
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/servers/{server}/stop", h.stop(true, stopServer))
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/servers/{server}/resume", h.stop(false, stopServer))
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/servers/{server}/tools/{tool}/stop", h.stop(true, stopServerTool))
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/servers/{server}/tools/{tool}/resume", h.stop(false, stopServerTool))
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/tools/{tool}/stop", h.stop(true, stopExposedTool))
	m.HandleFunc("POST /admin/v1/tenants/{tenant}/tools/{tool}/resume", h.stop(false, stopExposedTool))
	m.HandleFunc("GET /admin/v1/params-keys", h.listParamsKeys)
	m.HandleFunc("POST /admin/v1/params-keys/rotate", h.rotateParamsKey)
	h.routePins(m) // pins.go

	m.HandleFunc("GET /admin/v1/tenants/{tenant}/audit", h.queryAudit)
	m.HandleFunc("GET /admin/v1/tenants/{tenant}/audit/export", h.exportAudit)
	m.HandleFunc("GET /admin/v1/tenants/{tenant}/upstreams", h.listUpstreams) // upstreams.go

	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, info(r).corr, http.StatusNotFound, "not_found", "no such admin route: "+r.Method+" "+r.URL.Path, "")
	})
	h.mux = m
}

var _ http.Handler = (*Handler)(nil)
