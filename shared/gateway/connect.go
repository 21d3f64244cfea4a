package gateway

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// callerTokens gives one request's upstream exchanges the access tokens of
// its own caller's connections, or the tokens exchanged for the token the
// caller came with (upstream.Tokens), and remembers which connection or
// exchange each server's token came from (for a 401, Refused; for the
// audit record).
type callerTokens struct {
	b              *connect.Broker // nil: this gateway makes no connections
	x              *connect.Exchanger
	tenant, caller string
	subject        connect.Subject // the caller's token; zero for an API key
	mu             sync.Mutex
	used           map[string]string // server → connection or exchange id
}

var errNoConnections = errors.New("this gateway makes no connections (no public URL: docs/connections.md)")

// Token implements upstream.Tokens.
func (t *callerTokens) Token(ctx context.Context, srv *registry.Server) (tok string, err error) {
	var id string
	switch {
	case srv.ExchangesToken():
		tok, id, err = t.x.Token(ctx, t.tenant, t.caller, t.subject, srv)
	case t.b == nil:
		return "", errNoConnections
	default:
		tok, id, err = t.b.Token(ctx, t.tenant, t.caller, srv)
	}
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	if t.used == nil {
		t.used = map[string]string{}
	}
	t.used[srv.Name] = id
	t.mu.Unlock()
	return tok, nil
}

func (t *callerTokens) connection(server string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.used[server]
}

type callerTokensKey struct{}

type subjectKey struct{}

// withSubject returns ctx carrying the token who came with (none for an
// API key), for the token exchanges of its request (withConnections).
func withSubject(ctx context.Context, who caller) context.Context {
	if !who.token {
		return ctx
	}
	return context.WithValue(ctx, subjectKey{}, who.subject)
}

// withConnections returns ctx for c's request: the upstream exchanges it
// makes carry c's caller's own tokens to servers with auth: oauth, tokens
// exchanged for the caller's own to servers with auth: token_exchange,
// and the catalogs keep those servers' lists per caller.
func (g *Gateway) withConnections(ctx context.Context, c *pipeline.Call) context.Context {
	sub, _ := ctx.Value(subjectKey{}).(connect.Subject) // zero: an API key
	t := &callerTokens{b: g.o.Connections, x: g.exchanger, tenant: c.Tenant.ID, caller: c.Caller, subject: sub}
	ctx = upstream.WithTokens(ctx, t)
	ctx = context.WithValue(ctx, callerTokensKey{}, t)
	return route.WithCaller(ctx, c.Caller)
}

// connectionRefusal is the answer to err when it says c's caller needs a
// connection (an *upstream.TokenError from routing or the exchange), or an
// upstream answered 401 to the token of their connection (which is then
// marked broken): CONNECTION_REQUIRED with a fresh link, as a URL
// elicitation to a client that can take one (elicitsURL: -32042, or an
// input-required result at 2026-07-28). ok is false for any other error.
func (g *Gateway) connectionRefusal(ctx context.Context, c *pipeline.Call, err error) (ref *refusal.Refusal, ok bool) {
	var te *upstream.TokenError
	var he *upstream.HTTPError
	server, broken := "", false
	switch {
	case errors.As(err, &te):
		server = te.Server
		if ref, ok := g.exchangeRefusal(c, te); ok {
			return ref, true
		}
		var ne *connect.NeededError
		switch {
		case errors.Is(err, errNoConnections) || te.Err == nil && g.o.Connections == nil:
			return refusal.Upstream("server " + te.Server + " needs each caller's own connection, and this gateway makes none (no public URL)"), true
		case errors.As(err, &ne):
			broken = ne.Broken
		default: // the store or the key could not be read: fail closed
			g.o.Logger.Warn("connection token unavailable", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "server", te.Server, "err", err)
			return refusal.Internal(c.CorrelationID), true
		}
	case errors.As(err, &he) && he.Status == http.StatusUnauthorized && c.Server != nil && c.Server.ExchangesToken():
		// The server refused the exchanged token: the next call exchanges
		// again; this one is not sent twice.
		if t, _ := ctx.Value(callerTokensKey{}).(*callerTokens); t != nil {
			g.exchanger.Refused(c.Tenant.ID, c.Caller, c.Server.Name, t.connection(c.Server.Name))
		}
		return refusal.Upstream("server " + c.Server.Name + " refused the token exchanged for this caller's (HTTP 401)"), true
	case errors.As(err, &he) && he.Status == http.StatusUnauthorized && c.Server != nil && c.Server.NeedsConnection() && g.o.Connections != nil:
		server, broken = c.Server.Name, true
		if t, _ := ctx.Value(callerTokensKey{}).(*callerTokens); t != nil {
			g.o.Connections.Refused(ctx, c.Tenant.ID, c.Caller, server, t.connection(server))
		}
	default:
		return nil, false
	}
	srv, err := g.serverNamed(ctx, c, server)
	if err != nil {
		return refusal.Internal(c.CorrelationID), true
	}
	link, eid, err := g.o.Connections.Ask(ctx, c.Tenant.ID, c.Caller, srv)
	if err != nil {
		g.o.Logger.Warn("connection not asked for", "correlation_id", c.CorrelationID, "tenant", c.Tenant.ID, "server", server, "err", err)
		var de *connect.DiscoveryError
		if errors.As(err, &de) {
			return refusal.Upstream("the authorization server of " + server + " could not be found (" + de.Step + ")"), true
		}
		return refusal.Internal(c.CorrelationID), true
	}
	if elicitsURL(c) {
		g.elicits.ask(c, eid, g.o.Now())
		return refusal.ConnectionElicitation(server, link, eid, broken), true
	}
	return refusal.Connection(server, link, eid, broken), true
}

// exchangeRefusal is the answer to te when it is about a server with auth:
// token_exchange: CONNECTION_REQUIRED, without a link, to a caller who came
// with an API key (only a token of the tenant's issuer can be exchanged);
// an upstream error naming the step to a failed exchange. ok is false for
// any other error.
func (g *Gateway) exchangeRefusal(c *pipeline.Call, te *upstream.TokenError) (ref *refusal.Refusal, ok bool) {
	var xe *connect.ExchangeError
	switch {
	case errors.Is(te, connect.ErrNoSubject):
		return refusal.New(refusal.ConnectionRequired, "Connection required: server "+te.Server+" is reached with a token exchanged for the caller's own; call on /t/"+c.Tenant.ID+"/mcp with an access token of this tenant's issuer, not an API key").
			With("server", te.Server).With("mode", registry.AuthTokenExchange), true
	case errors.As(te, &xe):
		var de *connect.DiscoveryError
		if errors.As(xe, &de) {
			return refusal.Upstream("the token service of " + te.Server + " could not be found (" + de.Step + ")"), true
		}
		return refusal.Upstream("the token service refused to exchange this caller's token for " + te.Server), true
	}
	return nil, false
}

// elicitsURL reports whether c's client can be asked to open a link by a
// URL-mode elicitation: an MCP 2025-11-25 session that declared
// elicitation.url (-32042), or an MCP 2026-07-28 request that declares it,
// whose method may be answered with an input-required result (tools/call,
// prompts/get, resources/read: SEP-2322), and which does not answer the
// gateway's elicitation already. A retry that answered it (accepted,
// declined or cancelled) and still finds no connection gets the refusal
// with a fresh link: one prompt per call, never a loop of them while the
// person is still at the provider (docs/design/connections.md).
func elicitsURL(c *pipeline.Call) bool {
	if !c.MCP || sessioncheck.Caps(c)&upstream.CapElicitURL == 0 {
		return false
	}
	if !c.Stateless {
		return true
	}
	return inputRequiredMethods[c.Method] && jsonrpc.Member(jsonrpc.Member(c.Params, "inputResponses"), refusal.ConnectionInputKey) == nil
}

// inputRequiredMethods are the requests MCP 2026-07-28 lets a server
// answer with an input-required result.
var inputRequiredMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// completeConnection is the CONNECTION_REQUIRED the route stage gave
// (naming the server it could not list for c's caller) with its link: the
// caller's token is asked for once more, for the reason (no connection, a
// broken one, or a store that could not be read).
func (g *Gateway) completeConnection(ctx context.Context, c *pipeline.Call, ref *refusal.Refusal) error {
	server, _ := ref.Fields["server"].(string)
	t, _ := ctx.Value(callerTokensKey{}).(*callerTokens)
	srv, err := g.serverNamed(ctx, c, server)
	if err != nil || t == nil {
		return refusal.Internal(c.CorrelationID)
	}
	if _, err = t.Token(ctx, srv); err == nil {
		if srv.ExchangesToken() { // exchanged since: nothing to ask for
			return refusal.Upstream("the tools of " + server + " could not be listed for this caller; send the call again")
		}
		err = &connect.NeededError{Server: server} // connected since: a link does no harm
	}
	out, _ := g.connectionRefusal(ctx, c, &upstream.TokenError{Server: server, Err: err})
	return out
}

// serverNamed is c's server called name (c.Server when it is the one).
func (g *Gateway) serverNamed(ctx context.Context, c *pipeline.Call, name string) (*registry.Server, error) {
	if c.Server != nil && c.Server.Name == name {
		return c.Server, nil
	}
	ss, err := g.reg.Servers(ctx, c.Tenant.ID)
	if err != nil {
		return nil, err
	}
	for i := range ss {
		if ss[i].Name == name {
			return &ss[i], nil
		}
	}
	return nil, errors.New("no server " + name)
}
