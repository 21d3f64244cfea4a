package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/console"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestRemote: `aegis admin console` for a deployed stack. The deployed
// admin API (a real admin.Handler trusting IAM, whose stand-in identity
// is the signer's header) sees only signed requests without the browser's
// cookie, CSRF token or Authorization; the browser needs the one-time key
// and, on changes, the CSRF token.
func TestRemote(t *testing.T) {
	m := memstore.New()
	if err := m.PutTenant(context.Background(), registry.Tenant{ID: "acme", Tier: registry.TierFree, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []http.Header
	deployed, err := admin.New(m, &admin.Options{TrustIAM: func(r *http.Request) (string, bool) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		p := r.Header.Get("X-Test-Signature") // stands in for API Gateway's SigV4 check
		return "arn:aws:iam::123456789012:user/ops", p == "signed:"+r.Method+" "+r.URL.Path
	}})
	if err != nil {
		t.Fatal(err)
	}
	stack := httptest.NewServer(deployed)
	defer stack.Close()

	oneTime := admin.NewKey()
	rm, err := console.NewRemote(&console.RemoteOptions{Target: stack.URL, Key: oneTime, Logger: slog.New(slog.DiscardHandler),
		Sign: func(_ context.Context, r *http.Request, _ []byte) error {
			r.Header.Set("X-Test-Signature", "signed:"+r.Method+" "+r.URL.Path)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	local := httptest.NewServer(rm)
	defer local.Close()

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := c.Get(local.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/admin/v1/tenants"); code != http.StatusUnauthorized {
		t.Fatalf("before login: %d", code)
	}
	if resp, err := c.PostForm(local.URL+console.Prefix+"login", url.Values{"key": {"aegis-admin-not-it-000000000000000"}}); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %v %v", resp, err)
	}
	resp, err := c.PostForm(local.URL+console.Prefix+"login", url.Values{"key": {oneTime}})
	if err != nil || resp.StatusCode != http.StatusOK { // followed to the console page
		t.Fatalf("login: %v %v", resp, err)
	}
	resp.Body.Close()
	code, body := get("/admin/v1/tenants")
	var tl admin.TenantList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &tl) != nil || len(tl.Tenants) != 1 || tl.Tenants[0].ID != "acme" {
		t.Fatalf("tenants through the console: %d %s", code, body)
	}
	_, sess := get(console.Prefix + "session")
	var info console.Info
	if err := json.Unmarshal([]byte(sess), &info); err != nil {
		t.Fatal(err)
	}
	post := func(path, csrf string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, local.URL+path, strings.NewReader(`{"caller":"bot"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+oneTime)
		if csrf != "" {
			req.Header.Set(console.CSRFHeader, csrf)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	mu.Lock()
	before := len(seen)
	mu.Unlock()
	if code := post("/admin/v1/tenants/acme/keys", ""); code != http.StatusUnauthorized {
		t.Fatalf("a change without the CSRF token: %d", code)
	}
	mu.Lock()
	if len(seen) != before {
		t.Fatal("a refused change reached the deployed API")
	}
	mu.Unlock()
	if code := post("/admin/v1/tenants/acme/keys", info.CSRF); code != http.StatusCreated {
		t.Fatalf("a key through the console: %d", code)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range seen {
		if h.Get("Cookie") != "" || h.Get(console.CSRFHeader) != "" || h.Get("Authorization") != "" {
			t.Fatalf("the deployed API saw the browser's credentials: %v", h)
		}
	}
	if _, err := console.NewRemote(&console.RemoteOptions{Target: "http://gateway.example", Key: oneTime, Sign: func(context.Context, *http.Request, []byte) error { return nil }}); err == nil {
		t.Fatal("a plain-http remote target was accepted")
	}
}
