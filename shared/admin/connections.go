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

// The states of a connection as the admin API and the console show it
// (ConnectionInfo.State).
const (
	// StateConnected: active, and its access token has not expired.
	StateConnected = "connected"
	// StateBroken: a refresh failed or the server refused the token; the
	// caller is asked to connect again at their next call.
	StateBroken = "broken"
	// StateExpired: active, but its access token has expired; the next
	// call refreshes it (and marks it broken when that fails).
	StateExpired = "expired"
)

// stateOf is c's state at now.
func stateOf(c connect.Connection, now time.Time) string {
	switch {
	case c.Status != connect.StatusActive:
		return StateBroken
	case !c.Expires.IsZero() && !now.Before(c.Expires):
		return StateExpired
	}
	return StateConnected
}

// ConnectionInfo is a connection as the admin API shows it: never its
// tokens.
type ConnectionInfo struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Caller string `json:"caller"`
	Server string `json:"server"`
	Issuer string `json:"issuer"`
	Status string `json:"status"`
	// State is what the status and the access token's expiry mean now:
	// StateConnected, StateBroken or StateExpired.
	State   string    `json:"state"`
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

func infoOf(c connect.Connection, now time.Time) ConnectionInfo {
	return ConnectionInfo{ID: c.ID, Tenant: c.Tenant, Caller: c.Caller, Server: c.Server, Issuer: c.Issuer, Status: c.Status,
		State: stateOf(c, now), Scope: c.Scope, Expires: c.Expires, Created: c.Created, Updated: c.Updated}
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
	now := h.o.Now()
	for _, c := range cs {
		out.Connections = append(out.Connections, infoOf(c, now))
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
	writeJSON(w, http.StatusOK, RevokedConnection{ConnectionInfo: infoOf(c, h.o.Now()), RevokedAtProvider: at})
}
