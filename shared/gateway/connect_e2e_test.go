package gateway_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/connecttest"
	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/audit"
	aegisauth "github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/config"
	connections "github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/credentials"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/seal"
)

// connWorld is a gateway whose tenant acme (callers alice, bob) and
// tenant other (caller carol) each have the server docs with auth: oauth
// on the protected upstream.
type connWorld struct {
	gw, issuer, secret string
	up                 *connecttest.Upstream
	store              backend.Backend
	keyring            seal.Keyring
	clock              *shiftClock
	keys               map[string]string // caller → API key
	admin              string            // the admin API's URL
	adminKey           string
}

// shiftClock is the broker's clock: real time, moved forward by tests.
type shiftClock struct {
	mu sync.Mutex
	d  time.Duration
}

func (c *shiftClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.d)
}

func (c *shiftClock) Add(d time.Duration) {
	c.mu.Lock()
	c.d += d
	c.mu.Unlock()
}

func newConnWorld(t *testing.T, b backend.Backend) *connWorld {
	t.Helper()
	ctx := context.Background()
	w := &connWorld{store: b, clock: &shiftClock{}, keys: map[string]string{}, secret: "docs-client-secret-" + rand.Text()}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.gw = "http://" + gl.Addr().String()
	var issuer string
	w.up = connecttest.StartUpstream(t, func() string { return issuer }, nil)
	issuer = connecttest.StartProvider(t, connecttest.Provider{Resource: w.up.URL, Redirect: w.gw + "/t/acme/connect/callback", Secret: w.secret})
	w.issuer = issuer
	client := &registry.OAuthClient{ClientID: "aegis-docs", ClientSecretRef: "env:DOCS_CLIENT_SECRET"}
	for _, tc := range []struct{ tenant, caller string }{{"acme", "alice"}, {"acme", "bob"}, {"other", "carol"}} {
		must(t, w.store.PutTenant(ctx, registry.Tenant{ID: tc.tenant, Tier: registry.TierGrowth}))
		must(t, w.store.PutServer(ctx, registry.Server{Tenant: tc.tenant, Name: "docs", URL: w.up.URL, Auth: registry.AuthOAuth, OAuth: client}))
		secret, k := aegisauth.NewKey(tc.tenant, tc.caller, time.Now())
		must(t, w.store.PutKey(ctx, k))
		w.keys[tc.caller] = secret
	}
	kek := make([]byte, 32)
	_, _ = rand.Read(kek)
	w.keyring, err = seal.NewLocal(kek)
	must(t, err)
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = 5 * time.Second
	hc := gateway.NewHTTPClient(true)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	broker, err := connections.New(connections.Options{
		Store: w.store, Keyring: w.keyring, Registry: w.store, Audit: w.store, PublicURL: w.gw, HTTP: hc, Local: true, Now: w.clock.Now, Logger: log,
		Secrets: credentials.New(credentials.Options{Local: true, Getenv: func(k string) string {
			if k == "DOCS_CLIENT_SECRET" {
				return w.secret
			}
			return ""
		}}),
	})
	must(t, err)
	g, err := gateway.New(w.store, &gateway.Options{Settings: s, Logger: log, HTTP: hc, Connections: broker})
	must(t, err)
	w.adminKey = admin.NewKey()
	ah, err := admin.New(w.store, &admin.Options{AdminKey: w.adminKey, LocalMode: true, Logger: log, Connections: g.Connections()})
	must(t, err)
	as := httptest.NewServer(ah)
	t.Cleanup(as.Close)
	w.admin = as.URL
	hs := &httptest.Server{Listener: gl, Config: &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}}
	hs.Start()
	t.Cleanup(hs.Close)
	return w
}

// invoke sends a tools/call of tool on /t/TENANT/v1/invoke as caller and
// returns the answer's body.
func (w *connWorld) invoke(t *testing.T, tenant, caller, tool string) string {
	t.Helper()
	return invokeTool(t, w.gw, tenant, w.keys[caller], tool)
}

// invokeTool sends a tools/call of tool, without arguments, on
// gw/t/TENANT/v1/invoke with bearer and returns the answer's body.
func invokeTool(t *testing.T, gw, tenant, bearer, tool string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, gw+"/t/"+tenant+"/v1/invoke", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// adminDo calls the admin API and returns the answer's body.
func (w *connWorld) adminDo(t *testing.T, method, path string) string {
	t.Helper()
	req, _ := http.NewRequest(method, w.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+w.adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// refreshAt tries refresh at the provider's token endpoint as aegis's
// client and returns the status.
func (w *connWorld) refreshAt(t *testing.T, refresh string) int {
	t.Helper()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "resource": {w.up.URL}}
	req, _ := http.NewRequest(http.MethodPost, w.issuer+"/token", strings.NewReader(form.Encode()))
	req.SetBasicAuth("aegis-docs", w.secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// mcpCall opens a 2025-11-25 session on /t/acme/mcp as caller with the
// client capabilities caps and sends a tools/call of tool; it returns the
// answer (a JSON body, or the data line of an event stream).
func (w *connWorld) mcpCall(t *testing.T, caller, caps, tool string) string {
	t.Helper()
	post := func(session, body string) (http.Header, string) {
		req, _ := http.NewRequest(http.MethodPost, w.gw+"/t/acme/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+w.keys[caller])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		out := string(b)
		if i := strings.Index(out, "data: "); i >= 0 {
			out = strings.TrimSpace(strings.SplitN(out[i+6:], "\n", 2)[0])
		}
		return resp.Header, out
	}
	h, b := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`)
	sid := h.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %s", b)
	}
	_, b = post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tool+`","arguments":{}}}`)
	return b
}

// linkOf reads the CONNECTION_REQUIRED answer's link, checking its shape.
func linkOf(t *testing.T, answer string) string {
	t.Helper()
	var a struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				URL    string `json:"url"`
				Server string `json:"server"`
				Aegis  struct{ Code string }
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(answer), &a); err != nil || a.Error.Code != -32065 || a.Error.Data.Aegis.Code != "CONNECTION_REQUIRED" || a.Error.Data.Server != "docs" {
		t.Fatalf("answer %s; want -32065 CONNECTION_REQUIRED for docs", answer)
	}
	if a.Error.Data.URL == "" || !strings.Contains(a.Error.Message, a.Error.Data.URL) {
		t.Fatalf("the link is not in the message and the data: %s", answer)
	}
	return a.Error.Data.URL
}

// TestConnectionsEndToEnd: a caller without a connection is answered
// with a link; a person follows it through a real OpenID provider's
// login and consent (npm oidc-provider); the identical call then
// succeeds, reaching a Go SDK server behind the SDK's bearer-token
// middleware with that caller's own token, which never reaches the agent.
// Another caller, another tenant, a replayed or forged state, a callback
// from another browser and a swapped redirect URI get nothing; a token
// is refreshed with rotation before it expires, and a refresh that fails
// marks the connection broken and asks again.
func TestConnectionsEndToEnd(t *testing.T) {
	t.Run("memstore", func(t *testing.T) { testConnections(t, newConnWorld(t, memstore.New())) })
	t.Run("dynamodb", func(t *testing.T) {
		testConnections(t, newConnWorld(t, dynamotest.Start(t).Store(t, dynamo.Options{})))
	})
}

func testConnections(t *testing.T, w *connWorld) {

	// Alice, not connected: the link, and nothing sent upstream.
	link := linkOf(t, w.invoke(t, "acme", "alice", "docs.whoami"))
	if _, calls := w.up.Seen(); calls != 0 {
		t.Fatalf("the upstream got %d MCP requests before any connection", calls)
	}
	if !strings.HasPrefix(link, w.gw+"/t/acme/connect/start?state=") {
		t.Fatalf("link %q", link)
	}
	// On /mcp: a 2025-11-25 client that declared elicitation.url gets a
	// URL elicitation (-32042); one that did not gets -32065.
	for _, tc := range []struct {
		caps string
		want int
	}{{`{"elicitation":{"url":{}}}`, -32042}, {`{"elicitation":{}}`, -32065}} {
		ans := w.mcpCall(t, "alice", tc.caps, "docs.whoami")
		var a struct {
			Error struct {
				Code int `json:"code"`
				Data struct {
					Elicitations []struct{ Mode, ElicitationID, URL string } `json:"elicitations"`
					URL          string                                      `json:"url"`
					Aegis        struct{ Layer, Code string }                `json:"aegis"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(ans), &a); err != nil || a.Error.Code != tc.want || a.Error.Data.Aegis.Code != "CONNECTION_REQUIRED" || a.Error.Data.Aegis.Layer != "gateway" {
			t.Fatalf("/mcp with capabilities %s: %s; want %d", tc.caps, ans, tc.want)
		}
		if tc.want == -32042 {
			e := a.Error.Data.Elicitations
			if len(e) != 1 || e[0].Mode != "url" || e[0].ElicitationID == "" || !strings.HasPrefix(e[0].URL, w.gw+"/t/acme/connect/start?state=") {
				t.Fatalf("elicitations %+v", e)
			}
		} else if !strings.HasPrefix(a.Error.Data.URL, w.gw+"/t/acme/connect/start?state=") {
			t.Fatalf("-32065 on /mcp without its link: %s", ans)
		}
	}

	// The redirect URI is the gateway's own, whatever Host the link is
	// opened with.
	req, _ := http.NewRequest(http.MethodGet, link, nil)
	req.Host = "evil.example"
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	must(t, err)
	resp.Body.Close()
	authz, _ := url.Parse(resp.Header.Get("Location"))
	q := authz.Query()
	if resp.StatusCode != http.StatusFound || q.Get("redirect_uri") != w.gw+"/t/acme/connect/callback" || q.Get("code_challenge_method") != "S256" ||
		q.Get("code_challenge") == "" || q.Get("resource") != w.up.URL || q.Get("client_id") != "aegis-docs" || !strings.HasPrefix(authz.String(), w.issuer) {
		t.Fatalf("the link redirected %d to %s", resp.StatusCode, authz)
	}
	// Single use: that opening used the link.
	if st, _, _ := connecttest.Consent(t, connecttest.Browser(nil), link, "alice", nil); st != http.StatusGone {
		t.Fatalf("a second opening of the link = %d; want 410", st)
	}

	// Redirect URI swap: the provider refuses to send a code elsewhere.
	link = linkOf(t, w.invoke(t, "acme", "alice", "docs.whoami"))
	attacker := "http://127.0.0.1:1/steal"
	b := connecttest.Browser(nil)
	_, _, authzURL := connecttest.Consent(t, b, link, "alice", func(u string) bool { return strings.HasPrefix(u, w.issuer) })
	swapped, _ := url.Parse(authzURL)
	sq := swapped.Query()
	sq.Set("redirect_uri", attacker)
	swapped.RawQuery = sq.Encode()
	_, page, stolen := connecttest.Consent(t, b, swapped.String(), "alice", func(u string) bool { return strings.HasPrefix(u, attacker) })
	if stolen != "" || !strings.Contains(page, "redirect_uri") {
		t.Fatalf("with a swapped redirect_uri the provider redirected to %q (page %.200s)", stolen, page)
	}

	// Consent in a browser: connected.
	link = linkOf(t, w.invoke(t, "acme", "alice", "docs.whoami"))
	b = connecttest.Browser(nil)
	var callback string
	st, page, _ := connecttest.Consent(t, b, link, "alice", func(u string) bool {
		if strings.HasPrefix(u, w.gw+"/t/acme/connect/callback") {
			callback = u
		}
		return false
	})
	if st != http.StatusOK || !strings.Contains(page, "Connected to docs") {
		t.Fatalf("consent ended %d: %.300s", st, page)
	}
	// The identical call now runs with alice's own token.
	got := w.invoke(t, "acme", "alice", "docs.whoami")
	if !strings.Contains(got, "subject=alice") {
		t.Fatalf("after consent: %s", got)
	}
	tokens, _ := w.up.Seen()
	if len(tokens) == 0 {
		t.Fatal("the upstream saw no token")
	}
	tok := tokens[len(tokens)-1]
	// A token echoed by the upstream is scrubbed from what the agent gets.
	leak := w.invoke(t, "acme", "alice", "docs.leak")
	if !strings.Contains(leak, "raw ") || strings.Contains(leak, tok) || strings.Contains(leak, base64.StdEncoding.EncodeToString([]byte(tok))) {
		t.Fatalf("the upstream's echo of the token reached the agent: %.400s", leak)
	}

	// Replayed callback and forged state: nothing.
	if callback == "" {
		t.Fatal("no callback seen")
	}
	resp, err = b.Get(callback)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("replayed callback = %d; want 410", resp.StatusCode)
	}
	resp, err = b.Get(w.gw + "/t/acme/connect/callback?code=x&state=" + strings.Repeat("A", 43))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Fatalf("forged state = %d; want 410", resp.StatusCode)
	}

	// Bob (same tenant) and carol (another tenant) are not alice.
	for _, c := range []struct{ tenant, caller string }{{"acme", "bob"}, {"other", "carol"}} {
		before, _ := w.up.Seen()
		linkOf(t, w.invoke(t, c.tenant, c.caller, "docs.whoami"))
		if after, _ := w.up.Seen(); len(after) != len(before) {
			t.Fatalf("%s's call reached the upstream with a token", c.caller)
		}
	}

	// Bob's link, completed in another browser than the one that opened
	// it: refused, and bob stays unconnected.
	link = linkOf(t, w.invoke(t, "acme", "bob", "docs.whoami"))
	_, _, cb := connecttest.Consent(t, connecttest.Browser(nil), link, "mallory", func(u string) bool { return strings.HasPrefix(u, w.gw+"/t/acme/connect/callback") })
	resp, err = connecttest.Browser(nil).Get(cb)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("callback from another browser = %d; want 403", resp.StatusCode)
	}
	linkOf(t, w.invoke(t, "acme", "bob", "docs.whoami"))

	// Bob connects in his own browser, and an operator revokes it: at the
	// provider (his refresh token no longer works there) and here (he is
	// asked again).
	link = linkOf(t, w.invoke(t, "acme", "bob", "docs.whoami"))
	if st, page, _ := connecttest.Consent(t, connecttest.Browser(nil), link, "bob", nil); st != http.StatusOK || !strings.Contains(page, "Connected to docs") {
		t.Fatalf("bob's consent ended %d: %.200s", st, page)
	}
	if got := w.invoke(t, "acme", "bob", "docs.whoami"); !strings.Contains(got, "subject=bob") {
		t.Fatalf("bob after consent: %s", got)
	}
	bc, err := w.store.Connection(context.Background(), "acme", "bob", "docs")
	must(t, err)
	plain, err := seal.Open(context.Background(), w.keyring, bc.Sealed, seal.Bind{"tenant": "acme", "caller": "bob", "server": "docs", "connection": bc.ID})
	must(t, err)
	var bobTokens struct {
		Refresh string `json:"refresh_token"`
	}
	must(t, json.Unmarshal(plain, &bobTokens))
	list := w.adminDo(t, http.MethodGet, "/admin/v1/tenants/acme/connections")
	if !strings.Contains(list, `"caller":"bob"`) || !strings.Contains(list, `"caller":"alice"`) || strings.Contains(list, "sealed") || strings.Contains(list, bobTokens.Refresh) {
		t.Fatalf("connections list: %s", list)
	}
	if rv := w.adminDo(t, http.MethodPost, "/admin/v1/tenants/acme/connections/"+bc.ID+"/revoke"); !strings.Contains(rv, `"revoked_at_provider":true`) {
		t.Fatalf("revoke: %s", rv)
	}
	if st := w.refreshAt(t, bobTokens.Refresh); st == http.StatusOK {
		t.Fatal("bob's refresh token still works at the provider after the revocation")
	}
	linkOf(t, w.invoke(t, "acme", "bob", "docs.whoami"))
	if rv := w.adminDo(t, http.MethodPost, "/admin/v1/tenants/other/connections/"+bc.ID+"/revoke"); !strings.Contains(rv, "not_found") {
		t.Fatalf("revoking another tenant's connection id: %s", rv)
	}

	// The stored tokens are sealed: no token in the record.
	c, err := w.store.Connection(context.Background(), "acme", "alice", "docs")
	must(t, err)
	if strings.Contains(string(c.Sealed), tok) || c.Status != connections.StatusActive || c.Version != 1 {
		t.Fatalf("stored connection %+v", c)
	}
	first := c

	// Two hours on: the access token is refreshed (rotated) first, once
	// for eight calls at once (a provider that rotates refresh tokens
	// revokes the grant when one is used twice).
	w.clock.Add(2 * time.Hour)
	var wg sync.WaitGroup
	answers := make([]string, 8)
	for i := range answers {
		wg.Go(func() { answers[i] = w.invoke(t, "acme", "alice", "docs.whoami") })
	}
	wg.Wait()
	for _, got := range answers {
		if !strings.Contains(got, "subject=alice") {
			t.Fatalf("after expiry: %s", got)
		}
	}
	c, err = w.store.Connection(context.Background(), "acme", "alice", "docs")
	must(t, err)
	if c.Version != 2 || c.Status != connections.StatusActive || string(c.Sealed) == string(first.Sealed) {
		t.Fatalf("after the refresh the connection is %+v; want version 2 with new tokens", c)
	}
	// A refresh that fails (the first, rotated-away refresh token put
	// back): broken, asked again, and nothing else is tried.
	old := first
	old.Version = c.Version + 1
	must(t, w.store.PutConnection(context.Background(), old))
	w.clock.Add(2 * time.Hour)
	before, _ := w.up.Seen()
	ans := w.invoke(t, "acme", "alice", "docs.whoami")
	linkOf(t, ans)
	if !strings.Contains(ans, "stopped working") {
		t.Fatalf("after a failed refresh: %s", ans)
	}
	if after, _ := w.up.Seen(); len(after) != len(before) {
		t.Fatal("after a failed refresh the upstream was sent a token")
	}
	c, _ = w.store.Connection(context.Background(), "acme", "alice", "docs")
	if c.Status != connections.StatusBroken {
		t.Fatalf("after a failed refresh the connection is %s", c.Status)
	}

	// The trail: every connect, refresh and failure, and each call's
	// record naming the connection it used; never a token.
	recs, _, err := w.store.Query(context.Background(), audit.Query{Tenant: "acme", From: time.Now().Add(-time.Hour), To: time.Now().Add(6 * time.Hour), Limit: 1000})
	must(t, err)
	count := map[string]int{}
	all, _ := json.Marshal(recs)
	seenTokens, _ := w.up.Seen()
	for _, tk := range seenTokens {
		if strings.Contains(string(all), tk) {
			t.Fatal("a token is in the audit trail")
		}
	}
	for _, r := range recs {
		if err := r.Validate(); err != nil {
			t.Errorf("record %+v: %v", r, err)
		}
		key := r.Method + " " + r.Caller + " " + string(r.Outcome)
		if r.Connection == first.ID {
			key += " (alice's connection)"
		}
		count[key]++
	}
	for _, want := range []string{
		"connection.connect alice allowed (alice's connection)",
		"connection.refresh alice allowed (alice's connection)",
		"connection.failure alice error (alice's connection)",
		"connection.failure bob error",
		"tools/call alice allowed (alice's connection)",
		"tools/call bob refused",
		"connection.revoke bob allowed",
	} {
		if count[want] == 0 {
			t.Errorf("no record %q in %v", want, count)
		}
	}
}
