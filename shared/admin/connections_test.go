package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/connect"
)

// TestConnectionStates: the list says each connection's state as the
// console shows it (connected, expired, broken) by the admin API's clock,
// never its sealed tokens, through the admin key and the console's
// session alike; revoking where the deployment makes no connections is
// 409, and an unknown tenant 404.
func TestConnectionStates(t *testing.T) {
	e := newEnv(t, "", nil)
	now := e.clock.Now()
	for _, c := range []connect.Connection{
		{ID: "c-live", Caller: "agent-1", Server: "payments", Status: connect.StatusActive, Expires: now.Add(time.Minute)},
		{ID: "c-noexp", Caller: "agent-1", Server: "docs", Status: connect.StatusActive},
		{ID: "c-old", Caller: "agent-2", Server: "payments", Status: connect.StatusActive, Expires: now},
		{ID: "c-broken", Caller: "agent-2", Server: "docs", Status: connect.StatusBroken, Expires: now.Add(time.Hour)},
	} {
		c.Tenant, c.Issuer, c.Version, c.Created, c.Updated = "acme", "https://issuer.example", 1, now, now
		c.Sealed = []byte("sealed-tokens-of-" + c.ID)
		must(t, e.store.PutConnection(context.Background(), c))
	}
	want := map[string]string{"c-live": admin.StateConnected, "c-noexp": admin.StateConnected, "c-old": admin.StateExpired, "c-broken": admin.StateBroken}
	check := func(how, body string) {
		t.Helper()
		var list admin.ConnectionList
		if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Connections) != len(want) {
			t.Fatalf("%s: %s (%v)", how, body, err)
		}
		for _, c := range list.Connections {
			if c.State != want[c.ID] {
				t.Errorf("%s: %s is %q, want %q", how, c.ID, c.State, want[c.ID])
			}
		}
		if strings.Contains(body, "sealed") {
			t.Fatalf("%s: the list shows the sealed tokens: %s", how, body)
		}
	}
	var raw json.RawMessage
	if code := e.admin(http.MethodGet, "/admin/v1/tenants/acme/connections", e.adminKey, "", &raw); code != http.StatusOK {
		t.Fatalf("list: %d %s", code, raw)
	}
	check("admin key", string(raw))
	c, _ := consoleClient(t, e)
	code, body := consoleDo(t, c, http.MethodGet, e.adm.URL+"/admin/v1/tenants/acme/connections", "", nil)
	if code != http.StatusOK {
		t.Fatalf("list through the console: %d %s", code, body)
	}
	check("console session", body)

	// A minute on, the live one has expired too.
	e.clock.Advance(time.Minute)
	want["c-live"] = admin.StateExpired
	e.admin(http.MethodGet, "/admin/v1/tenants/acme/connections", e.adminKey, "", &raw)
	check("a minute on", string(raw))

	var eb admin.ErrorBody
	if code := e.admin(http.MethodPost, "/admin/v1/tenants/acme/connections/c-live/revoke", e.adminKey, "", &eb); code != http.StatusConflict || eb.Error.Code != admin.CodeConflict {
		t.Fatalf("revoke without connections: %d %+v", code, eb)
	}
	if code := e.admin(http.MethodGet, "/admin/v1/tenants/nope/connections", e.adminKey, "", &eb); code != http.StatusNotFound {
		t.Fatalf("list of an unknown tenant: %d %+v", code, eb)
	}
}
