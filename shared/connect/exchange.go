package connect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/registry"
)

// The grant and token types of RFC 8693.
const (
	GrantTokenExchange   = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
)

// EventExchange is the audit method of a token exchange that gave a
// token: the record's connection is the exchange's id, which the records
// of the calls that carried the token name too. A failed exchange is an
// EventFailure whose detail starts "token exchange".
const EventExchange = "connection.exchange"

// ExchangeOptions configure an Exchanger. HTTP is required.
type ExchangeOptions struct {
	// HTTP calls the servers (discovery's probe) and the token services;
	// its dialer must apply netguard.Control. Local is aegis serve's mode
	// (http and loopback allowed).
	HTTP    *http.Client
	Local   bool
	Secrets Secrets          // client_secret_ref; nil: public clients only
	Now     func() time.Time // nil: time.Now
	Logger  *slog.Logger     // nil: slog.Default()
	// Audit, when set, gets a record of every exchange (EventExchange)
	// and every failed one (EventFailure): never a token.
	Audit audit.Writer
}

// Subject is the token a caller came with, to be exchanged: an OAuth
// access token that shared/oauth validated, and the issuer that signed
// it (a tenant's registry.Issuer URL).
type Subject struct {
	Token  string
	Issuer string
}

// ErrNoSubject: the caller came with no token to exchange (an API key).
var ErrNoSubject = errors.New("the caller came with an API key, not an OAuth access token to exchange")

// ExchangeError is a token exchange that gave no token: the token service
// could not be found (Err is a *DiscoveryError) or refused (Err says its
// HTTP status and OAuth error code at most, never the answer's text).
type ExchangeError struct {
	Server string
	Err    error
}

func (e *ExchangeError) Error() string {
	return "token exchange for " + e.Server + ": " + e.Err.Error()
}
func (e *ExchangeError) Unwrap() error { return e.Err }

// Exchanger gives a caller who came with an OAuth access token of their
// tenant's issuer the token of a server with auth: token_exchange: it
// exchanges the caller's token (RFC 8693) at the token service (the
// server's configured token_endpoint, else the one discovered from the
// server, which must belong to the issuer of the caller's token) for a
// token whose resource is the server, and keeps it in a per-process cache
// for (tenant, caller, server), bounded by count, bytes and lifetime
// (never past its expiry less RefreshMargin, never longer than
// MaxCacheLifetime), served only for the same caller's token and server
// URL. Nothing is stored: a cold instance exchanges again. The caller's
// token goes to the token service only, never to the server. Safe for
// concurrent use.
type Exchanger struct {
	o     ExchangeOptions
	cl    client
	disc  *Discoverer
	cache tokenCache
}

// NewExchanger returns an Exchanger; o is copied and defaults filled.
func NewExchanger(o ExchangeOptions) (*Exchanger, error) {
	if o.HTTP == nil {
		return nil, errors.New("connect: the exchanger's HTTP client is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Exchanger{o: o, cl: client{HTTP: o.HTTP, Local: o.Local, Secrets: o.Secrets}, disc: &Discoverer{HTTP: o.HTTP, Local: o.Local, Now: o.Now}}, nil
}

// Token returns the token exchanged for sub toward srv (a server of tenant
// with auth: token_exchange) and the id of the exchange that gave it,
// from the cache when it holds one for the same sub. A caller without a
// token (sub.Token "") gets ErrNoSubject; an exchange that fails, an
// *ExchangeError (audited).
func (x *Exchanger) Token(ctx context.Context, tenant, caller string, sub Subject, srv *registry.Server) (access, id string, err error) {
	if sub.Token == "" {
		return "", "", ErrNoSubject
	}
	if srv.OAuth == nil {
		return "", "", fmt.Errorf("connect: server %s has no oauth client", srv.Name)
	}
	k := connKey{tenant, caller, srv.Name}
	bound := subjectHash(sub.Token, srv.URL)
	now := x.o.Now()
	if e, ok := x.cache.getBound(k, bound, now); ok {
		return e.access, e.connID, nil
	}
	rec := Connection{ID: random()[:22], Tenant: tenant, Caller: caller, Server: srv.Name}
	fail := func(err error) (string, string, error) {
		record(ctx, x.o.Audit, x.o.Logger, x.o.Now(), EventFailure, rec, "token exchange: "+err.Error())
		return "", "", &ExchangeError{Server: srv.Name, Err: err}
	}
	endpoint, resource, scopes := srv.OAuth.TokenEndpoint, srv.URL, srv.OAuth.Scopes
	rec.Issuer = endpoint
	if endpoint == "" {
		md, err := x.disc.Discover(ctx, srv.URL)
		if err != nil {
			return fail(err)
		}
		// The caller's token goes only to the issuer that signed it: a
		// server naming another authorization server must not collect
		// callers' tokens (they are good at this gateway).
		if md.Issuer != sub.Issuer {
			return fail(&DiscoveryError{"authorization server metadata", fmt.Errorf("the server names authorization server %q, not %q, the issuer of the caller's token", md.Issuer, sub.Issuer)})
		}
		endpoint, resource, rec.Issuer = md.TokenEndpoint, md.Resource, md.Issuer
		if scopes == nil {
			scopes = md.Scopes
		}
	}
	subjectType := TokenTypeAccessToken
	if srv.OAuth.SubjectTokenType == registry.SubjectJWT {
		subjectType = TokenTypeJWT
	}
	form := url.Values{
		"grant_type": {GrantTokenExchange}, "subject_token": {sub.Token}, "subject_token_type": {subjectType},
		"requested_token_type": {TokenTypeAccessToken}, "resource": {resource},
	}
	if srv.OAuth.Audience != "" {
		form.Set("audience", srv.OAuth.Audience)
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	cr, err := x.cl.configured(ctx, srv)
	if err != nil {
		return fail(err)
	}
	got, err := x.cl.tokenRequest(ctx, cr, endpoint, form)
	if err != nil {
		if srv.OAuth.TokenEndpoint == "" {
			x.disc.Forget(srv.URL)
		}
		return fail(err)
	}
	if got.issuedType != "" && got.issuedType != TokenTypeAccessToken {
		return fail(fmt.Errorf("the token service issued a %q, not an access token", oauthCode(got.issuedType)))
	}
	if subtleEqual(got.Access, sub.Token) {
		// A token service that hands the caller's token back would have
		// it passed through: refused.
		return fail(errors.New("the token service gave back the caller's own token"))
	}
	var expires time.Time
	if got.expiresIn > 0 {
		expires = now.Add(time.Duration(got.expiresIn) * time.Second)
	}
	rec.Scope, rec.Expires = got.scope, expires
	record(ctx, x.o.Audit, x.o.Logger, x.o.Now(), EventExchange, rec, "")
	x.cache.putBound(k, got.Access, rec.ID, bound, expires, now)
	return got.Access, rec.ID, nil
}

// Refused tells the exchanger the server answered 401 to the token of
// exchange id of (tenant, caller, server): it is dropped, so the next
// call exchanges again.
func (x *Exchanger) Refused(tenant, caller, server, id string) {
	k := connKey{tenant, caller, server}
	x.cache.mu.Lock()
	defer x.cache.mu.Unlock()
	if e, ok := x.cache.m[k]; ok && e.connID == id {
		x.cache.dropLocked(k)
	}
}

// subjectHash binds a cached exchanged token to the caller's token it was
// exchanged for and to the server URL it is for.
func subjectHash(token, serverURL string) string {
	s := sha256.Sum256([]byte("aegis-exchange\x00" + serverURL + "\x00" + token))
	return hex.EncodeToString(s[:])
}
