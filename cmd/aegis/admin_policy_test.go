package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
)

// TestAdminPolicyCLI: `aegis admin policy put|get` against `aegis serve`'s
// handler; the put set is in force for the next call, a bad set is refused
// with its line and column, and keys carry roles.
func TestAdminPolicyCLI(t *testing.T) {
	key := admin.NewKey()
	srv, up := startLocal(t, key)
	u := "--url=" + srv.URL
	ok := cliOK(t, u)
	ok("tenants", "create", "acme")
	ok("servers", "add", "--tenant", "acme", "--name", "payments", "--server-url", up.URL)
	var issued admin.IssuedKey
	if err := json.Unmarshal([]byte(ok("keys", "create", "--tenant", "acme", "--caller", "bot", "--roles", "ops", "--json")), &issued); err != nil || issued.Key == "" {
		t.Fatalf("keys create: %+v %v", issued, err)
	}
	if out := ok("policy", "get", "--tenant", "acme"); !strings.Contains(out, "no set stored") {
		t.Fatalf("policy get before a put:\n%s", out)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "acme.yaml")
	src := "# acme's policy\nroles:\n  ops: {allow: [\"payments/echo\"]}\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	ok("policy", "put", "--tenant", "acme", file)
	if out := ok("policy", "get", "--tenant", "acme"); !strings.Contains(out, "# acme's policy") || !strings.Contains(out, "policy_hash") {
		t.Fatalf("policy get does not print the set as written:\n%s", out)
	}
	call := func(tool string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/invoke", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"message":"hi","to":"a","amount":1}}}`))
		req.Header.Set("Authorization", "Bearer "+issued.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Error *struct{ Code int } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if m.Error == nil {
			return 0
		}
		return m.Error.Code
	}
	if got := call("transfer"); got != -32003 {
		t.Fatalf("transfer under the role = %d, want -32003", got)
	}

	if err := os.WriteFile(file, []byte("cedar_policies: |\n  permit (principal action, resource);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "policy", "put", "--tenant", "acme", file, u)
	if code != 1 || !strings.Contains(errs, "cedar_policies:1:") {
		t.Fatalf("bad set: exit %d\n%s%s; want 1 naming cedar_policies:1:COLUMN", code, out, errs)
	}
	var buf bytes.Buffer
	buf.WriteString(ok("policy", "get", "--tenant", "acme"))
	if !strings.Contains(buf.String(), "# acme's policy") {
		t.Fatalf("a refused put changed the set:\n%s", buf.String())
	}
}
