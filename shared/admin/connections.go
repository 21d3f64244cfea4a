package admin

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/store"
)

// Revoker revokes connections (shared/connect's Broker): at the issuer's
// revocation endpoint, then in the store, audited.
type Revoker interface {
	Revoke(ctx context.Context, tenant, id string) (c connect.Connection, atProvider bool, err error)
}

// ConnectionInfo is a connection as the admin API shows it: never its
// tokens.
type ConnectionInfo struct {
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Caller  string    `json:"caller"`
	Server  string    `json:"server"`
	Issuer  string    `json:"issuer"`
	Status  string    `json:"status"`
	Scope   string    `json:"scope,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// ConnectionList is the answer of GET .../connections.
type ConnectionList struct {
	Connections []ConnectionInfo `json:"connections"`
}

// RevokedConnection is the answer of POST .../connections/{id}/revoke.
type RevokedConnection struct {
	ConnectionInfo
	// RevokedAtProvider: the issuer's revocation endpoint accepted the
	// revocation; false when it has none or refused (the connection is
	// deleted here either way).
	RevokedAtProvider bool `json:"revoked_at_provider"`
}

func infoOf(c connect.Connection) ConnectionInfo {
	return ConnectionInfo{ID: c.ID, Tenant: c.Tenant, Caller: c.Caller, Server: c.Server, Issuer: c.Issuer, Status: c.Status,
		Scope: c.Scope, Expires: c.Expires, Created: c.Created, Updated: c.Updated}
}

func (h *Handler) listConnections(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	cs, err := h.b.Connections(r.Context(), t.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := ConnectionList{Connections: []ConnectionInfo{}}
	for _, c := range cs {
		out.Connections = append(out.Connections, infoOf(c))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) revokeConnection(w http.ResponseWriter, r *http.Request) {
	t, ok := h.tenant(w, r)
	if !ok {
		return
	}
	if h.o.Connections == nil {
		writeError(w, info(r).corr, http.StatusConflict, CodeConflict, "this deployment makes no connections (no AEGIS_PUBLIC_URL): nothing to revoke with", "")
		return
	}
	c, at, err := h.o.Connections.Revoke(r.Context(), t.ID, r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, info(r).corr, http.StatusNotFound, CodeNotFound, "no connection "+r.PathValue("id")+" of tenant "+t.ID, "")
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, RevokedConnection{ConnectionInfo: infoOf(c), RevokedAtProvider: at})
}
