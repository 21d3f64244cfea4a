package connect

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/seal"
	"github.com/aegis-gw/aegis/shared/store"
)

// Secrets resolves a client secret reference (shared/credentials).
type Secrets interface {
	Resolve(ctx context.Context, ref string) (string, error)
}

// Options configure a Broker. Store, Keyring, Registry and PublicURL are
// required.
type Options struct {
	Store    Store
	Keyring  seal.Keyring
	Registry registry.Reader
	Secrets  Secrets // client_secret_ref; nil: public clients only
	// PublicURL is the gateway's URL as a browser reaches it
	// (https://gw.example.com): the links and the redirect URI
	// (PublicURL/t/TENANT/connect/callback) are built from it, never from
	// a request's Host.
	PublicURL string
	// HTTP calls the upstream (discovery's probe) and the authorization
	// servers; its dialer must apply netguard.Control. Local is aegis
	// serve's mode (http and loopback allowed).
	HTTP   *http.Client
	Local  bool
	Now    func() time.Time // nil: time.Now
	Logger *slog.Logger     // nil: slog.Default()
	// Audit, when set, gets a record of every event of a connection's
	// life (Event*): the connection's id, never a token.
	Audit audit.Writer
}

// The methods of a connection's audit records.
const (
	EventConnect = "connection.connect" // a person consented; the connection is stored
	EventRefresh = "connection.refresh" // its tokens were refreshed
	EventFailure = "connection.failure" // a callback, code exchange or refresh failed (detail: why)
	EventRevoke  = "connection.revoke"  // an operator or the caller revoked it
	// EventRegister: aegis registered a client of its own (RFC 7591) for
	// a server whose registry entry names none; the record's connection
	// is the client id.
	EventRegister = "connection.register"
)

// auditTimeout bounds writing one event's record.
const auditTimeout = 2 * time.Second

// Broker runs connections: it answers a call's need for a token, asks for
// a grant when there is none, and serves the link and the callback. Safe
// for concurrent use.
type Broker struct {
	o     Options
	cl    client
	disc  *Discoverer
	cache tokenCache
	// refreshing holds one lock per connection being refreshed: two
	// calls of one caller on one instance never send the same refresh
	// token twice (a provider that rotates them takes a reuse for theft
	// and revokes the grant). Across instances the versioned write
	// decides (refresh).
	mu         sync.Mutex
	refreshing map[connKey]*refreshLock
}

// refreshLock is one connection's refresh lock and how many calls hold or
// wait for it (under Broker.mu).
type refreshLock struct {
	sync.Mutex
	n int
}

// New returns a Broker; o is copied and defaults filled.
func New(o Options) (*Broker, error) {
	if o.Store == nil || o.Keyring == nil || o.Registry == nil || o.HTTP == nil {
		return nil, errors.New("connect: Store, Keyring, Registry and HTTP are required")
	}
	u, err := url.Parse(o.PublicURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(o.Local && u.Scheme == "http")) || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("connect: public URL %q: want https://HOST[/PATH] (http only under aegis serve)", o.PublicURL)
	}
	o.PublicURL = strings.TrimSuffix(o.PublicURL, "/")
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Broker{o: o, cl: client{HTTP: o.HTTP, Local: o.Local, Secrets: o.Secrets}, disc: &Discoverer{HTTP: o.HTTP, Local: o.Local, Now: o.Now}}, nil
}

// NeededError: the call needs a connection the caller does not have, or
// whose tokens no longer work (Broken). Nothing was sent upstream.
type NeededError struct {
	Server string
	Broken bool
}

func (e *NeededError) Error() string {
	if e.Broken {
		return "connection to " + e.Server + " is broken"
	}
	return "no connection to " + e.Server
}

// bind is what a connection's sealed tokens are bound to.
func bind(c Connection) seal.Bind {
	return seal.Bind{"tenant": c.Tenant, "caller": c.Caller, "server": c.Server, "connection": c.ID}
}

// Token returns the access token of caller's connection to srv (a server
// of tenant with auth: oauth) and the connection's id, from the cache
// when it holds it, refreshing it first when it expires within
// RefreshMargin. A caller without a working connection gets a
// *NeededError; a store or KMS failure is returned as it is (the call
// fails closed).
func (b *Broker) Token(ctx context.Context, tenant, caller string, srv *registry.Server) (access, connID string, err error) {
	k := connKey{tenant, caller, srv.Name}
	now := b.o.Now()
	if e, ok := b.cache.get(k, now); ok {
		return e.access, e.connID, nil
	}
	c, err := b.o.Store.Connection(ctx, tenant, caller, srv.Name)
	if errors.Is(err, store.ErrNotFound) {
		return "", "", &NeededError{Server: srv.Name}
	}
	if err != nil {
		return "", "", err
	}
	if c.Status != StatusActive {
		return "", "", &NeededError{Server: srv.Name, Broken: true}
	}
	tok, err := b.open(ctx, c)
	if err != nil {
		return "", "", err
	}
	if !c.Expires.IsZero() && !now.Before(c.Expires.Add(-RefreshMargin)) {
		unlock := b.lockRefresh(k)
		defer unlock()
		// Another call may have refreshed it while this one waited.
		if e, ok := b.cache.get(k, now); ok {
			return e.access, e.connID, nil
		}
		if cur, err := b.o.Store.Connection(ctx, tenant, caller, srv.Name); err == nil && cur.Version != c.Version {
			if cur.Status != StatusActive {
				return "", "", &NeededError{Server: srv.Name, Broken: true}
			}
			c = cur
			if tok, err = b.open(ctx, c); err != nil {
				return "", "", err
			}
		}
		if !now.Before(c.Expires.Add(-RefreshMargin)) {
			if c, tok, err = b.refresh(ctx, c, tok, srv); err != nil {
				return "", "", err
			}
		}
	}
	b.cache.put(k, tok.Access, c.ID, c.Expires, now)
	return tok.Access, c.ID, nil
}

// lockRefresh takes k's refresh lock; the returned func gives it back.
// Locks are kept while in use only, so the map holds at most one entry
// per connection being refreshed at this moment.
func (b *Broker) lockRefresh(k connKey) (unlock func()) {
	b.mu.Lock()
	if b.refreshing == nil {
		b.refreshing = map[connKey]*refreshLock{}
	}
	l := b.refreshing[k]
	if l == nil {
		l = &refreshLock{}
		b.refreshing[k] = l
	}
	l.n++
	b.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		b.mu.Lock()
		if l.n--; l.n == 0 {
			delete(b.refreshing, k)
		}
		b.mu.Unlock()
	}
}

func (b *Broker) open(ctx context.Context, c Connection) (Tokens, error) {
	var tok Tokens
	plain, err := seal.Open(ctx, b.o.Keyring, c.Sealed, bind(c))
	if err != nil {
		return tok, err
	}
	defer clear(plain)
	if err := json.Unmarshal(plain, &tok); err != nil || tok.Access == "" {
		return tok, fmt.Errorf("%w: no tokens in connection %s", seal.ErrOpen, c.ID)
	}
	return tok, nil
}

// refresh renews c's tokens at its issuer (grant_type refresh_token, the
// resource again), stores the new ones over c's version (a rotated refresh
// token replaces the old one), and returns them. Another instance that
// refreshed first wins: its tokens are read and used. A refresh that fails
// marks the connection broken and returns a *NeededError: the caller is
// asked again, and no other credential is ever tried.
func (b *Broker) refresh(ctx context.Context, c Connection, tok Tokens, srv *registry.Server) (Connection, Tokens, error) {
	fail := func(why string) (Connection, Tokens, error) {
		b.markBroken(ctx, c, why)
		return c, tok, &NeededError{Server: srv.Name, Broken: true}
	}
	if tok.Refresh == "" {
		return fail("the access token expired and there is no refresh token")
	}
	cr, err := b.creds(ctx, c.Tenant, srv, c.Issuer)
	if err != nil {
		return fail("refresh: " + err.Error())
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.Refresh}, "resource": {tok.Resource}}
	got, err := b.cl.tokenRequest(ctx, cr, tok.TokenEndpoint, form)
	if err != nil {
		return fail("refresh: " + err.Error())
	}
	if got.Refresh == "" {
		got.Refresh = tok.Refresh // not rotated
	}
	got.TokenEndpoint, got.RevocationEndpoint, got.Resource = tok.TokenEndpoint, tok.RevocationEndpoint, tok.Resource
	next, err := b.sealed(ctx, c, got, b.o.Now())
	if err != nil {
		return c, tok, err
	}
	if err := b.o.Store.PutConnection(ctx, next); errors.Is(err, store.ErrConflict) {
		// Refreshed (or revoked) elsewhere meanwhile: use what is stored.
		cur, err := b.o.Store.Connection(ctx, c.Tenant, c.Caller, c.Server)
		if err != nil || cur.Status != StatusActive {
			return c, tok, &NeededError{Server: srv.Name, Broken: true}
		}
		t, err := b.open(ctx, cur)
		return cur, t, err
	} else if err != nil {
		return c, tok, err
	}
	b.event(ctx, EventRefresh, next, "")
	return next, got.Tokens, nil
}

// sealed is c carrying tok (sealed), the next version, expiring per tok.
func (b *Broker) sealed(ctx context.Context, c Connection, tok tokenResponse, now time.Time) (Connection, error) {
	plain, err := json.Marshal(tok.Tokens)
	if err != nil {
		return c, err
	}
	defer clear(plain)
	next := c
	next.Version++
	next.Status, next.Updated, next.Scope = StatusActive, now.UTC(), tok.scope
	next.Expires = time.Time{}
	if tok.expiresIn > 0 {
		next.Expires = now.Add(time.Duration(tok.expiresIn) * time.Second).UTC()
	}
	if next.Sealed, err = seal.Seal(ctx, b.o.Keyring, plain, bind(next)); err != nil {
		return c, err
	}
	return next, nil
}

// markBroken records that c's tokens no longer work (one conditional
// write; losing it means someone else wrote the connection since).
func (b *Broker) markBroken(ctx context.Context, c Connection, why string) {
	b.cache.drop(connKey{c.Tenant, c.Caller, c.Server})
	next := c
	next.Version++
	next.Status, next.Updated = StatusBroken, b.o.Now().UTC()
	if err := b.o.Store.PutConnection(ctx, next); err != nil && !errors.Is(err, store.ErrConflict) {
		b.o.Logger.Warn("connection not marked broken", "tenant", c.Tenant, "server", c.Server, "connection", c.ID, "err", err)
	}
	b.event(ctx, EventFailure, c, why)
}

// Refused tells the broker the upstream answered 401 to the token of
// connection connID of (tenant, caller, server): it is marked broken, so
// the caller is asked to connect again.
func (b *Broker) Refused(ctx context.Context, tenant, caller, server, connID string) {
	b.cache.drop(connKey{tenant, caller, server})
	c, err := b.o.Store.Connection(ctx, tenant, caller, server)
	if err != nil || c.ID != connID || c.Status != StatusActive {
		return
	}
	b.markBroken(ctx, c, "the server refused the token (HTTP 401)")
}

// event records kind for c (record).
func (b *Broker) event(ctx context.Context, kind string, c Connection, detail string) {
	record(ctx, b.o.Audit, b.o.Logger, b.o.Now(), kind, c, detail)
}

// Ask starts an authorization of caller's connection to srv and returns
// the link the person opens (PublicURL/t/TENANT/connect/start?state=...)
// and an id for the elicitation (not the state). It discovers srv's
// authorization server (Discoverer) and stores a Pending authorization,
// with a fresh state and PKCE verifier, for PendingTTL.
func (b *Broker) Ask(ctx context.Context, tenant, caller string, srv *registry.Server) (link, elicitationID string, err error) {
	if srv.OAuth == nil {
		return "", "", fmt.Errorf("connect: server %s has no oauth client", srv.Name)
	}
	md, err := b.disc.Discover(ctx, srv.URL)
	if err != nil {
		return "", "", err
	}
	scopes := srv.OAuth.Scopes
	if scopes == nil {
		scopes = md.Scopes
	}
	clientID := srv.OAuth.ClientID
	if clientID == "" {
		cr, err := b.registered(ctx, tenant, caller, srv, md)
		if err != nil {
			return "", "", err
		}
		clientID = cr.id
	}
	p := Pending{
		State: random(), Tenant: tenant, Caller: caller, Server: srv.Name, Verifier: random(),
		Redirect: b.redirectURI(tenant), Resource: md.Resource, Scope: strings.Join(scopes, " "),
		Issuer: md.Issuer, AuthorizationEndpoint: md.AuthorizationEndpoint, TokenEndpoint: md.TokenEndpoint,
		RevocationEndpoint: md.RevocationEndpoint, ClientID: clientID, Expires: b.o.Now().Add(PendingTTL),
	}
	if err := b.o.Store.PutPending(ctx, p); err != nil {
		return "", "", err
	}
	return b.o.PublicURL + "/t/" + url.PathEscape(tenant) + "/connect/start?state=" + p.State, elicitationOf(p.State), nil
}

// elicitationOf is the id of the elicitation of the authorization with
// state: derived from it, and not revealing it.
func elicitationOf(state string) string {
	sum := sha256.Sum256([]byte("elicitation " + state))
	return hex.EncodeToString(sum[:16])
}

// creds is the client of srv's connections at issuer: the registry's, or
// the one aegis registered there (Registration) when the registry names
// none.
func (b *Broker) creds(ctx context.Context, tenant string, srv *registry.Server, issuer string) (creds, error) {
	if srv.OAuth.ClientID != "" {
		return b.cl.configured(ctx, srv)
	}
	r, err := b.o.Store.Registration(ctx, tenant, srv.Name, issuer)
	if err != nil {
		return creds{}, fmt.Errorf("the client registered at %s could not be read: %w", issuer, err)
	}
	return b.openRegistration(ctx, r)
}

func regBind(r Registration) seal.Bind {
	return seal.Bind{"tenant": r.Tenant, "server": r.Server, "issuer": r.Issuer, "client": r.ClientID}
}

func (b *Broker) openRegistration(ctx context.Context, r Registration) (creds, error) {
	if len(r.Sealed) == 0 {
		return creds{id: r.ClientID}, nil
	}
	plain, err := seal.Open(ctx, b.o.Keyring, r.Sealed, regBind(r))
	if err != nil {
		return creds{}, err
	}
	defer clear(plain)
	return creds{r.ClientID, string(plain)}, nil
}

// registered is the client aegis registered for srv of tenant at md's
// authorization server, registering one first (RFC 7591) when there is
// none: the registry names no client_id for srv. Its secret is stored
// sealed. Two instances registering at once both register; the first
// stored wins and the other's client is never used. Audited
// (EventRegister), with the caller whose call asked for it.
func (b *Broker) registered(ctx context.Context, tenant, caller string, srv *registry.Server, md Metadata) (creds, error) {
	r, err := b.o.Store.Registration(ctx, tenant, srv.Name, md.Issuer)
	if err == nil {
		return b.openRegistration(ctx, r)
	}
	if !errors.Is(err, store.ErrNotFound) {
		return creds{}, err
	}
	if md.RegistrationEndpoint == "" {
		return creds{}, &DiscoveryError{"authorization server metadata", errors.New("the registry names no client_id and the authorization server offers no registration_endpoint")}
	}
	cr, err := b.cl.register(ctx, md.RegistrationEndpoint, "aegis gateway (tenant "+tenant+", server "+srv.Name+")", b.redirectURI(tenant))
	if err != nil {
		record(ctx, b.o.Audit, b.o.Logger, b.o.Now(), EventFailure, Connection{Tenant: tenant, Caller: caller, Server: srv.Name, Issuer: md.Issuer}, "client registration: "+err.Error())
		return creds{}, &DiscoveryError{"client registration", err}
	}
	r = Registration{Tenant: tenant, Server: srv.Name, Issuer: md.Issuer, ClientID: cr.id, Created: b.o.Now().UTC()}
	if cr.secret != "" {
		if r.Sealed, err = seal.Seal(ctx, b.o.Keyring, []byte(cr.secret), regBind(r)); err != nil {
			return creds{}, err
		}
	}
	switch err := b.o.Store.PutRegistration(ctx, r); {
	case errors.Is(err, store.ErrConflict):
		won, err := b.o.Store.Registration(ctx, tenant, srv.Name, md.Issuer)
		if err != nil {
			return creds{}, err
		}
		return b.openRegistration(ctx, won)
	case err != nil:
		return creds{}, err
	}
	record(ctx, b.o.Audit, b.o.Logger, b.o.Now(), EventRegister, Connection{ID: cr.id, Tenant: tenant, Caller: caller, Server: srv.Name, Issuer: md.Issuer}, "")
	return cr, nil
}

func (b *Broker) redirectURI(tenant string) string {
	return b.o.PublicURL + "/t/" + url.PathEscape(tenant) + "/connect/callback"
}

// random is 256 random bits, base64url without padding.
func random() string {
	var r [32]byte
	_, _ = rand.Read(r[:])
	return base64.RawURLEncoding.EncodeToString(r[:])
}

// challenge is the PKCE S256 challenge of verifier.
func challenge(verifier string) string {
	s := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(s[:])
}

func cookieHash(v string) string {
	s := sha256.Sum256([]byte("aegis-connect " + v))
	return hex.EncodeToString(s[:])
}

// cookieName is the cookie of one authorization (several may be open in
// one browser).
func cookieName(state string) string {
	if len(state) > 16 {
		state = state[:16]
	}
	return "aegis_connect_" + state
}

// Completed is a connection a person just made at the callback, and the
// id of the elicitation that asked for it (Ask), so that the gateway can
// tell the session that was asked (notifications/elicitation/complete).
type Completed struct {
	Tenant, Caller, Server, ElicitationID string
}

// ServeConnect serves /t/{tenant}/connect/start and /connect/callback (the
// gateway passes requests whose path, after the tenant, starts with
// /connect/). Errors are plain pages that name no secret. done is the
// connection the callback stored; nil for anything else.
func (b *Broker) ServeConnect(w http.ResponseWriter, r *http.Request, tenant, path string) (done *Completed) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		page(w, http.StatusMethodNotAllowed, "Use GET.")
		return nil
	}
	switch path {
	case "/connect/start":
		b.start(w, r, tenant)
	case "/connect/callback":
		return b.callback(w, r, tenant)
	default:
		page(w, http.StatusNotFound, "Not found.")
	}
	return nil
}

// start opens the link once: it binds the authorization to this browser
// with a cookie and redirects to the authorization server.
func (b *Broker) start(w http.ResponseWriter, r *http.Request, tenant string) {
	state := r.URL.Query().Get("state")
	if state == "" || len(state) > 128 {
		page(w, http.StatusBadRequest, "This link is not valid.")
		return
	}
	cookie := random()
	p, err := b.o.Store.OpenPending(r.Context(), tenant, state, cookieHash(cookie), b.o.Now())
	switch {
	case errors.Is(err, store.ErrConflict):
		page(w, http.StatusGone, "This link was used already. Send the call again to get a new one.")
		return
	case errors.Is(err, store.ErrNotFound):
		// A link whose authorization was completed is gone from the store
		// like one that expired or never was: the page names all three.
		page(w, http.StatusGone, "This link was used already, has expired, or is not valid. Send the call again to get a new one.")
		return
	case err != nil:
		b.o.Logger.Warn("connect: link not opened", "tenant", tenant, "err", err)
		page(w, http.StatusServiceUnavailable, "The gateway could not open this link now. Try it again in a moment.")
		return
	}
	srv, err := b.server(r.Context(), tenant, p.Server)
	if err != nil {
		page(w, http.StatusGone, "This server no longer asks for a connection.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName(state), Value: cookie, Path: "/t/" + tenant + "/connect/",
		MaxAge: int(PendingTTL.Seconds()), HttpOnly: true, Secure: strings.HasPrefix(b.o.PublicURL, "https:"), SameSite: http.SameSiteLaxMode})
	q := url.Values{
		"response_type": {"code"}, "client_id": {cmp.Or(p.ClientID, srv.OAuth.ClientID)}, "redirect_uri": {p.Redirect},
		"state": {p.State}, "code_challenge": {challenge(p.Verifier)}, "code_challenge_method": {"S256"},
		"resource": {p.Resource},
	}
	if p.Scope != "" {
		q.Set("scope", p.Scope)
	}
	sep := "?"
	if strings.Contains(p.AuthorizationEndpoint, "?") {
		sep = "&"
	}
	http.Redirect(w, r, p.AuthorizationEndpoint+sep+q.Encode(), http.StatusFound)
}

// callback takes the authorization once, checks the browser is the one
// that opened the link, exchanges the code (PKCE verifier, the exact
// redirect URI, the resource) and stores the connection, which it
// returns (nil when none was stored).
func (b *Broker) callback(w http.ResponseWriter, r *http.Request, tenant string) *Completed {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" || len(state) > 128 {
		page(w, http.StatusBadRequest, "This answer of the authorization server is not valid.")
		return nil
	}
	p, err := b.o.Store.TakePending(r.Context(), tenant, state, b.o.Now())
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			b.o.Logger.Warn("connect: callback not taken", "tenant", tenant, "err", err)
		}
		page(w, http.StatusGone, "This authorization is unknown, expired or used already. Send the call again to get a new link.")
		return nil
	}
	ck, err := r.Cookie(cookieName(state))
	if err != nil || p.Browser == "" || subtle.ConstantTimeCompare([]byte(cookieHash(ck.Value)), []byte(p.Browser)) != 1 {
		b.event(r.Context(), EventFailure, Connection{Tenant: tenant, Caller: p.Caller, Server: p.Server}, "callback from another browser than the one that opened the link")
		page(w, http.StatusForbidden, "This authorization was started in another browser. Send the call again to get a new link, and open it here.")
		return nil
	}
	http.SetCookie(w, &http.Cookie{Name: ck.Name, Value: "", Path: "/t/" + tenant + "/connect/", MaxAge: -1, HttpOnly: true})
	if iss := q.Get("iss"); iss != "" && iss != p.Issuer { // RFC 9207
		page(w, http.StatusBadRequest, "The answer came from another authorization server than the one asked.")
		return nil
	}
	if e := q.Get("error"); e != "" {
		b.event(r.Context(), EventFailure, Connection{Tenant: tenant, Caller: p.Caller, Server: p.Server}, "authorization refused: "+oauthCode(e))
		page(w, http.StatusOK, "The authorization was not given ("+oauthCode(e)+"). Nothing was connected.")
		return nil
	}
	code := q.Get("code")
	srv, err := b.server(r.Context(), tenant, p.Server)
	if code == "" || err != nil {
		page(w, http.StatusBadRequest, "This answer of the authorization server carries no code.")
		return nil
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {p.Redirect},
		"code_verifier": {p.Verifier}, "resource": {p.Resource}}
	cr, err := b.creds(r.Context(), tenant, srv, p.Issuer)
	var tok tokenResponse
	if err == nil {
		tok, err = b.cl.tokenRequest(r.Context(), cr, p.TokenEndpoint, form)
	}
	if err != nil {
		b.event(r.Context(), EventFailure, Connection{Tenant: tenant, Caller: p.Caller, Server: p.Server}, "code exchange: "+err.Error())
		page(w, http.StatusBadGateway, "The authorization server did not give a token. Send the call again to get a new link.")
		return nil
	}
	tok.TokenEndpoint, tok.RevocationEndpoint, tok.Resource = p.TokenEndpoint, p.RevocationEndpoint, p.Resource
	now := b.o.Now()
	c := Connection{ID: random()[:22], Tenant: tenant, Caller: p.Caller, Server: p.Server, Issuer: p.Issuer, Created: now.UTC()}
	if old, err := b.o.Store.Connection(r.Context(), tenant, p.Caller, p.Server); err == nil {
		c.Version, c.Created = old.Version, old.Created
	}
	next, err := b.sealed(r.Context(), c, tok, now)
	if err == nil {
		err = b.o.Store.PutConnection(r.Context(), next)
	}
	if err != nil {
		b.o.Logger.Warn("connect: connection not stored", "tenant", tenant, "server", p.Server, "err", err)
		page(w, http.StatusServiceUnavailable, "The connection could not be stored. Send the call again to get a new link.")
		return nil
	}
	b.cache.drop(connKey{tenant, p.Caller, p.Server})
	b.event(r.Context(), EventConnect, next, "")
	page(w, http.StatusOK, "Connected to "+p.Server+". Go back to your agent and send the call again.")
	return &Completed{Tenant: tenant, Caller: p.Caller, Server: p.Server, ElicitationID: elicitationOf(p.State)}
}

func (b *Broker) server(ctx context.Context, tenant, name string) (*registry.Server, error) {
	ss, err := b.o.Registry.Servers(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for i := range ss {
		if ss[i].Name == name && ss[i].NeedsConnection() && ss[i].OAuth != nil {
			return &ss[i], nil
		}
	}
	return nil, store.ErrNotFound
}

// Revoke ends the tenant's connection id: its refresh token (else its
// access token) is revoked at the issuer's revocation endpoint when it
// has one (RFC 7009), then the connection is deleted and audited
// (connection.revoke). atProvider says whether the provider accepted the
// revocation; the connection is deleted either way. store.ErrNotFound
// when the tenant has no such connection.
func (b *Broker) Revoke(ctx context.Context, tenant, id string) (c Connection, atProvider bool, err error) {
	cs, err := b.o.Store.Connections(ctx, tenant)
	if err != nil {
		return c, false, err
	}
	found := false
	for _, x := range cs {
		if x.ID == id {
			c, found = x, true
		}
	}
	if !found {
		return c, false, store.ErrNotFound
	}
	why := "no revocation endpoint"
	if tok, err := b.open(ctx, c); err != nil {
		why = "tokens unreadable"
	} else if srv, err := b.server(ctx, tenant, c.Server); err == nil && tok.RevocationEndpoint != "" {
		why = "the provider refused"
		form := url.Values{"token": {tok.Access}, "token_type_hint": {"access_token"}}
		if tok.Refresh != "" {
			form = url.Values{"token": {tok.Refresh}, "token_type_hint": {"refresh_token"}}
		}
		if cr, err := b.creds(ctx, tenant, srv, c.Issuer); err == nil {
			if err := netguard.ValidateFetchURL(tok.RevocationEndpoint, b.o.Local); err == nil {
				if st, _, err := b.cl.post(ctx, cr, tok.RevocationEndpoint, form); err == nil && st == http.StatusOK {
					atProvider = true
				}
			}
		}
	}
	if err := b.o.Store.DeleteConnection(ctx, tenant, c.Caller, c.Server); err != nil && !errors.Is(err, store.ErrNotFound) {
		return c, atProvider, err
	}
	b.cache.drop(connKey{tenant, c.Caller, c.Server})
	detail := "revoked at the provider"
	if !atProvider {
		detail = "deleted; not revoked at the provider (" + why + ")"
	}
	b.event(ctx, EventRevoke, c, detail)
	return c, atProvider, nil
}

// oauthCode is an OAuth error code fit to show: the RFC 6749 character
// set, at most 64 characters; anything else is "(unreadable)".
func oauthCode(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > 64 {
		return "(unreadable)"
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' {
			return "(unreadable)"
		}
	}
	return s
}

// page writes a small HTML page with text (escaped).
func page(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(status)
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
	_, _ = io.WriteString(w, "<!doctype html><meta charset=utf-8><title>aegis</title><p>"+r.Replace(text)+"</p>\n")
}
