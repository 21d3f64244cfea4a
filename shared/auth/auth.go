// Package auth issues and checks tenant API keys. A key is shown once when
// issued; only its SHA-256 is stored. A presented key is found by its public
// id and its hash compared in constant time.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// Prefix starts every tenant API key: "aegis_" + id + "_" + secret.
const Prefix = "aegis_"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewKey issues a key for caller of tenant. It returns the secret, to be
// shown once, and the record to store (hash only).
func NewKey(tenant, caller string, now time.Time) (secret string, rec registry.Key) {
	id := strings.ToLower(b32.EncodeToString(random(10)))
	secret = Prefix + id + "_" + strings.ToLower(b32.EncodeToString(random(25)))
	return secret, registry.Key{ID: id, Tenant: tenant, Caller: caller, Hash: Hash(secret), Created: now}
}

// KeyWithSecret builds the record for a key whose secret was chosen by the
// operator (AEGIS_DEMO_KEY). The secret must have the key format.
func KeyWithSecret(tenant, caller, secret string, now time.Time) (registry.Key, error) {
	id, ok := KeyID(secret)
	if !ok {
		return registry.Key{}, errors.New(`a key must look like "aegis_<id>_<secret>" with a secret of at least 20 characters`)
	}
	return registry.Key{ID: id, Tenant: tenant, Caller: caller, Hash: Hash(secret), Created: now}, nil
}

// Hash is the stored form of a key: hex SHA-256. Keys are 125+ bits of
// randomness, so a fast hash is enough (no password stretching needed).
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// hashIs reports whether Hash(key) is stored, comparing in constant time
// and without the allocations of Hash and of byte-slice copies (this runs
// on every request).
func hashIs(key, stored string) bool {
	sum := sha256.Sum256([]byte(key))
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])
	if len(stored) != len(h) {
		return false
	}
	var diff byte
	for i := range h {
		diff |= h[i] ^ stored[i]
	}
	return subtle.ConstantTimeByteEq(diff, 0) == 1
}

// KeyID extracts the public id of a key, and whether the key is well formed.
func KeyID(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok {
		return "", false
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) < 4 || len(id) > 64 || len(secret) < 20 {
		return "", false
	}
	return id, true
}

// tokenKeyPrefix starts the key id of an OAuth token's caller. A ':'
// never appears in an API key's id, so the two cannot collide.
const tokenKeyPrefix = "oauth:"

// TokenKeyID is the key id of the caller of an OAuth token (shared/oauth):
// "oauth:" and 16 hex digits of the SHA-256 of issuer and caller, the same
// for every token of that caller. It names the caller's windows (the per-key
// rate limit, the session-mint ceiling) and Cedar's principal.key_id; there
// is no key record of that id.
func TokenKeyID(issuer, caller string) string {
	sum := sha256.Sum256([]byte(issuer + "\x00" + caller))
	return tokenKeyPrefix + hex.EncodeToString(sum[:8])
}

// IsTokenKeyID reports whether id is a TokenKeyID (no key record to read).
func IsTokenKeyID(id string) bool { return strings.HasPrefix(id, tokenKeyPrefix) }

func random(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	return b
}

// Error is an authentication failure: HTTP 401 {"error":"unauthorized: ..."},
// or, for a valid OAuth token without a required scope, HTTP 403
// {"error":"forbidden: ..."} (Status 403, Challenge "insufficient_scope",
// Scope the scopes required). Its text never contains the presented key
// or token.
type Error struct {
	Reason string
	// Status is 0 (401) or http.StatusForbidden.
	Status int
	// Challenge is the RFC 6750 error code for WWW-Authenticate:
	// "invalid_token", "insufficient_scope", or "" (no credentials, or
	// an API key).
	Challenge string
	// Scope is the space-separated scopes an insufficient_scope
	// refusal requires.
	Scope string
}

func (e *Error) Error() string {
	if e.Status == http.StatusForbidden {
		return "forbidden: " + e.Reason
	}
	return "unauthorized: " + e.Reason
}

// HTTPStatus is 401, or the error's Status when set.
func (e *Error) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return http.StatusUnauthorized
}

// Failures a client can act on (seed 004, "Handling errors in a client").
var (
	ErrMissing   = &Error{Reason: "missing API key; send the header Authorization: Bearer KEY"}
	ErrInvalid   = &Error{Reason: "invalid API key: the key sent is wrong, revoked or not one of this gateway's; send Authorization: Bearer with a valid aegis API key"}
	ErrNotServed = &Error{Reason: "tenant not served by this gateway"}
)

// Served decides whether a tenant is served by this deployment.
type Served func(tenant string) bool

// Authenticator checks bearer keys against the registry.
type Authenticator struct {
	reg    registry.Reader
	served Served
}

// NewAuthenticator returns an Authenticator over reg; served may be nil
// (every registered tenant is served).
func NewAuthenticator(reg registry.Reader, served Served) *Authenticator {
	return &Authenticator{reg: reg, served: served}
}

// Authenticate checks the Authorization header value. It returns the key
// record and its tenant, an *Error for the client, or another error when the
// registry could not be read (the caller answers 503 without detail).
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (registry.Key, registry.Tenant, error) {
	key, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || key == "" {
		return registry.Key{}, registry.Tenant{}, ErrMissing
	}
	key = strings.TrimSpace(key)
	id, ok := KeyID(key)
	if !ok {
		return registry.Key{}, registry.Tenant{}, ErrInvalid
	}
	rec, err := a.reg.Key(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return registry.Key{}, registry.Tenant{}, ErrInvalid
	}
	if err != nil {
		return registry.Key{}, registry.Tenant{}, err
	}
	if !hashIs(key, rec.Hash) || rec.Revoked {
		return registry.Key{}, registry.Tenant{}, ErrInvalid
	}
	t, err := a.reg.Tenant(ctx, rec.Tenant)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.Disabled) {
		return registry.Key{}, registry.Tenant{}, ErrInvalid
	}
	if err != nil {
		return registry.Key{}, registry.Tenant{}, err
	}
	if a.served != nil && !a.served(t.ID) {
		return registry.Key{}, registry.Tenant{}, ErrNotServed
	}
	return rec, t, nil
}
