package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/console"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// consoleClient logs in to e's console with the admin key and returns a
// client holding the session cookie, and the session's CSRF token.
func consoleClient(t *testing.T, e *env) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(e.adm.URL+console.Prefix+"login", url.Values{"key": {e.adminKey}})
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	resp, err = c.Get(e.adm.URL + console.Prefix + "session")
	must(t, err)
	defer resp.Body.Close()
	var info console.Info
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil || info.CSRF == "" {
		t.Fatalf("session: %d %v", resp.StatusCode, err)
	}
	return c, info.CSRF
}

func consoleDo(t *testing.T, c *http.Client, method, u, csrf string, hdr map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(`{}`))
	if csrf != "" {
		req.Header.Set(console.CSRFHeader, csrf)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestConsoleSessionOpensEveryRoute: the console's session cookie is the
// admin key's equal on every route, and every change needs the session's
// CSRF token from this site: without it, with another token, or from
// another site, every POST is refused before the route runs.
func TestConsoleSessionOpensEveryRoute(t *testing.T) {
	e := newEnv(t, "", nil)
	c, csrf := consoleClient(t, e)
	for _, rt := range routes {
		u := e.adm.URL + rt.path
		if rt.method == http.MethodGet {
			if code, body := consoleDo(t, c, rt.method, u, "", nil); code == http.StatusUnauthorized {
				t.Errorf("%s %s with the session: 401 %s", rt.method, rt.path, body)
			}
			continue
		}
		for name, tc := range map[string]struct {
			csrf string
			hdr  map[string]string
		}{
			"no token":                 {"", nil},
			"another token":            {strings.Repeat("A", len(csrf)), nil},
			"a cut token":              {csrf[:len(csrf)-1], nil},
			"cross-site (Fetch)":       {csrf, map[string]string{"Sec-Fetch-Site": "cross-site"}},
			"same-site, other origin":  {csrf, map[string]string{"Sec-Fetch-Site": "same-site"}},
			"cross-site (Origin only)": {csrf, map[string]string{"Origin": "http://evil.example"}},
		} {
			code, body := consoleDo(t, c, rt.method, u, tc.csrf, tc.hdr)
			var eb admin.ErrorBody
			if code != http.StatusUnauthorized || json.Unmarshal([]byte(body), &eb) != nil || eb.Error.Code != admin.CodeUnauthorized {
				t.Errorf("%s %s with %s: %d %s; want 401", rt.method, rt.path, name, code, body)
			}
		}
		if code, body := consoleDo(t, c, rt.method, u, csrf, map[string]string{"Sec-Fetch-Site": "same-origin"}); code == http.StatusUnauthorized {
			t.Errorf("%s %s with the token: 401 %s", rt.method, rt.path, body)
		}
	}
	if n := e.up.Calls("transfer"); n != 0 {
		t.Fatal(n)
	}

	// A decision through the console names the console as the principal.
	id := e.held(e.call("agent-1", `{"to":"acct-9","amount":1}`), "pending")
	code, body := consoleDo(t, c, http.MethodPost, e.adm.URL+"/admin/v1/approvals/"+id+"/approve", csrf, nil)
	var it admin.ApprovalItem
	if code != http.StatusOK || json.Unmarshal([]byte(body), &it) != nil || it.DecidedBy != "admin-key (console)" {
		t.Fatalf("approve through the console: %d %s", code, body)
	}

	// After logout the cookie opens nothing.
	if code, _ := consoleDo(t, c, http.MethodPost, e.adm.URL+console.Prefix+"logout", "", nil); code != http.StatusForbidden {
		t.Fatalf("logout without the token: %d, want 403", code)
	}
	if code, _ := consoleDo(t, c, http.MethodPost, e.adm.URL+console.Prefix+"logout", csrf, nil); code != http.StatusNoContent {
		t.Fatalf("logout: %d", code)
	}
	// The jar dropped the cookie (MaxAge -1): send the old one by hand.
	old, _ := consoleClient(t, e)
	u, _ := url.Parse(e.adm.URL + "/admin/")
	ck := old.Jar.Cookies(u)
	if code, _ := consoleDo(t, old, http.MethodPost, e.adm.URL+console.Prefix+"logout", "x", nil); code != http.StatusForbidden {
		t.Fatalf("logout with a wrong token: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, e.adm.URL+"/admin/v1/tenants", nil)
	req.AddCookie(ck[0])
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a live session: %d", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, e.adm.URL+console.Prefix+"logout", nil)
	req.AddCookie(ck[0])
	req.Header.Set(console.CSRFHeader, sessionCSRF(t, old, e))
	resp, err = http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	req, _ = http.NewRequest(http.MethodGet, e.adm.URL+"/admin/v1/tenants", nil)
	req.AddCookie(ck[0])
	resp, err = http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the cookie of a session logged out: %d, want 401", resp.StatusCode)
	}
}

func sessionCSRF(t *testing.T, c *http.Client, e *env) string {
	t.Helper()
	resp, err := c.Get(e.adm.URL + console.Prefix + "session")
	must(t, err)
	defer resp.Body.Close()
	var info console.Info
	must(t, json.NewDecoder(resp.Body).Decode(&info))
	return info.CSRF
}

// TestConsoleOnlyWithAnAdminKey: an admin API that trusts IAM (the
// AdminFunction) serves no console: its paths need an IAM identity like
// every other.
func TestConsoleOnlyWithAnAdminKey(t *testing.T) {
	h, err := admin.New(memstore.New(), &admin.Options{TrustIAM: func(*http.Request) (string, bool) { return "", false }})
	must(t, err)
	for _, p := range []string{console.Prefix, console.Prefix + "login", console.Prefix + "console.js"} {
		req, _ := http.NewRequest(http.MethodGet, p, nil)
		rec := &recorder{h: http.Header{}}
		h.ServeHTTP(rec, req)
		if rec.code != http.StatusUnauthorized {
			t.Errorf("GET %s with IAM trust and no identity: %d, want 401", p, rec.code)
		}
	}
}

type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(c int)           { r.code = c }

// TestUpstreams: GET .../upstreams shows each server's circuit and its
// live leases as the store holds them.
func TestUpstreams(t *testing.T) {
	e := newEnv(t, "", nil)
	get := func() admin.UpstreamList {
		t.Helper()
		var l admin.UpstreamList
		if code := e.admin(http.MethodGet, "/admin/v1/tenants/acme/upstreams", e.adminKey, "", &l); code != http.StatusOK {
			t.Fatalf("upstreams: %d", code)
		}
		return l
	}
	l := get()
	if len(l.Upstreams) != 1 || l.Upstreams[0] != (admin.UpstreamState{Server: "payments", Circuit: "closed"}) {
		t.Fatalf("a fresh server: %+v", l)
	}
	ctx, now := context.Background(), e.clock.Now()
	key := breaker.Key("acme", "payments")
	must(t, e.store.PutCircuit(ctx, key, breaker.Circuit{OpenUntil: now.Add(10 * time.Second), Failures: 5}))
	for _, h := range []string{"a", "b"} {
		if ok, err := e.store.AcquireLease(ctx, key, h, 10, now, now.Add(time.Minute)); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if ok, err := e.store.AcquireLease(ctx, key, "dead", 10, now.Add(-2*time.Minute), now.Add(-time.Minute)); !ok || err != nil {
		t.Fatal(ok, err)
	}
	got := get().Upstreams[0]
	if want := (admin.UpstreamState{Server: "payments", Circuit: "open", Failures: 5, OpenUntil: now.Add(10 * time.Second), InFlight: 2}); got != want {
		t.Fatalf("open with two live leases:\n got %+v\nwant %+v", got, want)
	}
	e.clock.Advance(11 * time.Second)
	if got := get().Upstreams[0]; got.Circuit != "half-open" || !got.OpenUntil.IsZero() {
		t.Fatalf("after the cooldown: %+v", got)
	}
	if code := e.admin(http.MethodGet, "/admin/v1/tenants/nobody/upstreams", e.adminKey, "", nil); code != http.StatusNotFound {
		t.Fatalf("unknown tenant: %d", code)
	}
}
