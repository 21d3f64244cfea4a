package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/idempotency"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
	"github.com/aegis-gw/aegis/shared/telemetry"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// Backend is every store the gateway needs, from one implementation
// (shared/memstore or shared/dynamo).
type Backend struct {
	Registry registry.Reader
	Sessions session.Store
	Audit    audit.Writer
	// Approvals holds calls for a human; nil fails closed (every call that
	// needs approval is refused with status "unavailable").
	Approvals approval.Store
	// Counters counts rate-limit windows and monthly usage
	// (ratelimit.Counter and quota.Meter); nil leaves both checks out.
	Counters ratelimit.Counter
	// Stops are the kill switches; nil leaves the kill-switch check out.
	Stops killswitch.Reader
	// Breaker keeps circuits and in-flight leases per tenant and server;
	// nil leaves the breaker check out.
	Breaker breaker.Store
	// Idempotency is the Idempotency-Key ledger; nil: keys are forwarded
	// upstream but retries are not answered from a ledger.
	Idempotency idempotency.Store
	// InProcess: every store above lives in this process (shared/memstore),
	// so checks do their store work inline rather than on goroutines.
	InProcess bool
}

// Deps is what Build needs besides the backend.
type Deps struct {
	Settings    config.Settings
	Backend     Backend
	Logger      *slog.Logger
	Now         func() time.Time
	HTTP        *http.Client         // nil: NewHTTPClient()
	Credentials upstream.Credentials // nil: no brokered credentials resolvable
	CatalogTTL  time.Duration        // 0: one minute
	Version     string
	// RegistryCacheTTL > 0 caches registry reads per process (keys, tenants,
	// servers) and serves the last known state for a minute past it when the
	// store is down. The Lambda functions use it; 0 reads through.
	RegistryCacheTTL time.Duration
	Notifier         approval.Notifier // nil: nobody is told of held calls
	Tiers            quota.Tiers       // monthly limits per tier; nil: quota.DefaultTiers()
	// Tracer traces requests, checks and upstream calls; nil: no spans
	// (telemetry.FromEnv builds it). DynamoDB spans come from the client's
	// middleware (dynamo.WithMiddleware(tracer.AddAWSMiddleware)).
	Tracer *telemetry.Tracer
	// Metrics receives one record per audited tools/call; nil: no metrics.
	Metrics Metrics
}

// Build wires the standard gateway: the pipeline in the order of
// pipeline.Order with every check that exists, over one backend.
func Build(d Deps) (*Gateway, error) {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.HTTP == nil {
		d.HTTP = NewHTTPClient(d.Settings.LocalMode)
	}
	if d.CatalogTTL == 0 {
		d.CatalogTTL = time.Minute
	}
	s, b := d.Settings, d.Backend
	if d.RegistryCacheTTL > 0 {
		b.Registry = registry.NewCache(b.Registry, d.RegistryCacheTTL, time.Minute, d.Now)
	}
	up := &upstream.Client{HTTP: d.HTTP, Timeout: s.UpstreamTimeout, MaxRetries: s.UpstreamMaxRetries, Creds: d.Credentials}
	cat := route.NewCatalog(b.Registry, lister{up}, d.CatalogTTL, d.Now)
	checks := []pipeline.Check{
		sessioncheck.New(b.Sessions, session.Limits{Lifetime: s.SessionLifetime, Idle: s.SessionIdle}, d.Now, d.Logger),
	}
	if b.Counters != nil {
		tiers := d.Tiers
		if tiers == nil {
			tiers = quota.DefaultTiers()
		}
		checks = append(checks,
			ratelimit.New(b.Counters, s.RateLimitPerSession, s.RateLimitPerTool, d.Now, d.Logger),
			quota.New(b.Counters, quota.Options{Enabled: s.BillingEnabled, Enforce: s.BillingEnforce, Tiers: tiers}, d.Now, d.Logger))
	}
	checks = append(checks, route.NewCheck(cat))
	if b.Stops != nil {
		checks = append(checks, killswitch.New(b.Stops, s.KillSwitchRefresh, d.Now, d.Logger))
	}
	checks = append(checks,
		approval.New(b.Approvals, approval.Options{TTL: s.ApprovalTTL, Now: d.Now, Logger: d.Logger, Audit: b.Audit, Notifier: d.Notifier}))
	if b.Breaker != nil {
		brk := breaker.New(breaker.Options{
			Store: b.Breaker, Threshold: s.CircuitFailureThreshold, Cooldown: s.CircuitCooldown,
			MaxConcurrent: s.UpstreamMaxConcurrent, UpstreamTimeout: s.UpstreamTimeout, Now: d.Now, Logger: d.Logger,
		})
		up.Observe = brk.Observe
		checks = append(checks, brk)
	}
	var ledger *idempotency.Ledger
	if b.Idempotency != nil {
		ledger = idempotency.New(idempotency.Options{Store: b.Idempotency, LeaseTTL: 5*s.UpstreamTimeout + 10*time.Second, Now: d.Now})
	}
	pipe, err := pipeline.New(checks...)
	if err != nil {
		return nil, err
	}
	if d.Tracer != nil {
		pipe.SetHook(d.Tracer)
	}
	return New(Options{
		Settings: s,
		Registry: b.Registry,
		Sessions: b.Sessions,
		Pipeline: pipe,
		Catalog:  cat,
		Upstream: up,
		Ledger:   ledger,
		Inline:   b.InProcess,
		Audit:    b.Audit,
		Logger:   d.Logger,
		Now:      d.Now,
		Version:  d.Version,
		Tracer:   d.Tracer,
		Metrics:  d.Metrics,
	}), nil
}

// NewHTTPClient is the transport for upstream calls: pooled keep-alive
// connections, no redirects followed (a 3xx is an upstream error), and every
// dialed address checked by upstream.Control (no link-local or metadata
// addresses; loopback only in local mode).
func NewHTTPClient(local bool) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: netguard.Control(local)}).DialContext
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// lister fetches a server's tool list over a fresh upstream session.
type lister struct{ up *upstream.Client }

// maxPages bounds tools/list pagination.
const maxPages = 20

func (l lister) ListTools(ctx context.Context, srv *registry.Server) ([]route.Tool, error) {
	ctx = l.up.WithBudget(ctx) // one UPSTREAM_TIMEOUT_SECS for every page
	sess, err := l.up.Initialize(ctx, srv)
	if err != nil {
		return nil, err
	}
	var tools []route.Tool
	var cursor string
	for page := 0; page < maxPages; page++ {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			c, _ := json.Marshal(cursor)
			params = jsonrpc.Edit(params, "cursor", c)
		}
		resp, _, err := l.up.Send(ctx, &upstream.Exchange{Server: srv, Session: sess, ID: json.RawMessage(fmt.Sprint(page + 1)), Method: "tools/list", Params: params})
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, &upstream.ProtocolError{Detail: "tools/list failed: " + string(resp.Error)}
		}
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			return nil, &upstream.ProtocolError{Detail: "tools/list result unreadable"}
		}
		for _, def := range res.Tools {
			if name, ok := jsonrpc.StringMember(def, "name"); ok && name != "" {
				tools = append(tools, route.Tool{Name: name, Def: def})
			}
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	return tools, nil
}
