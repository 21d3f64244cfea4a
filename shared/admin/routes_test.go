package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/registry"
)

func TestErrors(t *testing.T) {
	e := newEnv(t, "", nil)
	k := e.adminKey
	for _, c := range []struct {
		method, path, body string
		status             int
		code, field        string
	}{
		{"POST", "/admin/v1/approvals/00000000-0000-4000-8000-000000000000/approve", "", 404, admin.CodeNotFound, ""},
		{"GET", "/admin/v1/approvals/nope", "", 404, admin.CodeNotFound, ""},
		{"GET", "/admin/v1/approvals?status=maybe", "", 400, admin.CodeBadRequest, "status"},
		{"POST", "/admin/v1/approvals/x/approve", `{"reason":5}`, 400, admin.CodeBadRequest, "reason"},
		{"POST", "/admin/v1/approvals/x/approve", `{"why":"x"}`, 400, admin.CodeBadRequest, "why"},
		{"POST", "/admin/v1/tenants", `{"id":"Bad Id"}`, 400, admin.CodeBadRequest, "id"},
		{"POST", "/admin/v1/tenants", `{"id":"acme"}`, 409, admin.CodeConflict, "id"},
		{"POST", "/admin/v1/tenants", `{"id":"n1","tier":"gold"}`, 400, admin.CodeBadRequest, "tier"},
		{"POST", "/admin/v1/tenants", `{"id":"n1","webhook_url":"https://hooks.example.com/x"}`, 400, admin.CodeBadRequest, "webhook_secret_ref"},
		{"POST", "/admin/v1/tenants/acme/servers", `{"name":"s","url":"http://169.254.169.254/"}`, 400, admin.CodeBadRequest, "url"},
		{"POST", "/admin/v1/tenants/acme/servers", `{"name":"s","url":"ftp://x"}`, 400, admin.CodeBadRequest, "url"},
		{"POST", "/admin/v1/tenants/acme/servers", `{"name":"s","url":"https://mcp.example.com","credential":{"header":"X-Key","ref":"plain-secret"}}`, 400, admin.CodeBadRequest, "credential.ref"},
		{"POST", "/admin/v1/tenants/nope/servers", `{"name":"s","url":"https://mcp.example.com"}`, 404, admin.CodeNotFound, ""},
		{"POST", "/admin/v1/tenants/acme/servers", `{"name":"s","url":"https://mcp.example.com","auth":"oauth"}`, 400, admin.CodeBadRequest, "oauth"},
		{"POST", "/admin/v1/tenants/acme/servers", `{"name":"s","url":"https://mcp.example.com","auth":"oauth","oauth":{"client_id":"gw","client_secret_ref":"plain"}}`, 400, admin.CodeBadRequest, "oauth.client_secret_ref"},
		{"POST", "/admin/v1/tenants/acme/servers", `{"name":"s","url":"https://mcp.example.com","auth":"oauth","oauth":{"client_id":"gw"},"credential":{"header":"X-Key","ref":"env:K"}}`, 400, admin.CodeBadRequest, "credential"},
		{"POST", "/admin/v1/tenants/acme/servers", `{"name":"s","url":"https://mcp.example.com","auth":"kerberos"}`, 400, admin.CodeBadRequest, "auth"},
		{"POST", "/admin/v1/tenants/acme/keys", `{}`, 400, admin.CodeBadRequest, "caller"},
		{"POST", "/admin/v1/tenants/acme/keys/nokey/revoke", ``, 404, admin.CodeNotFound, ""},
		{"POST", "/admin/v1/tenants/acme/servers/nosuch/stop", ``, 404, admin.CodeNotFound, ""},
		{"GET", "/admin/v1/tenants/acme/audit?from=yesterday", ``, 400, admin.CodeBadRequest, "from"},
		{"GET", "/admin/v1/tenants/acme/audit?cursor=not*base64", ``, 400, admin.CodeBadRequest, "cursor"},
		{"POST", "/admin/v1/tenants", `{"id":"n1","new_tools":"review"}`, 400, admin.CodeBadRequest, "new_tools"},
		{"PUT", "/admin/v1/tenants/acme/new-tools", `{"new_tools":"review"}`, 400, admin.CodeBadRequest, "new_tools"},
		{"PUT", "/admin/v1/tenants/acme/new-tools", `{}`, 400, admin.CodeBadRequest, "new_tools"},
		{"PUT", "/admin/v1/tenants/nope/new-tools", `{"new_tools":"hold"}`, 404, admin.CodeNotFound, ""},
		{"GET", "/admin/v1/tenants/nope/new-tools", ``, 404, admin.CodeNotFound, ""},
	} {
		var b admin.ErrorBody
		status := e.admin(c.method, c.path, k, c.body, &b)
		if status != c.status || b.Error.Code != c.code || b.Error.Field != c.field || b.CorrelationID == "" {
			t.Errorf("%s %s %s = %d %+v; want %d %s field %q", c.method, c.path, c.body, status, b, c.status, c.code, c.field)
		}
	}
}

func TestRegistryKeysAndStops(t *testing.T) {
	e := newEnv(t, "", nil)
	k := e.adminKey
	var tn registry.Tenant
	if code := e.admin("POST", "/admin/v1/tenants", k, `{"id":"beta","tier":"growth"}`, &tn); code != 201 || tn.ID != "beta" || tn.Tier != "growth" {
		t.Fatalf("create tenant = %d %+v", code, tn)
	}
	var tl admin.TenantList
	if e.admin("GET", "/admin/v1/tenants", k, "", &tl); len(tl.Tenants) != 2 {
		t.Fatalf("tenants = %+v", tl)
	}
	var sv registry.Server
	body := `{"name":"docs","url":"` + e.up.URL + `","credential":{"header":"X-Api-Key","ref":"env:DOCS_KEY"},"tools":{"delete":{"requires_approval":true}}}`
	if code := e.admin("POST", "/admin/v1/tenants/beta/servers", k, body, &sv); code != 201 || !sv.Tools["delete"].RequiresApproval {
		t.Fatalf("register server = %d %+v", code, sv)
	}
	var issued admin.IssuedKey
	if code := e.admin("POST", "/admin/v1/tenants/beta/keys", k, `{"caller":"bot"}`, &issued); code != 201 || !strings.HasPrefix(issued.Key, "aegis_") {
		t.Fatalf("issue key = %d %+v", code, issued)
	}
	// The issued key works at the gateway; the list never shows a secret or hash.
	e.keys["bot"] = issued.Key
	req, _ := http.NewRequest("POST", e.gw.URL+"/v1/invoke", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`))
	req.Header.Set("Authorization", "Bearer "+issued.Key)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("issued key at the gateway = %d", resp.StatusCode)
	}
	var kl admin.KeyList
	var raw map[string]any
	e.admin("GET", "/admin/v1/tenants/beta/keys", k, "", &kl)
	e.admin("GET", "/admin/v1/tenants/beta/keys", k, "", &raw)
	if len(kl.Keys) != 1 || kl.Keys[0].ID != issued.ID || strings.Contains(mustJSON(raw), "hash") || strings.Contains(mustJSON(raw), issued.Key) {
		t.Fatalf("keys = %+v", raw)
	}
	if code := e.admin("POST", "/admin/v1/tenants/beta/keys/"+issued.ID+"/revoke", k, "", nil); code != 200 {
		t.Fatalf("revoke = %d", code)
	}
	resp, err = http.DefaultClient.Do(mustReq(t, e.gw.URL, issued.Key))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked key at the gateway = %d, want 401", resp.StatusCode)
	}

	// Kill switch: stop a tool and a server, then resume.
	if code := e.admin("POST", "/admin/v1/tenants/acme/servers/payments/tools/transfer/stop", k, `{"reason":"incident 9","by":"bob"}`, nil); code != 200 {
		t.Fatal(code)
	}
	if code := e.admin("POST", "/admin/v1/tenants/acme/servers/payments/stop", k, ``, nil); code != 200 {
		t.Fatal(code)
	}
	var sl admin.StopList
	e.admin("GET", "/admin/v1/tenants/acme/stops", k, "", &sl)
	want := []killswitch.Stop{{Tenant: "acme", Server: "payments", By: "admin-key"}, {Tenant: "acme", Server: "payments", Tool: "transfer", Reason: "incident 9", By: "bob via admin-key"}}
	if len(sl.Stops) != 2 || sl.Stops[0].Tool != want[0].Tool || sl.Stops[1].Reason != want[1].Reason || sl.Stops[1].By != want[1].By {
		t.Fatalf("stops = %+v", sl.Stops)
	}
	e.admin("POST", "/admin/v1/tenants/acme/servers/payments/tools/transfer/resume", k, ``, nil)
	e.admin("POST", "/admin/v1/tenants/acme/servers/payments/resume", k, ``, nil)
	if e.admin("GET", "/admin/v1/tenants/acme/stops", k, "", &sl); len(sl.Stops) != 0 {
		t.Fatalf("stops after resume = %+v", sl.Stops)
	}
}

func TestAuditPagination(t *testing.T) {
	e := newEnv(t, "", nil)
	for i := 0; i < 3; i++ {
		e.held(e.call("agent-1", `{"to":"a","amount":`+string(rune('1'+i))+`}`), "pending")
	}
	var all []string
	cursor := ""
	for page := 0; page < 20; page++ {
		var p admin.AuditPage
		path := "/admin/v1/tenants/acme/audit?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if code := e.admin("GET", path, e.adminKey, "", &p); code != 200 || len(p.Records) > 2 {
			t.Fatalf("page %d = %d, %d records", page, code, len(p.Records))
		}
		for _, r := range p.Records {
			all = append(all, r.Method)
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	// 3 refused tools/call records and 3 approval.held records.
	if len(all) != 6 {
		t.Fatalf("paged through %d records: %v", len(all), all)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func mustReq(t *testing.T, base, key string) *http.Request {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/v1/invoke", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	return req
}
