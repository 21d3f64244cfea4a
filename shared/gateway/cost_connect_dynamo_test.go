package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/dynacount"
	"github.com/aegis-gw/aegis/shared/audit"
	connections "github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/credentials"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/seal"
)

// TestDynamoDBCostConnectedCall: a call to a server with auth: oauth, with
// the caller's connection, costs a warm instance exactly what an allowed
// call to a server with a brokered credential does: the same DynamoDB
// requests, writes, reads, units and sequential trips (the opened token
// is in the broker's cache: no read of the connection, no KMS call). The
// caller's connection is stored sealed, as a callback would store it; the
// two servers are the same demo upstream, one with auth: oauth. The
// connected calls' audit records name the connection. Idle past the
// caches' lifetimes, both kinds of call read the connection once.
func TestDynamoDBCostConnectedCall(t *testing.T) {
	ctx := context.Background()
	kek := make([]byte, 32)
	_, _ = rand.Read(kek)
	kr, err := seal.NewLocal(kek)
	must(t, err)
	e := newCostEnv(t, nil, nil, func(e *costEnv, st *dynamo.Store, o *gateway.Options) {
		b, err := connections.New(connections.Options{
			Store: st, Keyring: kr, Registry: st, Audit: st, PublicURL: "http://127.0.0.1:1", HTTP: gateway.NewHTTPClient(true),
			Local: true, Now: e.Clock.Now, Logger: o.Logger, Secrets: credentials.New(credentials.Options{Local: true}),
		})
		must(t, err)
		o.Connections = b
	})
	now := e.Clock.Now()
	must(t, e.Admin.PutServer(ctx, registry.Server{Tenant: "acme", Name: "docs", URL: e.Up.URL, Created: now,
		Auth: registry.AuthOAuth, OAuth: &registry.OAuthClient{ClientID: "aegis-docs"}}))
	c := connections.Connection{ID: "conn-cost", Tenant: "acme", Caller: "acme-agent", Server: "docs", Issuer: "https://issuer.example",
		Status: connections.StatusActive, Expires: now.Add(time.Hour), Version: 1, Created: now, Updated: now}
	plain, _ := json.Marshal(connections.Tokens{Access: "access-" + rand.Text(), Type: "Bearer", TokenEndpoint: "https://issuer.example/token", Resource: e.Up.URL})
	c.Sealed, err = seal.Seal(ctx, kr, plain, seal.Bind{"tenant": c.Tenant, "caller": c.Caller, "server": c.Server, "connection": c.ID})
	must(t, err)
	must(t, e.Admin.PutConnection(ctx, c))

	// Warm: one call to each server (each tool pinned, each upstream
	// session opened, the connection read and opened once).
	e.mustCall(t, 1, "mock-primary.echo", echoArgs, 0)
	e.mustCall(t, 2, "docs.echo", echoArgs, 0)
	count := func(id int, tool string) costWant {
		e.Proxy.Take()
		at := e.mustCall(t, id, tool, echoArgs, 0)
		reqs := e.Proxy.Take()
		c := dynacount.Tally(reqs, at)
		t.Logf("%s: %+v\n\t%s", tool, wantOf(c), dynacount.Ops(reqs))
		return wantOf(c)
	}
	brokered, connected := count(3, "mock-primary.echo"), count(4, "docs.echo")
	if want := (costWant{5, 5, 0, 5, 0, 3, 0}); brokered != want || connected != want {
		t.Errorf("warm: brokered %+v, connected %+v; want both %+v", brokered, connected, want)
	}
	// Idle past every cache's lifetime, the token's included (5
	// minutes): the caller's first call reads the connection again
	// (GetItem), whichever server it calls, because the caller's catalog
	// lists docs with that token; it comes after the tenant's view (which
	// says docs has auth: oauth): one read and one trip more than the
	// idle row of TestDynamoDBCostPerCall, whose tenant has no such server.
	e.Clock.Advance(6 * time.Minute)
	idleConnected := count(5, "docs.echo")
	e.Clock.Advance(6 * time.Minute)
	idleBrokered := count(6, "mock-primary.echo")
	if want := (costWant{10, 5, 5, 5, 10, 5, 0}); idleBrokered != want || idleConnected != want {
		t.Errorf("idle: brokered %+v, connected %+v; want both %+v", idleBrokered, idleConnected, want)
	}
	recs, _, err := e.Admin.Query(ctx, audit.Query{Tenant: "acme", From: now.Add(-time.Hour), To: e.Clock.Now().Add(time.Hour), Limit: 100})
	must(t, err)
	named := 0
	for _, r := range recs {
		if r.Method == "tools/call" && r.Server == "docs" && r.Connection == c.ID {
			named++
		}
	}
	if named != 3 {
		t.Errorf("%d call records name the connection; want 3 (of %d records)", named, len(recs))
	}
}
