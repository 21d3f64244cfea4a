package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// localServer is `aegis serve`'s handler (gateway at /, admin at /admin/)
// over m, with o's other options (its Settings are the defaults in local
// mode, its Logger discards).
func localServer(t *testing.T, m *memstore.Store, o gateway.Options) *httptest.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := config.Defaults()
	s.LocalMode = true
	o.Settings, o.Logger = s, log
	gw, err := gateway.New(m, &o)
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := mountAdmin(gw, m, log, ops{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// startLocal is `aegis serve`'s handler (gateway at /, admin at /admin/)
// over an empty embedded store, with the demo upstream beside it.
func startLocal(t *testing.T, adminKey string) (*httptest.Server, *demo.Server) {
	t.Helper()
	t.Setenv(envAdminKey, adminKey)
	up, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	srv := localServer(t, memstore.New(), gateway.Options{Notifier: notifier(slog.New(slog.DiscardHandler))})
	return srv, up
}

// runCLI runs `aegis admin ARGS...` and returns its exit code and output.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	oldOut, oldErr := cliOut, cliErr
	cliOut, cliErr = &out, &errb
	defer func() { cliOut, cliErr = oldOut, oldErr }()
	code := run(append([]string{"admin"}, args...))
	return code, out.String(), errb.String()
}

// cliOK returns a runner of `aegis admin ARGS... URL` that fails the test
// unless the command exits 0, and returns its output.
func cliOK(t *testing.T, url string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, append(args, url)...)
		if code != 0 {
			t.Fatalf("aegis admin %v: exit %d\n%s%s", args, code, out, errs)
		}
		return out
	}
}

func TestAdminCLI(t *testing.T) {
	key := admin.NewKey()
	srv, up := startLocal(t, key)
	u := "--url=" + srv.URL
	ok := cliOK(t, u)
	ok("tenants", "create", "acme", "--tier", "growth")
	if out := ok("tenants"); !strings.Contains(out, "acme") || !strings.Contains(out, "growth") {
		t.Fatalf("tenants table:\n%s", out)
	}
	ok("servers", "add", "--tenant", "acme", "--name", "payments", "--server-url", up.URL, "--require-approval", "transfer")
	if out := ok("servers", "list", "--tenant", "acme"); !strings.Contains(out, "transfer") {
		t.Fatalf("servers table:\n%s", out)
	}
	var issued admin.IssuedKey
	if err := json.Unmarshal([]byte(ok("keys", "create", "--tenant", "acme", "--caller", "bot", "--json")), &issued); err != nil || issued.Key == "" {
		t.Fatalf("keys create --json: %+v %v", issued, err)
	}

	// A held call, approved from the CLI, runs once.
	call := func() map[string]any {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/invoke", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer","arguments":{"to":"a","amount":1}}}`))
		req.Header.Set("Authorization", "Bearer "+issued.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return m
	}
	if m := call(); m["error"] == nil {
		t.Fatalf("first call not held: %v", m)
	}
	var list admin.ApprovalList
	if err := json.Unmarshal([]byte(ok("approvals", "list", "--status", "pending", "--json")), &list); err != nil || len(list.Approvals) != 1 {
		t.Fatalf("approvals list --json: %+v %v", list, err)
	}
	id := list.Approvals[0].ID
	if out := ok("approvals", "list"); !strings.Contains(out, id) || !strings.Contains(out, "pending") {
		t.Fatalf("approvals table:\n%s", out)
	}
	if out := ok("approvals", "approve", id, "--reason", "ticket 7", "--by", "alice"); !strings.Contains(out, "approved") {
		t.Fatalf("approve: %s", out)
	}
	if code, _, errs := runCLI(t, "approvals", "deny", id, u); code != 1 || !strings.Contains(errs, "409 conflict") {
		t.Fatalf("deny after approve: exit %d %s", code, errs)
	}
	if m := call(); m["result"] == nil || up.Calls("transfer") != 1 {
		t.Fatalf("approved call: %v, upstream ran %d", m, up.Calls("transfer"))
	}
	// The approval it used is listed as consumed, with when (three times
	// in the row: created, expires, consumed).
	out := ok("approvals", "list", "--status", "consumed")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "CONSUMED") || !strings.Contains(lines[1], id) ||
		!strings.Contains(lines[1], " consumed ") || len(regexp.MustCompile(`20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ`).FindAllString(lines[1], -1)) != 3 {
		t.Fatalf("approvals list --status consumed:\n%s", out)
	}
	if err := json.Unmarshal([]byte(ok("approvals", "list", "--status", "consumed", "--json")), &list); err != nil || len(list.Approvals) != 1 || list.Approvals[0].ConsumedAt.IsZero() {
		t.Fatalf("consumed --json: %+v %v", list, err)
	}

	ok("tools", "stop", "--tenant", "acme", "--server", "payments", "--tool", "transfer", "--reason", "incident")
	if out := ok("tools", "list", "--tenant", "acme"); !strings.Contains(out, "incident") {
		t.Fatalf("tools list:\n%s", out)
	}
	ok("tools", "resume", "--tenant", "acme", "--server", "payments", "--tool", "transfer")
	if out := ok("audit", "--tenant", "acme", "--all"); !strings.Contains(out, "approval.approved") || !strings.Contains(out, `reason="ticket 7"`) {
		t.Fatalf("audit table:\n%s", out)
	}
	ok("keys", "revoke", issued.ID, "--tenant", "acme")
	if out := ok("keys", "list", "--tenant", "acme"); !strings.Contains(out, "true") {
		t.Fatalf("keys list after revoke:\n%s", out)
	}

	// Wrong key: a clear error, exit 1.
	t.Setenv(envAdminKey, admin.NewKey())
	if code, _, errs := runCLI(t, "tenants", u); code != 1 || !strings.Contains(errs, "401 unauthorized") {
		t.Fatalf("wrong key: exit %d %s", code, errs)
	}
}

func TestServeWithoutAdminKey(t *testing.T) {
	srv, _ := startLocal(t, "")
	resp, err := http.Get(srv.URL + "/admin/v1/approvals")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), envAdminKey) {
		t.Fatalf("admin route without AEGIS_ADMIN_KEY = %d %s", resp.StatusCode, b)
	}
	// The gateway is still served at /.
	resp, err = http.Post(srv.URL+"/v1/invoke", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("gateway behind the mux = %d", resp.StatusCode)
	}
}

// TestAdminConnectionsCLI: `aegis admin connections list` shows a
// tenant's connections without their tokens; revoke names the one it
// revoked, and says why it cannot where the gateway makes no connections.
func TestAdminConnectionsCLI(t *testing.T) {
	t.Setenv(envAdminKey, admin.NewKey())
	st := memstore.New()
	srv := localServer(t, st, gateway.Options{Notifier: notifier(slog.New(slog.DiscardHandler))})
	u := "--url=" + srv.URL
	ok := cliOK(t, u)
	ok("tenants", "create", "acme", "--tier", "growth")
	now := time.Now().UTC()
	if err := st.PutConnection(context.Background(), connect.Connection{ID: "conn0001", Tenant: "acme", Caller: "alice@example.com", Server: "docs",
		Issuer: "https://login.example.com", Status: connect.StatusActive, Sealed: []byte("sealed-token-bytes"), Version: 1, Created: now, Updated: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	out := ok("connections", "list", "--tenant", "acme")
	if !strings.Contains(out, "conn0001") || !strings.Contains(out, "alice@example.com") || !strings.Contains(out, "active") || strings.Contains(out, "sealed-token") {
		t.Fatalf("connections list:\n%s", out)
	}
	if code, _, errs := runCLI(t, "connections", "revoke", "conn0001", "--tenant", "acme", u); code != 1 || !strings.Contains(errs, "no connections") {
		t.Fatalf("revoke without a broker: exit %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "connections", "list", u); code != 2 || !strings.Contains(errs, "--tenant") {
		t.Fatalf("list without --tenant: exit %d %s", code, errs)
	}
}
