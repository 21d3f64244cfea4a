package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/display"
)

// TestAdminAuditEscapesAgentText: an agent names a tool with an escape
// sequence that sets the window title, a carriage return and an erase-line
// sequence that wipe the row, and a tab that forges a column; another with
// a C1 CSI, a bidi override and a zero-width space. Both are refused
// (unknown tool) and audited verbatim. `aegis admin audit` must print them
// spelled out, one row each, with no byte that drives a terminal; --json
// must stay JSON that decodes to the very names, with no such byte either.
func TestAdminAuditEscapesAgentText(t *testing.T) {
	key := admin.NewKey()
	srv, up := startLocal(t, key)
	u := "--url=" + srv.URL
	ok := cliOK(t, u)
	ok("tenants", "create", "acme")
	ok("servers", "add", "--tenant", "acme", "--name", "payments", "--server-url", up.URL)
	var issued admin.IssuedKey
	if err := json.Unmarshal([]byte(ok("keys", "create", "--tenant", "acme", "--caller", "bot", "--json")), &issued); err != nil {
		t.Fatal(err)
	}

	names := []string{
		"x\x1b]0;pwned\x07\r\x1b[2Kallowed\tok",
		"echo\u009b2K\u202etxt.exe\u200b",
	}
	shown := []string{
		`x\x1b]0;pwned\x07\r\x1b[2Kallowed\tok`,
		`echo\u009b2K\u202etxt.exe\u200b`,
	}
	for _, name := range names {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": name, "arguments": map[string]any{}}})
		req, _ := http.NewRequest("POST", srv.URL+"/v1/invoke", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+issued.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Error *struct{ Code int } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if m.Error == nil {
			t.Fatalf("tools/call %q was not refused", name)
		}
	}

	// --json: the names come back exactly.
	js := ok("audit", "--tenant", "acme", "--json")
	var page admin.AuditPage
	if err := json.Unmarshal([]byte(js), &page); err != nil {
		t.Fatalf("audit --json is not JSON: %v\n%s", err, js)
	}
	var tools []string
	for _, r := range page.Records {
		if r.Method == "tools/call" {
			tools = append(tools, r.Tool)
		}
	}
	for _, name := range names {
		if !slices.Contains(tools, name) {
			t.Fatalf("tool %q not audited verbatim (premise of this test); audited tools/call tools: %q", name, tools)
		}
	}

	// The table: every name spelled out, one row per record.
	out := ok("audit", "--tenant", "acme")
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < 0x20 && c != '\n' || c == 0x7f {
			t.Fatalf("audit table holds byte %#x at %d:\n%q", c, i, out)
		}
	}
	for _, r := range out {
		if r != '\n' && display.Hidden(r) {
			t.Fatalf("audit table holds %U:\n%q", r, out)
		}
	}
	for _, s := range shown {
		if !strings.Contains(out, s) {
			t.Errorf("audit table does not show %s:\n%s", s, out)
		}
	}
	if rows := strings.Count(out, "\n"); rows != 1+len(page.Records) {
		t.Errorf("audit table has %d lines for %d records (a forged row?):\n%s", rows, len(page.Records), out)
	}
	t.Logf("audit table:\n%s", out)

	// encoding/json writes C1, bidi and zero-width characters raw; --json
	// must not.
	for _, r := range js {
		if r != '\n' && display.Hidden(r) {
			t.Fatalf("audit --json holds %U raw:\n%q", r, js)
		}
	}
}
