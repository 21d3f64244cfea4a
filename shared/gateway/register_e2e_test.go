package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/connecttest"
	"github.com/aegis-gw/aegis/shared/audit"
	connections "github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/seal"
)

// TestConnectionsDynamicRegistration: a server with auth: oauth whose
// registry entry names no client_id is connected with a client aegis
// registers for itself at the provider (RFC 7591, npm oidc-provider's
// open registration), once per tenant and server: its secret stored
// sealed, its id used for every caller, the registration audited.
func TestConnectionsDynamicRegistration(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { testDynamicRegistration(t, newConnWorld(t, memstore.New())) })
	t.Run("dynamodb", func(t *testing.T) {
		testDynamicRegistration(t, newConnWorld(t, dynamotest.Start(t).Store(t, dynamo.Options{})))
	})
}

func testDynamicRegistration(t *testing.T, w *connWorld) {
	ctx := context.Background()
	srv := registry.Server{Tenant: "acme", Name: "docs", URL: w.up.URL, Auth: registry.AuthOAuth, OAuth: &registry.OAuthClient{}}
	must(t, registry.ValidateServerAuth(srv.Auth, srv.OAuth, nil))
	must(t, w.store.PutServer(ctx, srv))

	// The authorization request names the client aegis registered.
	clientOf := func(link string) string {
		t.Helper()
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Get(link)
		must(t, err)
		resp.Body.Close()
		u, err := url.Parse(resp.Header.Get("Location"))
		must(t, err)
		return u.Query().Get("client_id")
	}
	link := linkOf(t, w.invoke(t, "acme", "alice", "docs.whoami"))
	reg, err := w.store.Registration(ctx, "acme", "docs", w.issuer)
	must(t, err)
	if reg.ClientID == "" || reg.ClientID == "aegis-docs" || len(reg.Sealed) == 0 {
		t.Fatalf("registration %+v; want a client of aegis's own with a sealed secret", reg)
	}
	secret, err := seal.Open(ctx, w.keyring, reg.Sealed, seal.Bind{"tenant": "acme", "server": "docs", "issuer": w.issuer, "client": reg.ClientID})
	must(t, err)
	if len(secret) < 16 || strings.Contains(string(reg.Sealed), string(secret)) {
		t.Fatalf("the registered client's secret is not sealed (%d bytes)", len(secret))
	}
	if _, err := seal.Open(ctx, w.keyring, reg.Sealed, seal.Bind{"tenant": "other", "server": "docs", "issuer": w.issuer, "client": reg.ClientID}); err == nil {
		t.Fatal("the sealed secret opens for another tenant")
	}
	if got := clientOf(link); got != reg.ClientID {
		t.Fatalf("the link asks for client %q; want the registered %q", got, reg.ClientID)
	}

	// Alice consents; the call goes through with her own token.
	link = linkOf(t, w.invoke(t, "acme", "alice", "docs.whoami"))
	if st, page, _ := connecttest.Consent(t, connecttest.Browser(nil), link, "alice", nil); st != http.StatusOK || !strings.Contains(page, "Connected to docs") {
		t.Fatalf("consent ended %d: %.300s", st, page)
	}
	if got := w.invoke(t, "acme", "alice", "docs.whoami"); !strings.Contains(got, "subject=alice") {
		t.Fatalf("after consent: %s", got)
	}
	// Bob is asked with the same client: one registration per tenant and
	// server.
	if got := clientOf(linkOf(t, w.invoke(t, "acme", "bob", "docs.whoami"))); got != reg.ClientID {
		t.Fatalf("bob's link asks for client %q; want %q", got, reg.ClientID)
	}
	// Two hours on, the refresh is made as the registered client.
	w.clock.Add(2 * time.Hour)
	if got := w.invoke(t, "acme", "alice", "docs.whoami"); !strings.Contains(got, "subject=alice") {
		t.Fatalf("after expiry: %s", got)
	}
	if c, err := w.store.Connection(ctx, "acme", "alice", "docs"); err != nil || c.Version != 2 {
		t.Fatalf("after the refresh: %+v, %v; want version 2", c, err)
	}

	recs, _, err := w.store.Query(ctx, audit.Query{Tenant: "acme", From: time.Now().Add(-time.Hour), To: time.Now().Add(3 * time.Hour), Limit: 1000})
	must(t, err)
	n := 0
	for _, r := range recs {
		if r.Method == connections.EventRegister {
			n++
			if r.Connection != reg.ClientID || strings.Contains(r.Detail, string(secret)) {
				t.Errorf("registration record %+v", r)
			}
		}
		if err := r.Validate(); err != nil {
			t.Errorf("record %+v: %v", r, err)
		}
	}
	if n != 1 {
		t.Fatalf("%d %s records; want 1", n, connections.EventRegister)
	}
}
