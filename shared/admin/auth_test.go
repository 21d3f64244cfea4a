package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// routes lists every admin route with a path that exists in newEnv.
var routes = []struct{ method, path string }{
	{"GET", "/admin/v1/approvals"},
	{"GET", "/admin/v1/approvals/some-id"},
	{"POST", "/admin/v1/approvals/some-id/approve"},
	{"POST", "/admin/v1/approvals/some-id/deny"},
	{"GET", "/admin/v1/tenants"},
	{"POST", "/admin/v1/tenants"},
	{"GET", "/admin/v1/tenants/acme"},
	{"GET", "/admin/v1/tenants/acme/servers"},
	{"POST", "/admin/v1/tenants/acme/servers"},
	{"GET", "/admin/v1/tenants/acme/keys"},
	{"POST", "/admin/v1/tenants/acme/keys"},
	{"POST", "/admin/v1/tenants/acme/keys/some-id/revoke"},
	{"GET", "/admin/v1/tenants/acme/stops"},
	{"POST", "/admin/v1/tenants/acme/servers/payments/stop"},
	{"POST", "/admin/v1/tenants/acme/servers/payments/resume"},
	{"POST", "/admin/v1/tenants/acme/servers/payments/tools/transfer/stop"},
	{"POST", "/admin/v1/tenants/acme/servers/payments/tools/transfer/resume"},
	{"GET", "/admin/v1/tenants/acme/audit"},
	{"GET", "/admin/v1/tenants/acme/connections"},
	{"POST", "/admin/v1/tenants/acme/connections/some-id/revoke"},
	{"GET", "/admin/v1/no-such-route"},
}

func TestEveryRouteRefusesMissingAndTenantKeys(t *testing.T) {
	e := newEnv(t, "", nil)
	for _, rt := range routes {
		for name, key := range map[string]string{"missing": "", "tenant key": e.keys["agent-1"], "wrong admin key": admin.NewKey()} {
			var body admin.ErrorBody
			code := e.admin(rt.method, rt.path, key, `{}`, &body)
			if code != http.StatusUnauthorized || body.Error.Code != admin.CodeUnauthorized || body.CorrelationID == "" {
				t.Errorf("%s %s with %s: %d %+v; want 401 unauthorized", rt.method, rt.path, name, code, body)
			}
		}
		if code := e.admin(rt.method, rt.path, e.adminKey, `{}`, nil); code == http.StatusUnauthorized {
			t.Errorf("%s %s with the admin key: 401", rt.method, rt.path)
		}
	}
	// Nothing changed under the refused requests.
	if n := e.up.Calls("transfer"); n != 0 {
		t.Fatal(n)
	}
}

func TestAdminKeyNeverCallsTools(t *testing.T) {
	e := newEnv(t, "", nil)
	e.keys["admin"] = e.adminKey
	req, _ := http.NewRequest(http.MethodPost, e.gw.URL+"/v1/invoke",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`))
	req.Header.Set("Authorization", "Bearer "+e.adminKey)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("admin key at /v1/invoke = %d, want 401", resp.StatusCode)
	}
}

func TestNewNeedsExplicitAuth(t *testing.T) {
	m := memstore.New()
	base := admin.Options{}
	for name, o := range map[string]admin.Options{
		"none":       base,
		"short key":  with(base, func(o *admin.Options) { o.AdminKey = "short" }),
		"tenant key": with(base, func(o *admin.Options) { o.AdminKey = "aegis_abcd_0123456789012345678901234" }),
		"both": with(base, func(o *admin.Options) {
			o.AdminKey = admin.NewKey()
			o.TrustIAM = func(*http.Request) (string, bool) { return "arn", true }
		}),
	} {
		if _, err := admin.New(m, &o); err == nil {
			t.Errorf("New(%s) succeeded; want an error", name)
		}
	}
}

func with(o admin.Options, f func(*admin.Options)) admin.Options { f(&o); return o }

func TestTrustIAM(t *testing.T) {
	m := memstore.New()
	h, err := admin.New(m, &admin.Options{
		TrustIAM: func(r *http.Request) (string, bool) {
			p := r.Header.Get("X-Test-Principal") // stands in for the API Gateway request context
			return p, p != ""
		}})
	must(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for principal, want := range map[string]int{"": 401, "arn:aws:iam::123456789012:user/ops": 200} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/admin/v1/tenants", nil)
		if principal != "" {
			req.Header.Set("X-Test-Principal", principal)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("IAM principal %q: %d, want %d", principal, resp.StatusCode, want)
		}
	}
}
