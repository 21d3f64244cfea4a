// Package gateway is aegis's one http.Handler: POST /v1/invoke, and MCP
// Streamable HTTP on /mcp (all of a tenant's servers) and /mcp/{server}.
// The same handler runs under `aegis serve` and, through shared/apigw, on
// Lambda. Everything it needs comes in through Options.
package gateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/content"
	"github.com/aegis-gw/aegis/shared/correlation"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/oauth"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
	"github.com/aegis-gw/aegis/shared/telemetry"
	"github.com/aegis-gw/aegis/shared/tenantview"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// Options configure a Gateway besides its backend. The zero value (or nil)
// is valid: defaults are filled in by New.
type Options struct {
	Settings config.Settings
	Tiers    quota.Tiers      // monthly limits per tier; nil: quota.DefaultTiers()
	Logger   *slog.Logger     // nil: slog.Default()
	Now      func() time.Time // nil: time.Now
	HTTP     *http.Client     // nil: NewHTTPClient(Settings.LocalMode)
	// Credentials resolves brokered credentials; nil: a server with a
	// credential cannot be called (its calls fail, naming the kind).
	Credentials upstream.Credentials
	CatalogTTL  time.Duration // 0: one minute
	Version     string        // "": "dev"
	// RegistryCacheTTL > 0 caches registry reads per process (keys, tenants,
	// servers) and serves the last known state for a minute past it when the
	// store is down. The Lambda functions use it; 0 reads through.
	RegistryCacheTTL time.Duration
	Notifier         approval.Notifier // nil: nobody is told of held calls
	// Tracer traces requests, checks and upstream calls; nil: no spans
	// (telemetry.FromEnv builds it). DynamoDB spans come from the client's
	// middleware (dynamo.WithMiddleware(tracer.AddAWSMiddleware)).
	Tracer  *telemetry.Tracer
	Metrics Metrics // nil: no metrics
	// ParamsKey keys every params_hash the gateway writes (audit records,
	// approvals); the zero key: the store's current key, generated and
	// stored on first start (audit.LoadParamsKey). See
	// docs/design/params-hash.md.
	ParamsKey audit.ParamsKey
	// StoreMargin is what the store work of one request may add to
	// UPSTREAM_TIMEOUT_SECS in the request's deadline (see ServeHTTP);
	// 0: DefaultStoreMargin.
	StoreMargin time.Duration
	// ListenTimeout is how long a stream of notifications outside any
	// request is held: a GET on /mcp, or a 2026-07-28
	// subscriptions/listen (which then ends gracefully); 0:
	// ListenTimeout. Clients open another.
	ListenTimeout time.Duration
	// Connections runs callers' own OAuth grants to servers with auth:
	// oauth (shared/connect) and serves /t/{tenant}/connect/; nil: such
	// servers cannot be called (-32000 says why).
	Connections *connect.Broker
	// KeepAlive is how often such a stream gets an SSE comment while it
	// is quiet, so that proxies (an ALB's or nginx's 60 s idle timeout)
	// do not cut it; 0: DefaultKeepAlive.
	KeepAlive time.Duration
}

// DefaultKeepAlive is Options.KeepAlive's default.
const DefaultKeepAlive = 25 * time.Second

// Deadlines of a request (docs/upstream.md, "Deadlines"). A request's
// deadline is UPSTREAM_TIMEOUT_SECS + StoreMargin from its arrival: the
// checks' store work, the upstream exchange and the answer's checks all
// end by then, whatever the client does. The writes once the upstream has
// answered (the upstream session, the idempotency ledger, the audit
// record) share SettleTimeout more, on a context the client's leaving does
// not cancel; the releases of what the checks took (Call.Finish) run
// alongside the audit write, each store operation within the store's own
// deadline (dynamo.Options.OpTimeout). With the defaults a request takes
// at most UPSTREAM_TIMEOUT_SECS + 5 s, the Lambda function's timeout
// (docs/design/lambda.md: 5 s for the store before and after the call).
const (
	// DefaultStoreMargin is Options.StoreMargin's default: the checks'
	// store waves before the upstream call (each DynamoDB operation has
	// its own 2 s budget, dynamo.DefaultOpTimeout) and the set-up of a
	// cold tool catalog. When the store takes more, the upstream gets what
	// is left of the deadline, never more; a call whose deadline passed
	// before it was sent is not sent.
	DefaultStoreMargin = 3 * time.Second
	// SettleTimeout bounds the writes after the upstream's answer,
	// together.
	SettleTimeout = 2 * time.Second
)

// paramsKeyTimeout bounds reading (or first storing) the params key at
// start.
const paramsKeyTimeout = 5 * time.Second

// errRequestDeadline is the cause of a request's context when its deadline
// passed (context.Cause); a client that left cancels it instead.
var errRequestDeadline = errors.New("gateway: request deadline passed")

// Metrics is told of every audited tools/call and of every tools/call sent
// upstream (shared/telemetry's EMF writer and shared/metrics' Prometheus
// registry implement it). Neither method may block.
type Metrics interface {
	RecordCall(rec audit.Record)
	// UpstreamCall is told that a call to tenant's server is being sent;
	// done is called once its exchange has ended, with how
	// (telemetry.UpstreamOutcome: answered, upstream_error, timeout,
	// failed).
	UpstreamCall(tenant, server string) (done func(outcome string))
}

// Gateway serves the invoke path. It is safe for concurrent use.
type Gateway struct {
	o      Options
	b      backend.Backend
	reg    registry.Reader   // b, or a per-process cache over it (view)
	view   *tenantview.Cache // nil without Options.RegistryCacheTTL (view.go)
	stops  *killswitch.Check // the kill-switch check, a part of view
	auth   *auth.Authenticator
	tokens *oauth.Validator // the tenants' issuers' JWTs (authn.go)
	cat    *route.Catalog   // tools
	cats   route.Catalogs   // tools, prompts, resources, templates
	up     *upstream.Client
	ledger *idempotency.Ledger
	pipe   *pipeline.Pipeline
	key    audit.ParamsKey // Options.ParamsKey, or the store's
	// content holds the two sides of the content checks (stages.go).
	content struct {
		check   *content.Check
		results *content.Results
	}
	streams streamSlots  // the open GET and subscriptions/listen streams (streams.go)
	elicits elicitations // the URL elicitations given and the GET streams to tell of their completion (elicit.go)
	// closing is done once CloseStreams is called (streams.go).
	closing      context.Context
	closeStreams context.CancelFunc

	// exchanger gives servers with auth: token_exchange the token
	// exchanged for the caller's own (connect.go).
	exchanger *connect.Exchanger
}

// New returns the gateway over b, with its checks built from the stage
// table (stages.go). o is copied and defaults filled; nil is the zero
// Options.
func New(b backend.Backend, o *Options) (*Gateway, error) {
	if b == nil {
		return nil, errors.New("gateway: no backend")
	}
	g := &Gateway{b: b}
	g.closing, g.closeStreams = context.WithCancel(context.Background())
	if o != nil {
		g.o = *o
	}
	if g.o.Logger == nil {
		g.o.Logger = slog.Default()
	}
	if g.o.Now == nil {
		g.o.Now = time.Now
	}
	if g.o.Version == "" {
		g.o.Version = "dev"
	}
	if g.o.HTTP == nil {
		g.o.HTTP = NewHTTPClient(g.o.Settings.LocalMode)
	}
	if g.o.CatalogTTL == 0 {
		g.o.CatalogTTL = time.Minute
	}
	if g.o.Tiers == nil {
		g.o.Tiers = quota.DefaultTiers()
	}
	if g.o.StoreMargin <= 0 {
		g.o.StoreMargin = DefaultStoreMargin
	}
	g.key = g.o.ParamsKey
	if g.key.IsZero() {
		ctx, cancel := context.WithTimeout(context.Background(), paramsKeyTimeout)
		k, err := audit.LoadParamsKey(ctx, b, g.o.Now())
		cancel()
		if err != nil {
			return nil, fmt.Errorf("gateway: reading the params key from the store: %w", err)
		}
		g.key = k
	}
	s := g.o.Settings
	g.reg = b
	pins := registry.PinStore(b)
	if g.o.RegistryCacheTTL > 0 {
		g.view = tenantview.NewCache(b, tenantview.Options{TTL: g.o.RegistryCacheTTL, MaxStale: time.Minute, Now: g.o.Now})
		g.reg, pins = g.view, g.view
	}
	g.stops = killswitch.New(b, s.KillSwitchRefresh, g.o.Now, g.o.Logger)
	g.auth = auth.NewAuthenticator(g.reg, s.Served)
	g.tokens = oauth.New(&oauth.Options{HTTP: g.o.HTTP, Local: s.LocalMode, Now: g.o.Now, Logger: g.o.Logger})
	var secrets connect.Secrets // a nil Credentials stays a nil interface
	if g.o.Credentials != nil {
		secrets = g.o.Credentials
	}
	exchanger, xerr := connect.NewExchanger(connect.ExchangeOptions{HTTP: g.o.HTTP, Local: s.LocalMode, Secrets: secrets, Now: g.o.Now, Logger: g.o.Logger, Audit: b})
	if xerr != nil {
		return nil, xerr
	}
	g.exchanger = exchanger
	g.up = &upstream.Client{HTTP: g.o.HTTP, Timeout: s.UpstreamTimeout, MaxRetries: s.UpstreamMaxRetries, Creds: g.o.Credentials}
	g.cat = route.NewCatalog(g.reg, toolLister(g.up), g.o.CatalogTTL, g.o.Now)
	g.cats = route.Catalogs{
		Tools:     g.cat,
		Prompts:   route.NewCatalog(g.reg, promptLister(g.up), g.o.CatalogTTL, g.o.Now),
		Resources: route.NewCatalog(g.reg, resourceLister(g.up), g.o.CatalogTTL, g.o.Now),
		Templates: route.NewCatalog(g.reg, templateLister(g.up), g.o.CatalogTTL, g.o.Now),
	}
	g.ledger = idempotency.New(idempotency.Options{Store: b, LeaseTTL: 5*s.UpstreamTimeout + 10*time.Second, Now: g.o.Now})
	var err error
	if g.content.check, g.content.results, err = content.New(content.Options{Defaults: s.Content(), Logger: g.o.Logger, Pins: pins, Catalog: g.cat, Now: g.o.Now}); err != nil {
		return nil, err
	}
	if g.view != nil {
		g.view.AddPart(stopsPart{g.stops})
		g.view.AddPart(pinsPart{g.content.check})
	}
	if g.pipe, err = g.buildPipeline(); err != nil {
		return nil, err
	}
	return g, nil
}

// Connections returns the broker of callers' connections
// (Options.Connections; nil when the gateway makes none), for the admin
// API's revocation.
func (g *Gateway) Connections() *connect.Broker { return g.o.Connections }

// Catalog returns the tool catalog the gateway routes calls with, for the
// admin API's kill switch (admin.Options.Catalog): a stop is resolved with
// the same names a call is.
func (g *Gateway) Catalog() *route.Catalog { return g.cat }

// Catalogs returns every catalog the gateway lists and routes with
// (tools, prompts, resources, templates), for the admin API's pins review
// (admin.ListingsOf).
func (g *Gateway) Catalogs() route.Catalogs { return g.cats }

// ServeHTTP implements http.Handler. Every request has a deadline,
// UPSTREAM_TIMEOUT_SECS + Options.StoreMargin from its arrival (see
// DefaultStoreMargin); its context is also cancelled when the client
// leaves, which stops the checks' store work but never a call already
// sent upstream (toolsCall).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	corr := correlation.ID(r.Header.Get("Traceparent"))
	w.Header().Set(correlation.Header, corr)
	path := r.URL.Path
	timeout := g.o.Settings.UpstreamTimeout + g.o.StoreMargin
	switch {
	case r.Method == http.MethodGet:
		timeout = g.listenTimeout() // a GET on /mcp is a stream (listen)
	case r.Method == http.MethodPost && upstream.IsModern(r.Header.Get("Mcp-Protocol-Version")) && r.Header.Get("Mcp-Method") == "subscriptions/listen":
		// A stream too; mcpHeaders refuses a body whose method is another
		// (-32020), so the header cannot buy a call a longer deadline.
		timeout = g.listenTimeout() + g.o.StoreMargin
	}
	ctx, cancel := context.WithTimeoutCause(r.Context(), timeout, errRequestDeadline)
	defer cancel()
	ctx = telemetry.WithCorrelationID(ctx, corr)
	if g.o.Tracer != nil {
		var span trace.Span
		ctx, span = g.o.Tracer.StartRequest(ctx, r, telemetry.RouteName(r.Method, path), corr)
		defer span.End()
	}
	r = r.WithContext(ctx)
	if path == WellKnownResource || strings.HasPrefix(path, WellKnownResource+"/") {
		g.resourceMetadata(w, r, corr)
		return
	}
	if authorizationServerPath(path) {
		writeJSON(w, http.StatusNotFound, notAuthorizationServer)
		return
	}
	tenant, path, ok := splitTenant(path)
	if !ok {
		writeJSON(w, http.StatusNotFound, `{"error":"not found"}`)
		return
	}
	if strings.HasPrefix(path, "/connect/") && tenant != "" && g.o.Connections != nil {
		if done := g.o.Connections.ServeConnect(w, r, tenant, path); done != nil {
			g.elicits.complete(done, g.o.Now())
		}
		return
	}
	var ep endpoint
	switch {
	case path == "/v1/invoke":
		ep = endpoint{invoke: true}
	case path == "/mcp" || path == "/mcp/":
		ep = endpoint{mcp: true}
	case strings.HasPrefix(path, "/mcp/") && !strings.Contains(path[5:], "/"):
		ep = endpoint{mcp: true, server: path[5:]}
	default:
		writeJSON(w, http.StatusNotFound, `{"error":"not found"}`)
		return
	}
	ep.tenant = tenant
	if !g.originAllowed(r.Header.Get("Origin")) {
		writeJSON(w, http.StatusForbidden, `{"error":"forbidden: origin not allowed"}`)
		return
	}
	switch {
	case r.Method == http.MethodPost:
		g.post(w, r, ep, corr)
	case r.Method == http.MethodGet && ep.mcp && g.canStream(w):
		g.listen(w, r, ep, corr)
	case r.Method == http.MethodDelete && ep.mcp:
		g.deleteSession(w, r, ep, corr)
	default:
		w.Header().Set("Allow", allow(ep))
		writeJSON(w, http.StatusMethodNotAllowed, `{"error":"method not allowed"}`)
	}
}

type endpoint struct {
	invoke, mcp bool
	tenant      string  // /t/{tenant}/...: "" on the paths without one (authn.go)
	server      string  // /mcp/{server}
	out         *stream // the answer on /mcp, which may become an event stream; nil on /v1/invoke
}

func allow(ep endpoint) string {
	if ep.mcp {
		return "POST, DELETE"
	}
	return "POST"
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func writeFrame(w http.ResponseWriter, status int, frame []byte) {
	w.Header()["Content-Type"] = upstream.ContentTypeJSON
	w.WriteHeader(status)
	_, _ = w.Write(frame)
}

// writeRefusal answers c with r, in the tenant's chosen shape for
// tools/call and in the numbering of the protocol c speaks; a connection's
// URL elicitation goes to an MCP 2026-07-28 client as an input-required
// result (refusal.InputRequired: that version forbids -32042).
func writeRefusal(w http.ResponseWriter, c *pipeline.Call, r *refusal.Refusal, shape string) {
	retryAfter(w, r)
	r = named(c, r)
	n := numbering(c)
	if res, ok := r.InputRequired(); ok && c.Stateless {
		writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, res))
		return
	}
	if shape == registry.ShapeResult && c.Method == "tools/call" && r.Code != refusal.CodeInternal && r.Code != refusal.CodeURLElicitation {
		writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, refusalResult(r, n)))
		return
	}
	writeFrame(w, r.HTTPStatus(), refusal.Frame(c.ID, r, refusal.LayerGateway, n))
}

// objectWords are the refusals whose checks word them without the call's
// object (they decide on a call's content or its caller, not on a tool by
// name); named adds it.
var objectWords = map[refusal.Word]bool{
	refusal.PolicyDenied: true, refusal.CapabilityDenied: true, refusal.PromptInjection: true,
	refusal.ToolPoisoning: true, refusal.SensitiveData: true, refusal.EgressBlocked: true,
	refusal.UpstreamUnavailable: true,
}

// named is r with the object of c's call after its message's first clause
// ("Denied by policy, calling transfer on bank"), so that a client that shows only
// error.message still says what was refused: for the words of
// objectWords, when c names a server and the message does not name the
// object yet. r itself is not changed (a refusal may be shared).
func named(c *pipeline.Call, r *refusal.Refusal) *refusal.Refusal {
	if c == nil || c.Server == nil || !objectWords[r.Word] {
		return r
	}
	obj := callObject(c)
	if strings.Contains(r.Message, obj) {
		return r
	}
	n := *r
	head, rest, _ := strings.Cut(r.Message, ";")
	n.Message = head + ", calling " + obj
	if rest != "" {
		n.Message += ";" + rest
	}
	return &n
}

// numbering is the numbering of refusal codes for the client of c: MCP
// 2026-07-28's for a request of that version (stateless, its version in
// every request), seed 004's for every other (/v1/invoke, and /mcp
// sessions of 2025-11-25 and earlier).
func numbering(c *pipeline.Call) refusal.Numbering {
	if c.Stateless {
		return refusal.MCP20260728
	}
	return refusal.Seed
}

// requestNumbering is numbering for a request not yet decoded into a
// call: by its MCP-Protocol-Version header on /mcp.
func requestNumbering(r *http.Request, ep endpoint) refusal.Numbering {
	if ep.mcp && upstream.IsModern(r.Header.Get("Mcp-Protocol-Version")) {
		return refusal.MCP20260728
	}
	return refusal.Seed
}

// retryAfter sets the Retry-After header of a -32004 answer (seed 004):
// data.retry_after_ms in whole seconds, rounded up, at least 1. The HTTP
// status stays 200.
func retryAfter(w http.ResponseWriter, r *refusal.Refusal) {
	if secs, ok := r.RetryAfterSecs(); ok {
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
}

// refusalResult is a refusal as a CallToolResult with isError (seed 002),
// the same code, word and data in structuredContent.
func refusalResult(r *refusal.Refusal, n refusal.Numbering) json.RawMessage {
	obj := r.ObjectIn(refusal.LayerGateway, n)
	b, _ := json.Marshal(map[string]any{
		"content":           []map[string]string{{"type": "text", "text": obj.Message}},
		"isError":           true,
		"structuredContent": map[string]any{"code": obj.Code, "message": obj.Message, "data": obj.Data},
	})
	return b
}

// originAllowed implements the Streamable HTTP transport's Origin check: no
// Origin (non-browser clients) is fine; a browser origin must be listed in
// ALLOWED_ORIGINS, or be a loopback origin under `aegis serve`.
func (g *Gateway) originAllowed(origin string) bool {
	if origin == "" {
		return true
	}
	for _, o := range g.o.Settings.AllowedOrigins {
		if o == origin {
			return true
		}
	}
	if g.o.Settings.LocalMode {
		for _, p := range []string{"http://localhost", "http://127.0.0.1", "http://[::1]"} {
			if rest, ok := strings.CutPrefix(origin, p); ok && (rest == "" || (rest[0] == ':' && len(rest) > 1 && isDigits(rest[1:]))) {
				return true
			}
		}
	}
	return false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// exactBodyBytes is the largest announced body readBody allocates before
// it has arrived.
const exactBodyBytes = 16 << 10

// readBody reads at most max bytes; status is 413 over the limit, 400 when
// the body could not be read.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, int) {
	if n := r.ContentLength; n > 0 && n <= min(max, exactBodyBytes) {
		// The usual case: a small body of known length, read into one
		// buffer of its size (io.ReadAll grows one from 512 bytes);
		// net/http ends the body at that length. A larger one is read as
		// it arrives, so that a client that announces a large body and
		// sends it slowly does not hold that much memory up front.
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, http.StatusBadRequest
		}
		return b, 0
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, http.StatusRequestEntityTooLarge
	case err != nil:
		return nil, http.StatusBadRequest
	}
	return b, 0
}

// post serves one JSON-RPC message in the order of design §2.2.
func (g *Gateway) post(w http.ResponseWriter, r *http.Request, ep endpoint, corr string) {
	ctx := r.Context()
	body, status := readBody(w, r, g.o.Settings.MaxBodyBytes)
	switch status {
	case http.StatusRequestEntityTooLarge:
		ref := refusal.New(refusal.InvalidRequest, "Invalid request: body exceeds the size limit")
		writeFrame(w, status, refusal.Frame(jsonrpc.Null, ref, refusal.LayerGateway, requestNumbering(r, ep)))
		return
	case http.StatusBadRequest:
		ref := refusal.New(refusal.ParseError, "Parse error: body could not be read")
		writeFrame(w, status, refusal.Frame(jsonrpc.Null, ref, refusal.LayerGateway, requestNumbering(r, ep)))
		return
	}
	req, derr := jsonrpc.Decode(body)
	if derr != nil && derr.Err.Code == jsonrpc.CodeParseError {
		writeFrame(w, http.StatusBadRequest, refusal.Frame(jsonrpc.Null, refusal.Decode(derr), refusal.LayerGateway, requestNumbering(r, ep)))
		return
	}
	who, tenant, err := g.authenticate(ctx, r, ep)
	if err != nil {
		g.refuseAuth(w, r, ep, corr, err)
		return
	}
	ctx = withSubject(ctx, who)
	key := who.key
	note := telemetry.NoteOf(ctx) // the access log's (nil without one)
	note.Tenant(tenant.ID)
	if derr != nil {
		if resp, ok := jsonrpc.DecodeResponse(body); ok && ep.mcp && jsonrpc.Member(body, "method") == nil {
			g.clientAnswer(ctx, w, r, ep, key, tenant, corr, body, resp)
			return
		}
		writeFrame(w, http.StatusOK, refusal.Frame(derr.ID, refusal.Decode(derr), refusal.LayerGateway, requestNumbering(r, ep)))
		return
	}
	note.Method(req.Method)
	var modern bool
	if ep.mcp {
		var ok bool
		if modern, ok = g.mcpHeaders(w, r, req); !ok {
			return
		}
	}
	if ep.mcp {
		ep.out = newStream(w)
	}
	c := &pipeline.Call{
		Tenant:          tenant,
		Caller:          key.Caller,
		KeyID:           key.ID,
		Roles:           rolesOf(key),
		KeyManifest:     key.Manifest,
		CorrelationID:   corr,
		Method:          req.Method,
		ID:              req.ID,
		Params:          req.Params,
		Start:           g.o.Now(),
		RequestedServer: ep.server,
		IdempotencyKey:  r.Header.Get("Idempotency-Key"),
		PolicyHash:      audit.PolicyHashNone,
		Inline:          g.b.InProcess(),
		MCP:             ep.mcp,
	}
	if who.token {
		c.Roles, c.Claims = who.roles, who.claims
	}
	if req.IsNotification() {
		g.clientNotification(ctx, w, r, c)
		return
	}
	if ep.out != nil {
		w = ep.out
	}
	switch {
	case modern:
		// Stateless: no gateway session. The client's capabilities come
		// with the request; kept as the set the gateway relays
		// (upstream.Caps), which routing and the upstream see.
		c.Stateless = true
		caps := upstream.ParseCaps(jsonrpc.Member(jsonrpc.Member(req.Params, "_meta"), upstream.MetaClientCapabilities))
		c.Session.Capabilities = string(caps.JSON())
	case ep.mcp:
		c.SessionID = r.Header.Get("Mcp-Session-Id")
	default:
		c.SessionID = r.Header.Get("X-Session-Id")
	}
	g.dispatch(ctx, w, r, ep, c)
}

// clientNotification answers a client's notification: HTTP 202 and
// nothing else, whatever it is (seed 004). Its row of the message table
// says what happens to it (every row today: not forwarded, see
// pipeline.Messages); a notification without a row is dropped and
// audited (refused, slot "method").
func (g *Gateway) clientNotification(ctx context.Context, w http.ResponseWriter, r *http.Request, c *pipeline.Call) {
	w.WriteHeader(http.StatusAccepted)
	if _, ok := pipeline.Lookup(pipeline.ClientNotification, c.Method); ok {
		return
	}
	c.SessionID = cmp.Or(r.Header.Get("Mcp-Session-Id"), r.Header.Get("X-Session-Id"))
	g.auditRefusal(ctx, c, refusal.Unknown("notification "+c.Method+" (dropped)"), audit.SlotMethod)
}

// dispatch answers one request: the stages of its scope first (the stage
// table holds the order: session, params, ..., route), then what its row
// of the message table (pipeline.Messages) says the gateway does with it.
// A method without a row is refused with -32601 after the stages of
// every request.
func (g *Gateway) dispatch(ctx context.Context, w http.ResponseWriter, r *http.Request, ep endpoint, c *pipeline.Call) {
	ctx = g.withConnections(ctx, c)
	row, known := pipeline.Lookup(pipeline.ClientRequest, c.Method)
	if known && row.Scope&pipeline.Decided != 0 {
		g.decided(ctx, w, r, ep, c)
		return
	}
	switch c.Method {
	case "initialize":
		if !ep.mcp {
			ref := refusal.Unknown("initialize (served on /mcp)")
			g.auditRefusal(ctx, c, ref, audit.SlotMethod)
			writeRefusal(w, c, ref, "")
			return
		}
		if c.Stateless {
			writeRefusal(w, c, refusal.New(refusal.InvalidRequest, "Invalid request: initialize is not part of MCP 2026-07-28; send requests with their _meta, or speak 2025-11-25"), "")
			return
		}
		c.SessionID = "" // initialize always opens a new session
	}
	err := g.pipe.Run(ctx, c)
	g.sessionHeaders(w, ep, c)
	if err != nil {
		g.auditRefusal(ctx, c, err, c.RefusedBy.String())
		g.refuse(w, ep, c, err)
		return
	}
	l, listed := g.listOf(c.Method)
	switch {
	case !known:
		ref := refusal.Unknown(c.Method)
		g.auditRefusal(ctx, c, ref, audit.SlotMethod)
		writeRefusal(w, c, ref, "")
	case row.Carry == pipeline.List && listed:
		g.list(ctx, w, ep, c, l)
	case c.Method == "initialize":
		g.initialize(w, c)
	case c.Method == "ping":
		writeFrame(w, http.StatusOK, jsonrpc.Result(c.ID, complete(c, json.RawMessage(`{}`))))
	case c.Method == "server/discover":
		g.discover(w, c)
	case row.Carry == pipeline.Listen:
		g.subscribe(ctx, w, ep, c)
	case row.Carry == pipeline.Forward && c.Server != nil:
		g.relay(ctx, w, ep, c, []registry.Server{*c.Server})
	case row.Carry == pipeline.Broadcast:
		servers, err := g.reachable(ctx, ep, c)
		if err != nil {
			g.auditRefusal(ctx, c, err, c.RefusedBy.String())
			g.refuse(w, ep, c, err)
			return
		}
		g.relay(ctx, w, ep, c, servers)
	default:
		// A row the dispatcher does not carry: refused, never forwarded.
		ref := refusal.Unknown(c.Method)
		g.auditRefusal(ctx, c, ref, audit.SlotMethod)
		writeRefusal(w, c, ref, "")
	}
}

// reachable are the servers a broadcast request (logging/setLevel) is sent
// to: the server of /mcp/{server}, which the stages decided (c.Server);
// on /mcp every server of the tenant that the same stages, run again for
// it (kill switch, policy), let it reach. When none may be reached, the
// first server's refusal is the answer.
func (g *Gateway) reachable(ctx context.Context, ep endpoint, c *pipeline.Call) ([]registry.Server, error) {
	if c.Server != nil {
		return []registry.Server{*c.Server}, nil
	}
	servers, err := g.cat.Servers(ctx, c.Tenant.ID, ep.server)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Server, 0, len(servers))
	var first error
	for i := range servers {
		one := *c
		one.Server = &servers[i]
		if err := g.pipe.Run(ctx, &one); err != nil {
			if first == nil {
				first, c.RefusedBy = err, one.RefusedBy
			}
			continue
		}
		out = append(out, servers[i])
	}
	if len(out) == 0 && first != nil {
		return nil, first
	}
	return out, nil
}

// auditRefusal records the refusal err, by the check named slot, of a
// request that is not decided per call (the lists, ping, initialize, an
// unknown method): every refusal after authentication has its record,
// whether or not the upstream saw the request. Decided requests are
// recorded by decided.
func (g *Gateway) auditRefusal(ctx context.Context, c *pipeline.Call, err error, slot string) {
	st := &settler{parent: ctx, call: c}
	defer st.stop()
	o, code, word := audit.OutcomeRefused, int(refusal.CodeInternal), string(refusal.InternalError)
	var ref *refusal.Refusal
	if errors.As(err, &ref) {
		code, word = int(ref.Code), string(ref.Word)
	}
	if failed(refusal.Word(word)) {
		o = audit.OutcomeError
	}
	g.audit(st.ctx(), c, o, code, word, slot, "")
}

func (g *Gateway) sessionHeaders(w http.ResponseWriter, ep endpoint, c *pipeline.Call) {
	if c.SessionID != "" && c.Session.ID != "" {
		w.Header().Set("X-Session-Id", c.SessionID)
		if ep.mcp {
			w.Header().Set("Mcp-Session-Id", c.SessionID)
		}
	}
}

// refuse answers a refusal or an internal failure. On /mcp an unknown
// session is HTTP 404 (the transport's signal to re-initialize) with the
// -32603 session error in the body.
func (g *Gateway) refuse(w http.ResponseWriter, ep endpoint, c *pipeline.Call, err error) {
	var ref *refusal.Refusal
	if !errors.As(err, &ref) {
		g.internal(w, c, err)
		return
	}
	if ep.mcp && ref.Word == refusal.SessionError {
		ref.Status = http.StatusNotFound
	}
	writeRefusal(w, c, ref, c.Tenant.RefusalShape)
}

func (g *Gateway) internal(w http.ResponseWriter, c *pipeline.Call, err error) {
	g.o.Logger.Error("internal error", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "method", c.Method, "err", err)
	writeRefusal(w, c, refusal.Internal(c.CorrelationID), "")
}

// deleteSession ends the caller's own session, and then the upstream
// sessions it had opened (upstream.EndSessions: a DELETE to each, within
// upstream.EndTimeout, failures logged), so that no upstream keeps state
// for a session nobody can use. A session of another caller of the same
// tenant is answered like an unknown one: 404, nothing deleted.
func (g *Gateway) deleteSession(w http.ResponseWriter, r *http.Request, ep endpoint, corr string) {
	who, tenant, err := g.authenticate(r.Context(), r, ep)
	if err != nil {
		g.refuseAuth(w, r, ep, corr, err)
		return
	}
	key := who.key
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		writeJSON(w, http.StatusBadRequest, `{"error":"Mcp-Session-Id header is required"}`)
		return
	}
	rec, err := g.b.Touch(r.Context(), tenant.ID, id, g.o.Now(), session.NewLimits(g.o.Settings.SessionLifetime, g.o.Settings.SessionIdle))
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && rec.Caller != key.Caller):
		writeJSON(w, http.StatusNotFound, `{"error":"unknown session"}`)
		return
	case err != nil:
		g.o.Logger.Error("session read failed", "correlation_id", corr, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"unavailable; correlation id `+corr+`"}`)
		return
	}
	if err := g.b.Delete(r.Context(), tenant.ID, id); err != nil {
		g.o.Logger.Error("session delete failed", "correlation_id", corr, "err", err)
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"unavailable; correlation id `+corr+`"}`)
		return
	}
	// The gateway session is gone whatever happens next; a client that
	// leaves does not stop its upstream sessions being ended.
	g.up.EndSessions(context.WithoutCancel(r.Context()), g.reg, tenant.ID, rec.Upstream, g.o.Logger)
	w.WriteHeader(http.StatusNoContent)
}

// EndUpstream ends the upstream sessions of a gateway session that its
// store forgot by itself (expired or evicted): the embedded store's
// OnSessionEnd hook, wired by `aegis serve`. Each end is bounded by
// upstream.EndTimeout; failures are logged.
func (g *Gateway) EndUpstream(r session.Record) {
	g.up.EndSessions(context.Background(), g.reg, r.Tenant, r.Upstream, g.o.Logger)
}

// rolesOf is the roles key carries, never nil: the policy stage takes a
// call's roles (and its key's manifest) as authentication verified them.
func rolesOf(key registry.Key) []string {
	if key.Roles == nil {
		return []string{}
	}
	return key.Roles
}
