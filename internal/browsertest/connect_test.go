package browsertest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/connecttest"
	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/credentials"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/seal"
	"github.com/aegis-gw/aegis/shared/upstream"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// TestConnectionsInChromium is issue 31's consent step in a real browser,
// and its console page. A Go SDK client calls a tool of a server with
// auth: oauth and is answered with the link: alice's client (MCP
// 2025-11-25, elicitation.url declared) in a -32042 URL elicitation,
// bob's (the SDK's default version) in the CONNECTION_REQUIRED refusal's
// data. Chromium opens alice's link, signs in and consents at the npm
// oidc-provider's own pages, follows the redirect back to aegis's callback
// and shows "Connected to docs"; alice's identical call then succeeds with
// her own token. The link opened again shows that it was used (410). The
// authorization of bob's link, completed in another browser than the one
// that opened it (no cookie), is refused (403) and bob stays unconnected;
// in his own browser he connects. Then, in the console: the tenant's
// connections with their states, never a token; agent- and
// provider-supplied strings (caller, issuer, scope, id, an error) shown as
// text; the filters by caller and server; a revocation cancelled, then
// confirmed, revoked at the provider, and bob asked again. On the embedded
// store and on DynamoDB (moto).
func TestConnectionsInChromium(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { testConnectionsInChromium(t, memstore.New()) })
	t.Run("dynamodb", func(t *testing.T) {
		testConnectionsInChromium(t, dynamotest.Start(t).Store(t, dynamo.Options{}))
	})
}

// connGateway is a gateway with connections and its admin API (with the
// console) on one loopback origin, as aegis serve mounts them: tenant
// acme's server docs (auth: oauth) is the connecttest upstream, whose
// authorization server is the npm provider.
type connGateway struct {
	url, adminKey string
	store         backend.Backend
	keys          map[string]string // caller → API key
	up            *connecttest.Upstream
}

func startConnGateway(t *testing.T, b backend.Backend) *connGateway {
	t.Helper()
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &connGateway{url: "http://" + l.Addr().String(), store: b, keys: map[string]string{}, adminKey: admin.NewKey()}
	secret := "docs-client-secret-" + rand.Text()
	var issuer string
	g.up = connecttest.StartUpstream(t, func() string { return issuer }, nil)
	issuer = connecttest.StartProvider(t, connecttest.Provider{Resource: g.up.URL, Redirect: g.url + "/t/acme/connect/callback", Secret: secret})

	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	check(b.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierGrowth}))
	check(b.PutServer(ctx, registry.Server{Tenant: "acme", Name: "docs", URL: g.up.URL, Auth: registry.AuthOAuth,
		OAuth: &registry.OAuthClient{ClientID: connecttest.ClientID, ClientSecretRef: "env:DOCS_CLIENT_SECRET"}}))
	for _, caller := range []string{"alice", "bob"} {
		key, rec := auth.NewKey("acme", caller, time.Now())
		check(b.PutKey(ctx, rec))
		g.keys[caller] = key
	}
	kek := make([]byte, 32)
	_, _ = rand.Read(kek)
	kr, err := seal.NewLocal(kek)
	check(err)
	log := slog.New(slog.DiscardHandler)
	hc := gateway.NewHTTPClient(true)
	creds := credentials.New(credentials.Options{Local: true, Getenv: func(k string) string {
		if k == "DOCS_CLIENT_SECRET" {
			return secret
		}
		return ""
	}})
	broker, err := wiring.Connections(b, kr, g.url, creds, hc, true, log)
	check(err)
	s := config.Defaults()
	s.LocalMode = true
	gw, err := gateway.New(b, &gateway.Options{Settings: s, Logger: log, HTTP: hc, Credentials: creds, Connections: broker})
	check(err)
	ah, err := admin.New(b, &admin.Options{AdminKey: g.adminKey, Catalog: gw.Catalog(), LocalMode: true, Logger: log, Connections: broker})
	check(err)
	mux := http.NewServeMux()
	mux.Handle("/", gw)
	mux.Handle("/admin/", ah)
	hs := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	hs.Start()
	t.Cleanup(hs.Close)
	return g
}

// bearer adds an API key to every request of an MCP client.
type bearer string

func (k bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

// client connects caller's Go SDK client to the tenant's /mcp: at
// version (the SDK's default when ""), declaring URL elicitation when
// urlElicitation.
func (g *connGateway) client(t *testing.T, ctx context.Context, caller, version string, urlElicitation bool) *mcp.ClientSession {
	t.Helper()
	var o *mcp.ClientOptions
	if urlElicitation {
		o = &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: caller + "-agent", Version: "1.0.0"}, o)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url + "/t/acme/mcp", HTTPClient: &http.Client{Transport: bearer(g.keys[caller])}},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("%s's client: %v", caller, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// whoami calls docs.whoami.
func whoami(ctx context.Context, s *mcp.ClientSession) (*mcp.CallToolResult, error) {
	return s.CallTool(ctx, &mcp.CallToolParams{Name: "docs.whoami", Arguments: map[string]any{}})
}

// linkOf is the link of a refused call: the URL-mode elicitation's url of
// a -32042, or the url of the CONNECTION_REQUIRED refusal's data (its
// code as session s's version numbers it).
func (g *connGateway) linkOf(t *testing.T, s *mcp.ClientSession, err error) string {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("the call was not refused: %v", err)
	}
	var d struct {
		URL          string `json:"url"`
		Elicitations []struct {
			Mode, URL string
		} `json:"elicitations"`
		Aegis struct{ Layer, Code string } `json:"aegis"`
	}
	if err := json.Unmarshal(werr.Data, &d); err != nil || d.Aegis.Code != string(refusal.ConnectionRequired) || d.Aegis.Layer != "gateway" {
		t.Fatalf("refusal %d %s: %v", werr.Code, werr.Data, err)
	}
	link := d.URL
	if werr.Code == mcp.CodeURLElicitationRequired {
		if len(d.Elicitations) != 1 || d.Elicitations[0].Mode != "url" {
			t.Fatalf("-32042 with elicitations %s", werr.Data)
		}
		link = d.Elicitations[0].URL
	} else {
		n := refusal.Seed
		if upstream.IsModern(s.InitializeResult().ProtocolVersion) {
			n = refusal.MCP20260728
		}
		if want := int64(n.Wire(refusal.CodeConnectionRequired)); werr.Code != want {
			t.Fatalf("refusal code %d at %s, want %d", werr.Code, s.InitializeResult().ProtocolVersion, want)
		}
	}
	if !strings.HasPrefix(link, g.url+"/t/acme/connect/start?state=") {
		t.Fatalf("link %q in %s", link, werr.Data)
	}
	return link
}

// tab is one browser context (its own cookies) and the test's helpers
// for it.
type tab struct {
	t   *testing.T
	ctx context.Context
}

func newTab(t *testing.T) tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	return tab{t, ctx}
}

func (p tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// wait polls expr in the page until it is true, across navigations.
func (p tab) wait(what, expr string) {
	p.t.Helper()
	for {
		_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr))
		if err == nil {
			return
		}
		if p.ctx.Err() == nil && navigated(err) {
			continue
		}
		p.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
	}
}

func (p tab) eval(expr string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return s
}

// open navigates to u and returns the HTTP status of the page it lands on
// (after redirects).
func (p tab) open(u string) int64 {
	p.t.Helper()
	resp, err := chromedp.RunResponse(p.ctx, chromedp.Navigate(u))
	if err != nil {
		p.t.Fatalf("open %s: %v", u, err)
	}
	return resp.Status
}

const bodyText = `(document.body ? document.body.innerText : "")`

// consent opens link and signs in and consents as who (signIn).
func (p tab) consent(link, who, resource string) {
	p.t.Helper()
	p.open(link)
	p.signIn(who, resource)
}

// signIn, at the provider's login page, signs in as the person who and
// consents at its consent page (which names the resource, the server's
// URL), with the keyboard and the mouse.
func (p tab) signIn(who, resource string) {
	p.t.Helper()
	p.wait("the provider's login page", `document.querySelector('input[name="login"]') !== null`)
	if strings.Contains(p.eval(`location.href`), "/t/acme/") {
		p.t.Fatalf("the link did not lead to the provider: %s", p.eval(`location.href`))
	}
	p.do("sign in as "+who, chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), who),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "any password"),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	p.wait("the provider's consent page", `document.querySelector('input[name="login"]') === null && document.querySelector('button[type="submit"]') !== null`)
	if got := p.eval(bodyText); !strings.HasPrefix(got, "Authorize") || !strings.Contains(got, resource) {
		p.t.Fatalf("the consent page does not name the resource %s: %.300s", resource, got)
	}
	p.do("consent", chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
}

// captureCallback makes p's browser stop every request to the gateway's
// callback, sending its URL (with the provider's code and the state) on
// the returned channel instead.
func (p tab) captureCallback(g *connGateway) <-chan string {
	p.t.Helper()
	got := make(chan string, 1)
	paused := chromedp.Events(p.ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(p.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: g.url + "/t/acme/connect/callback*"}}}); err != nil {
		p.t.Fatal(err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			select {
			case got <- ev.Request.URL:
			default:
			}
			_, _ = chromedp.Call(p.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonAborted})
		}
	}()
	return got
}

func testConnectionsInChromium(t *testing.T, b backend.Backend) {
	g := startConnGateway(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	// Alice's client declared URL elicitation: -32042, and nothing went
	// upstream.
	alice := g.client(t, ctx, "alice", "2025-11-25", true)
	_, err := whoami(ctx, alice)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != mcp.CodeURLElicitationRequired {
		t.Fatalf("alice's first call: %v; want -32042", err)
	}
	link := g.linkOf(t, alice, err)
	if _, calls := g.up.Seen(); calls != 0 {
		t.Fatalf("the upstream got %d requests before any connection", calls)
	}

	// Chromium opens the link: the provider's login page. The link is
	// single use: opened a second time (here in another browser) it says
	// so.
	a := newTab(t)
	a.open(link)
	a.wait("the provider's login page", `document.querySelector('input[name="login"]') !== null`)
	second := newTab(t)
	if st := second.open(link); st != http.StatusGone {
		t.Fatalf("the link opened a second time: HTTP %d, want 410", st)
	}
	if got := second.eval(bodyText); got != "This link was used already. Send the call again to get a new one." {
		t.Fatalf("the link opened a second time says %q", got)
	}
	// Sign in and consent; back to aegis.
	a.signIn("alice", g.up.URL)
	a.wait("aegis's connected page", bodyText+`.includes("Connected to docs")`)
	if u := a.eval(`location.href`); !strings.HasPrefix(u, g.url+"/t/acme/connect/callback?") {
		t.Fatalf("the connected page is at %s", u)
	}
	if got := a.eval(bodyText); got != "Connected to docs. Go back to your agent and send the call again." {
		t.Fatalf("the connected page says %q", got)
	}

	// The identical call succeeds, with alice's own token.
	res, err := whoami(ctx, alice)
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("alice's call after consent: %v %+v", err, res)
	}
	if txt, _ := res.Content[0].(*mcp.TextContent); txt == nil || txt.Text != "subject=alice" {
		t.Fatalf("alice's call after consent answered %+v", res.Content[0])
	}

	// The link once more, its authorization completed: gone, and says
	// so.
	if st := a.open(link); st != http.StatusGone {
		t.Fatalf("the link opened after the consent: HTTP %d, want 410", st)
	}
	if got := a.eval(bodyText); got != "This link was used already, has expired, or is not valid. Send the call again to get a new one." {
		t.Fatalf("the link opened after the consent says %q", got)
	}

	// Bob's client is the SDK's default: the refusal's data has the link.
	bob := g.client(t, ctx, "bob", "", false)
	_, err = whoami(ctx, bob)
	link = g.linkOf(t, bob, err)

	// Bob's browser opens it and someone consents, but the answer is taken
	// to another browser, which never opened the link (the login CSRF of
	// an attacker's own grant): refused, and bob stays unconnected.
	opener := newTab(t)
	callbacks := opener.captureCallback(g)
	opener.consent(link, "mallory", g.up.URL)
	var cb string
	select {
	case cb = <-callbacks:
	case <-ctx.Done():
		t.Fatal("no callback request seen")
	}
	if !strings.Contains(cb, "code=") || !strings.Contains(cb, "state=") {
		t.Fatalf("callback %s", cb)
	}
	other := newTab(t)
	if st := other.open(cb); st != http.StatusForbidden {
		t.Fatalf("the callback in another browser: HTTP %d, want 403", st)
	}
	if got := other.eval(bodyText); got != "This authorization was started in another browser. Send the call again to get a new link, and open it here." {
		t.Fatalf("the callback in another browser says %q", got)
	}
	_, err = whoami(ctx, bob)
	link = g.linkOf(t, bob, err)
	// In his own browser bob connects.
	bt := newTab(t)
	bt.consent(link, "bob", g.up.URL)
	bt.wait("aegis's connected page", bodyText+`.includes("Connected to docs")`)
	if res, err := whoami(ctx, bob); err != nil || res.IsError {
		t.Fatalf("bob's call after consent: %v %+v", err, res)
	}

	consoleConnections(t, g)

	// Bob was revoked in the console: asked again.
	_, err = whoami(ctx, bob)
	g.linkOf(t, bob, err)
}

// consoleConnections walks the console's connections page over alice's
// and bob's connections and two more written to the store: one broken
// whose caller, issuer, scope and id carry markup, and one whose access
// token expired.
func consoleConnections(t *testing.T, g *connGateway) {
	ctx := context.Background()
	now := time.Now().UTC()
	hostile := connect.Connection{ID: `<i id="conn-id-markup">x</i>`, Tenant: "acme", Caller: `<img src=x id=conn-caller-markup>`, Server: "docs",
		Issuer: `https://issuer.example/<b id="conn-issuer-markup">x</b>`, Status: connect.StatusBroken, Scope: `<script>window.pwned=1</script>`,
		Sealed: []byte("x"), Version: 1, Created: now, Updated: now}
	expired := connect.Connection{ID: "conn-expired", Tenant: "acme", Caller: "carol@example.com", Server: "docs", Issuer: "https://issuer.example",
		Status: connect.StatusActive, Expires: now.Add(-time.Minute), Sealed: []byte("x"), Version: 1, Created: now, Updated: now}
	for _, c := range []connect.Connection{hostile, expired} {
		if err := g.store.PutConnection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}

	p := newTab(t)
	problems := watchProblems(p.ctx)
	p.do("open the console", chromedp.Navigate(g.url+"/admin/console/"), chromedp.WaitVisible(chromedp.ID("key")))
	p.do("log in", chromedp.SendKeys(chromedp.ID("key"), g.adminKey), chromedp.KeyEvent("\r"))
	p.wait("the console", `document.body.getAttribute("data-ready") === "true"`)
	p.do("open the connections", chromedp.Navigate(g.url+"/admin/console/#connections"))
	p.wait("the connections drawn", `document.body.getAttribute("data-loaded") === "connections" && document.querySelectorAll("#conn-table tbody tr[data-id]").length === 4`)

	rows := `[...document.querySelectorAll("#conn-table tbody tr[data-id]")]`
	states := p.eval(rows + `.map(r => r.dataset.caller + "=" + r.dataset.state + "/" + r.querySelector("td.state").textContent).sort().join(" ")`)
	if want := `<img src=x id=conn-caller-markup>=broken/broken alice=connected/connected bob=connected/connected carol@example.com=expired/expired`; states != want {
		t.Fatalf("states %q, want %q", states, want)
	}
	// Markup is text, never elements; no token is in the page.
	for _, id := range []string{"conn-id-markup", "conn-caller-markup", "conn-issuer-markup"} {
		if p.eval(`String(document.getElementById("`+id+`") !== null)`) != "false" {
			t.Fatalf("the markup became element #%s", id)
		}
	}
	hrow := `document.querySelector('#conn-table tr[data-state="broken"]')`
	if got := p.eval(hrow + `.innerText`); !strings.Contains(got, hostile.Caller) || !strings.Contains(got, hostile.Issuer) || !strings.Contains(got, hostile.Scope) || !strings.Contains(got, hostile.ID) {
		t.Fatalf("the broken connection's row shows %q", got)
	}
	if p.eval(`String(window.pwned)`) != "undefined" {
		t.Fatal("a scope's script ran")
	}
	page := p.eval(`document.documentElement.outerHTML`)
	tokens, _ := g.up.Seen()
	for _, tok := range tokens {
		if strings.Contains(page, tok) {
			t.Fatal("a token is in the console's page")
		}
	}
	shot(t, p.ctx, connShots(t), "connections")

	// Filters: by caller (contains), then by server.
	p.do("filter by caller", chromedp.SendKeys(chromedp.ID("conn-caller"), "bo"))
	p.wait("only bob", rows+`.map(r => r.dataset.caller).join() === "bob"`)
	p.wait("the summary", `document.getElementById("conn-summary").textContent === "4 connections; 1 match the filter."`)
	p.do("clear the caller", chromedp.Evaluate[chromedp.Void](`(() => { const e = document.getElementById("conn-caller"); e.value = ""; e.dispatchEvent(new Event("input")); })()`))
	p.wait("all four again", rows+`.length === 4`)
	p.do("filter by a server no connection has", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById("conn-server"); s.append(new Option("wiki", "wiki")); s.value = "wiki"; s.dispatchEvent(new Event("change")); })()`))
	p.wait("no row", rows+`.length === 0 && document.querySelector("#conn-table tbody td[colspan]").textContent === "No connection matches the filter."`)
	p.do("filter by docs", chromedp.SetValue(chromedp.ID("conn-server"), "docs"), chromedp.Evaluate[chromedp.Void](`document.getElementById("conn-server").dispatchEvent(new Event("change"))`))
	p.wait("the four of docs", rows+`.length === 4`)

	// Revoke bob's: the dialog names him, starts on Cancel; cancelled,
	// nothing happens.
	brow := `document.querySelector('#conn-table tr[data-caller="bob"]')`
	p.do("ask to revoke bob's", chromedp.Click(chromedp.JSPath(brow+`.querySelector("button.revoke")`)))
	p.wait("the dialog", `document.getElementById("conn-dialog").open`)
	if got := p.eval(`document.getElementById("conn-dialog-text").textContent`); !strings.HasPrefix(got, "Revoke the connection of bob to docs (issuer http://127.0.0.1:") {
		t.Fatalf("the dialog says %q", got)
	}
	if got := focusedName(t, p.ctx); got != "Cancel" {
		t.Fatalf("the dialog's focus is on %q, want Cancel", got)
	}
	p.do("cancel", chromedp.KeyEvent("\r"))
	p.wait("the dialog closed", `!document.getElementById("conn-dialog").open`)
	if n := connCount(t, g, "bob"); n != 1 {
		t.Fatalf("bob's connections after a cancel: %d", n)
	}
	p.do("ask again", chromedp.Click(chromedp.JSPath(brow+`.querySelector("button.revoke")`)))
	p.wait("the dialog", `document.getElementById("conn-dialog").open`)
	p.do("revoke", chromedp.Click(chromedp.ID("conn-revoke-do")))
	p.wait("the confirmation", `document.getElementById("status").textContent === "Revoked the connection of bob to docs: revoked at the provider and deleted here."`)
	p.wait("bob's row gone", brow+` === null && `+rows+`.length === 3`)
	if n := connCount(t, g, "bob"); n != 0 {
		t.Fatalf("bob's connections after the revocation: %d", n)
	}

	// An error's text (here naming an id with markup, deleted behind the
	// page's back while its confirmation is open) is text too.
	p.do("ask to revoke the broken one", chromedp.Click(chromedp.JSPath(hrow+`.querySelector("button.revoke")`)))
	p.wait("the dialog", `document.getElementById("conn-dialog").open`)
	if err := g.store.DeleteConnection(ctx, "acme", hostile.Caller, hostile.Server); err != nil {
		t.Fatal(err)
	}
	p.do("revoke", chromedp.Click(chromedp.ID("conn-revoke-do")))
	p.wait("the error", `document.getElementById("error").textContent !== ""`)
	if got, want := p.eval(`document.getElementById("error").textContent`), "no connection "+hostile.ID+" of tenant acme"; got != want {
		t.Fatalf("the error says %q, want %q", got, want)
	}
	if p.eval(`String(document.getElementById("conn-id-markup") !== null)`) != "false" {
		t.Fatal("the error's markup became an element")
	}
	// The next poll draws the two left (alice's, carol's); then the page
	// is still while its controls are read one by one.
	p.wait("the two left", rows+`.map(r => r.dataset.caller).sort().join() === "alice,carol@example.com"`)
	if unnamed := unnamedControls(t, p.ctx, "connections"); len(unnamed) > 0 {
		t.Fatalf("controls without an accessible name: %v", unnamed)
	}
	if got := problems.all(); len(got) > 0 {
		t.Fatalf("the console logged problems: %q", got)
	}
}

// connCount is how many connections caller has, by the admin API.
func connCount(t *testing.T, g *connGateway, caller string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.url+"/admin/v1/tenants/acme/connections", nil)
	req.Header.Set("Authorization", "Bearer "+g.adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var list admin.ConnectionList
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("connections: %s", body)
	}
	n := 0
	for _, c := range list.Connections {
		if c.Caller == caller {
			n++
		}
	}
	return n
}

var connShotRuns = map[string]int64{}

// connShots numbers this test's runs per store (a screenshot of the first
// run's page only).
func connShots(t *testing.T) int64 {
	connShotRuns[t.Name()]++
	return connShotRuns[t.Name()]
}
