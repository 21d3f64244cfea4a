// Package connect gives each caller their own OAuth grant to an upstream
// MCP server that requires one (a registry server with auth: oauth): a
// connection, keyed (tenant, caller, server). It discovers the server's
// authorization server the way an MCP client does (discover.go), runs
// authorization code with PKCE and the resource parameter (flow.go),
// keeps the tokens sealed at rest (shared/seal) and a bounded cache of
// opened ones (cache.go), and refreshes them before they expire
// (tokens.go). docs/design/connections.md is the design; the user guide
// is docs/connections.md.
package connect

import (
	"context"
	"time"
)

// Connection statuses.
const (
	// StatusActive: the tokens work as far as aegis knows.
	StatusActive = "active"
	// StatusBroken: a refresh failed or the upstream refused the token;
	// the caller is asked to connect again. A broken connection's tokens
	// are never used.
	StatusBroken = "broken"
)

// Connection is one caller's grant to one server of a tenant. The tokens
// are in Sealed only (Tokens sealed with seal.Seal, bound to tenant,
// caller, server and id): a Connection can be listed, logged and audited
// without showing them.
type Connection struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Caller string `json:"caller"`
	Server string `json:"server"`
	// Issuer is the authorization server that granted it.
	Issuer string `json:"issuer"`
	Status string `json:"status"`
	Scope  string `json:"scope,omitempty"`
	// Expires is when the access token expires (zero: not said).
	Expires time.Time `json:"expires,omitzero"`
	Sealed  []byte    `json:"sealed"`
	// Version counts the writes of the record: a write of version n
	// succeeds only over version n-1 (or nothing, for 1), so two
	// instances refreshing at once cannot both rotate the refresh token.
	Version int64     `json:"version"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// Tokens are what a connection keeps sealed.
type Tokens struct {
	Access  string `json:"access_token"`
	Refresh string `json:"refresh_token,omitempty"`
	Type    string `json:"token_type,omitempty"`
	// Endpoints of the issuer at the time of the grant, for refresh and
	// revocation without a new discovery.
	TokenEndpoint      string `json:"token_endpoint"`
	RevocationEndpoint string `json:"revocation_endpoint,omitempty"`
	Resource           string `json:"resource"`
}

// Pending is an authorization in progress: made when a call needs a
// connection, opened once when the person follows the link (which
// redirects to the authorization server), and taken once by the
// callback. It lives PendingTTL.
type Pending struct {
	// State is the OAuth state parameter and the link's id: 256 random
	// bits, base64url.
	State  string `json:"state"`
	Tenant string `json:"tenant"`
	Caller string `json:"caller"`
	Server string `json:"server"`
	// Verifier is the PKCE code_verifier (S256); it never leaves aegis.
	Verifier string `json:"verifier"`
	// Browser is the SHA-256 (hex) of the cookie the link set in the
	// browser that followed it; the callback must come with that cookie.
	Browser string `json:"browser,omitempty"`
	// What the authorization request said, the token request repeats.
	Redirect string `json:"redirect"`
	Resource string `json:"resource"`
	Scope    string `json:"scope,omitempty"`
	// The discovered authorization server.
	Issuer                string `json:"issuer"`
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	TokenEndpoint         string `json:"token_endpoint"`
	RevocationEndpoint    string `json:"revocation_endpoint,omitempty"`
	// ClientID is the client the authorization is asked for: the
	// registry's, or the one aegis registered (Registration).
	ClientID string    `json:"client_id,omitempty"`
	Opened   bool      `json:"opened,omitempty"`
	Expires  time.Time `json:"expires"`
}

// Registration is a client aegis registered for itself (RFC 7591 dynamic
// client registration) at the authorization server of a tenant's server
// whose registry entry names no client: one per (tenant, server, issuer),
// used for every caller's connection there. The client secret is in
// Sealed only (sealed with seal.Seal, bound to tenant, server, issuer and
// client id); empty for a public client.
type Registration struct {
	Tenant   string    `json:"tenant"`
	Server   string    `json:"server"`
	Issuer   string    `json:"issuer"`
	ClientID string    `json:"client_id"`
	Sealed   []byte    `json:"sealed,omitempty"`
	Created  time.Time `json:"created"`
}

// PendingTTL is how long a link and its authorization stay usable.
const PendingTTL = 10 * time.Minute

// Store keeps connections and pending authorizations. Lookups of absent
// or expired items return store.ErrNotFound; a lost conditional write
// returns store.ErrConflict.
type Store interface {
	// Connection returns the connection of (tenant, caller, server).
	Connection(ctx context.Context, tenant, caller, server string) (Connection, error)
	// PutConnection writes c if the stored record's version is
	// c.Version-1 (no record for version 1); else ErrConflict.
	PutConnection(ctx context.Context, c Connection) error
	// Connections lists a tenant's connections, by caller then server.
	Connections(ctx context.Context, tenant string) ([]Connection, error)
	// DeleteConnection removes a connection; ErrNotFound if absent.
	DeleteConnection(ctx context.Context, tenant, caller, server string) error

	// PutPending stores a new authorization (ErrConflict if its state
	// exists).
	PutPending(ctx context.Context, p Pending) error
	// OpenPending marks the tenant's authorization state opened by the
	// browser whose cookie hashes to browser, once: ErrConflict when it
	// was opened already, ErrNotFound when absent or expired at now.
	OpenPending(ctx context.Context, tenant, state, browser string, now time.Time) (Pending, error)
	// TakePending removes and returns an opened authorization, once:
	// ErrNotFound when absent, expired at now, or never opened.
	TakePending(ctx context.Context, tenant, state string, now time.Time) (Pending, error)

	// Registration returns the client registered for (tenant, server) at
	// issuer; ErrNotFound when there is none.
	Registration(ctx context.Context, tenant, server, issuer string) (Registration, error)
	// PutRegistration stores r when none is stored for its (tenant,
	// server, issuer); else ErrConflict (the first registration stays).
	PutRegistration(ctx context.Context, r Registration) error
}
