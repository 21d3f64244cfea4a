package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// runTop runs `aegis ARGS...` and returns its exit code and output.
func runTop(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	oldOut, oldErr := cliOut, cliErr
	cliOut, cliErr = &out, &errb
	defer func() { cliOut, cliErr = oldOut, oldErr }()
	return run(args), out.String(), errb.String()
}

// TestAuditExportVerify: calls through `aegis serve`'s handler on the
// embedded store with its local key, exported with `aegis admin audit
// export` through the admin API, verify with only the .pub file; the
// same export with one record edited names the record.
func TestAuditExportVerify(t *testing.T) {
	key := admin.NewKey()
	t.Setenv(envAdminKey, key)
	keyFile := filepath.Join(t.TempDir(), "k", "audit.key")
	signer, err := auditchain.LoadOrCreateKey(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v; want 0600", fi.Mode(), err)
	}
	log := slog.New(slog.DiscardHandler)
	b, chain, err := wiring.AuditChain(memstore.New(), "serve", signer, log)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Abandon()
	s := config.Defaults()
	s.LocalMode = true
	gw, err := gateway.New(b, &gateway.Options{Settings: s, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := mountAdmin(gw, b, log, ops{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	up, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	ok := cliOK(t, "--url="+srv.URL)
	ok("tenants", "create", "acme")
	ok("servers", "add", "--tenant", "acme", "--name", "docs", "--server-url", up.URL)
	var issued admin.IssuedKey
	if err := json.Unmarshal([]byte(ok("keys", "create", "--tenant", "acme", "--caller", "bot", "--json")), &issued); err != nil {
		t.Fatal(err)
	}
	apiKey := issued.Key
	call := func() {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/invoke", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for range 5 {
		call()
	}
	if err := chain.Flush(); err != nil {
		t.Fatal(err)
	}
	call() // after the checkpoint: an unsigned tail of one

	export := filepath.Join(t.TempDir(), "acme.jsonl")
	ok("audit", "export", "--tenant", "acme", "-o", export)
	code, out, errs := runTop(t, "audit", "verify", "--key", keyFile+".pub", "--file", export)
	if code != 0 || !strings.Contains(out, "OK:") || !strings.Contains(out, "CANNOT KNOW") || !strings.Contains(out, "1 unsigned") {
		t.Fatalf("verify: exit %d\n%s%s", code, out, errs)
	}
	code, vk, _ := runTop(t, "audit", "key", "--file", keyFile)
	if code != 0 || !strings.HasPrefix(vk, auditchain.LocalKeyName+"+") {
		t.Fatalf("audit key: %d %q", code, vk)
	}

	// Edit one signed record of the export: its caller.
	raw, _ := os.ReadFile(export)
	lines := strings.Split(string(raw), "\n")
	edited := false
	for i, l := range lines {
		if strings.Contains(l, `"seq":2,`) {
			lines[i], edited = strings.Replace(l, `"caller":"bot"`, `"caller":"someone"`, 1), true
		}
	}
	if !edited {
		t.Fatalf("no record at seq 2 in the export:\n%s", raw)
	}
	if err := os.WriteFile(export, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runTop(t, "audit", "verify", "--key", strings.TrimSpace(vk), "--file", export)
	if code != 1 || !strings.Contains(out, "FAULT changed") || !strings.Contains(out, "seq 2") {
		t.Fatalf("verify of an edited export: exit %d\n%s", code, out)
	}
}
