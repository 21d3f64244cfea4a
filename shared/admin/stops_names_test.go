package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// collided is a gateway and admin API over one embedded store whose
// tenant has two servers, a and b, that both list echo: the aggregate /mcp
// exposes them as a.echo and b.echo (issue 16, item 10).
type collided struct {
	t        *testing.T
	gw, adm  *httptest.Server
	a, b     *demo.Server
	key      string
	adminKey string
}

func newCollided(t *testing.T, withCatalog bool) *collided {
	t.Helper()
	c := &collided{t: t, adminKey: admin.NewKey()}
	ctx := context.Background()
	m := memstore.New()
	now := time.Now().UTC()
	must(t, m.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: now}))
	for _, name := range []string{"a", "b"} {
		up, err := demo.Start("127.0.0.1:0")
		must(t, err)
		t.Cleanup(func() { _ = up.Close() })
		if name == "a" {
			c.a = up
		} else {
			c.b = up
		}
		must(t, m.PutServer(ctx, registry.Server{Tenant: "acme", Name: name, URL: up.URL, Created: now}))
	}
	secret, rec := auth.NewKey("acme", "bot", now)
	must(t, m.PutKey(ctx, rec))
	c.key = secret
	s := config.Defaults()
	s.LocalMode, s.KillSwitchRefresh = true, 0 // every decision reads the stops
	gw, err := gateway.New(m, &gateway.Options{Settings: s})
	must(t, err)
	o := &admin.Options{AdminKey: c.adminKey, LocalMode: true}
	if withCatalog {
		o.Catalog = gw.Catalog()
	}
	adm, err := admin.New(m, o)
	must(t, err)
	c.gw, c.adm = httptest.NewServer(gw), httptest.NewServer(adm)
	t.Cleanup(c.gw.Close)
	t.Cleanup(c.adm.Close)
	return c
}

// call calls tool through the aggregate /mcp... path (/v1/invoke is the
// same namespace) and returns the JSON-RPC error code, 0 for a result.
func (c *collided) call(tool string) int {
	c.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"message":"hi"}}}`
	req, _ := http.NewRequest(http.MethodPost, c.gw.URL+"/v1/invoke", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(c.t, err)
	defer resp.Body.Close()
	var a answer
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &a) != nil {
		c.t.Fatalf("tools/call %s: HTTP %d %s", tool, resp.StatusCode, b)
	}
	if a.Error != nil {
		return a.Error.Code
	}
	return 0
}

// admin posts body to the admin path and returns the status and the raw
// answer.
func (c *collided) admin(path, body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.adm.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.adminKey)
	resp, err := http.DefaultClient.Do(req)
	must(c.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStopExposedName(t *testing.T) {
	const base = "/admin/v1/tenants/acme"
	for _, tc := range []struct {
		name   string
		stop   string // path of the stop
		resume string // path of the resume
	}{
		{"exposed name, no server", base + "/tools/a.echo/stop", base + "/tools/a.echo/resume"},
		{"exposed name under its server", base + "/servers/a/tools/a.echo/stop", base + "/servers/a/tools/a.echo/resume"},
		{"upstream name under its server", base + "/servers/a/tools/echo/stop", base + "/servers/a/tools/echo/resume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCollided(t, true)
			if got := c.call("a.echo"); got != 0 {
				t.Fatalf("a.echo before the stop = %d", got)
			}
			status, body := c.admin(tc.stop, `{"reason":"incident"}`)
			var ans admin.StopAnswer
			if status != 200 || json.Unmarshal([]byte(body), &ans) != nil || !ans.Stopped || ans.Stop.Server != "a" || ans.Stop.Tool != "echo" {
				t.Fatalf("stop = %d %s; want 200 with server a, tool echo", status, body)
			}
			if got := c.call("a.echo"); got != -32062 {
				t.Fatalf("a.echo after its stop = %d, want -32062", got)
			}
			if got := c.call("b.echo"); got != 0 {
				t.Fatalf("b.echo after a.echo's stop = %d, want a result", got)
			}
			if c.a.Calls("echo") != 1 {
				t.Fatalf("server a ran echo %d times, want 1 (before the stop)", c.a.Calls("echo"))
			}
			if status, body := c.admin(tc.resume, ``); status != 200 {
				t.Fatalf("resume = %d %s", status, body)
			}
			if got := c.call("a.echo"); got != 0 {
				t.Fatalf("a.echo after resume = %d", got)
			}
		})
	}
}

func TestStopRefusesUnknownNames(t *testing.T) {
	const base = "/admin/v1/tenants/acme"
	c := newCollided(t, true)
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             []string // in the message
	}{
		{"letter case, aggregate", base + "/tools/Echo/stop", ``, 404, []string{`no tool \"Echo\"`, `\"a.echo\"`, `\"b.echo\"`, "unlisted"}},
		{"letter case, on a server", base + "/servers/a/tools/Echo/stop", ``, 404, []string{`lists no tool \"Echo\"`, `did you mean: \"echo\"`}},
		{"typo", base + "/tools/a.ecoh/stop", ``, 404, []string{`\"a.echo\"`}},
		{"nothing near", base + "/tools/rm-rf/stop", ``, 404, []string{`no tool \"rm-rf\"`}},
		{"a tool of the other server under a", base + "/servers/a/tools/b.echo/stop", ``, 404, []string{`lists no tool \"b.echo\"`}},
		{"collided upstream name", base + "/tools/echo/stop", ``, 409, []string{"a.echo, b.echo"}},
		{"unknown server", base + "/servers/c/tools/echo/stop", ``, 404, []string{"no server c"}},
		{"unlisted needs a server", base + "/tools/future/stop", `{"unlisted":true}`, 400, []string{"unlisted"}},
		{"resume of a name that matches nothing", base + "/tools/Echo/resume", ``, 404, []string{`\"a.echo\"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := c.admin(tc.path, tc.body)
			if status != tc.status {
				t.Fatalf("%s = %d %s, want %d", tc.path, status, body, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("%s: answer %s lacks %s", tc.path, body, w)
				}
			}
		})
	}
	// Nothing was stopped by the refused requests.
	req, _ := http.NewRequest(http.MethodGet, c.adm.URL+base+"/stops", nil)
	req.Header.Set("Authorization", "Bearer "+c.adminKey)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	var sl admin.StopList
	_ = json.NewDecoder(resp.Body).Decode(&sl)
	resp.Body.Close()
	if len(sl.Stops) != 0 {
		t.Fatalf("refused stops were stored: %+v", sl.Stops)
	}
}

func TestStopUnlisted(t *testing.T) {
	const base = "/admin/v1/tenants/acme"
	for _, withCatalog := range []bool{true, false} {
		c := newCollided(t, withCatalog)
		// Without the flag: refused (404 with a catalog; 400 naming the flag without one).
		status, body := c.admin(base+"/servers/a/tools/future/stop", ``)
		if want := map[bool]int{true: 404, false: 400}[withCatalog]; status != want || !strings.Contains(body, "unlisted") {
			t.Fatalf("catalog %v: unlisted tool without the flag = %d %s, want %d naming the flag", withCatalog, status, body, want)
		}
		status, body = c.admin(base+"/servers/a/tools/future/stop", `{"unlisted":true}`)
		var ans admin.StopAnswer
		if status != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.Stop.Server != "a" || ans.Stop.Tool != "future" {
			t.Fatalf("catalog %v: --unlisted stop = %d %s", withCatalog, status, body)
		}
		// A resume of the stored stop needs no catalog and no flag.
		if status, body := c.admin(base+"/servers/a/tools/future/resume", ``); status != 200 {
			t.Fatalf("catalog %v: resume of the unlisted stop = %d %s", withCatalog, status, body)
		}
	}
}
