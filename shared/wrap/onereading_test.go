package wrap

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/npmcache"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// filesystemServer is npm's MCP filesystem server, the child of issue
// 35's report.
var filesystemServer = npmcache.Package{Name: "@modelcontextprotocol/server-filesystem", Version: "2026.8.31"}

// installFilesystemServer returns Node's binary and the server's entry
// point, installed by npm into aegis's cache (~/.cache/aegis/filesystem)
// at the first run; it fails t naming npm when npm is needed and missing.
func installFilesystemServer(t *testing.T) (node, entry string) {
	t.Helper()
	dir, err := npmcache.Dir("filesystem")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := npmcache.Install(ctx, dir, npmcache.Node, filesystemServer); err != nil {
		t.Fatal(err)
	}
	return npmcache.NodeBin(dir), filepath.Join(dir, "node_modules", filesystemServer.Name, "dist", "index.js")
}

// TestOneReadingWithTheFilesystemServer is issue 35, item 1, against the
// real child of the report: npm's server-filesystem, which reads
// params.arguments exactly and keeps the last of two equal keys. Under a
// policy set whose Cedar forbids reading secret.txt and under a glob
// policy, every call that two readers could read differently is refused
// with rule ruleUnreadable and the secret never comes back; a clean read of
// ok.txt goes through (its record's params_hash is that of the arguments
// the child ran) and a clean read of secret.txt is refused by Cedar
// (the policy is really in force).
func TestOneReadingWithTheFilesystemServer(t *testing.T) {
	node, entry := installFilesystemServer(t)
	root := t.TempDir()
	ok, secret := filepath.Join(root, "ok.txt"), filepath.Join(root, "secret.txt")
	if err := os.WriteFile(ok, []byte("harmless\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte("THE-SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	call := func(id int, params string) string {
		b, _ := json.Marshal(id)
		return `{"jsonrpc":"2.0","id":` + string(b) + `,"method":"tools/call","params":` + params + `}`
	}
	read := func(args string) string { return `{"name":"read_text_file","arguments":` + args + `}` }
	attacks := []struct{ name, params string }{
		{"ARGUMENTS twin after", `{"name":"read_text_file","arguments":{"path":` + q(secret) + `},"ARGUMENTS":{"path":` + q(ok) + `}}`},
		{"Arguments twin after", `{"name":"read_text_file","arguments":{"path":` + q(secret) + `},"Arguments":{}}`},
		{"escaped twin", `{"name":"read_text_file","argument\u0073":{"path":` + q(ok) + `},"arguments":{"path":` + q(secret) + `}}`},
		{"exact duplicate arguments", `{"name":"read_text_file","arguments":{"path":` + q(ok) + `},"arguments":{"path":` + q(secret) + `}}`},
		{"duplicate path, secret last", read(`{"path":` + q(ok) + `,"path":` + q(secret) + `}`)},
		{"duplicate path, secret first", read(`{"path":` + q(secret) + `,"path":` + q(ok) + `}`)},
		{"case twin of path", read(`{"path":` + q(secret) + `,"PATH":` + q(ok) + `}`)},
		{"escaped duplicate path", read(`{"p\u0061th":` + q(ok) + `,"path":` + q(secret) + `}`)},
		{"lone surrogate", read(`{"path":` + q(secret) + `,"x":"\ud800"}`)},
	}
	policies := map[string]string{
		"policy set": "cedar_policies: |\n  @id(\"all\")\n  permit (principal, action, resource);\n" +
			"  @id(\"secret\")\n  forbid (principal, action, resource) when { context.arguments has path && context.arguments.path like \"*secret*\" };\n",
		"glob": "deny: [write_file]\n",
	}
	for pname, src := range policies {
		t.Run(pname, func(t *testing.T) {
			dir := t.TempDir()
			auditPath := filepath.Join(dir, "audit.jsonl")
			l := startLive(t, []string{"--policy", writeFile(t, "policy.yaml", src), "--audit", auditPath, "--", node, entry, root})
			l.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wraptest","version":"1"}}}` + "\n")
			if got := l.recv(); !strings.Contains(got, `"id":"init"`) || !strings.Contains(got, `"result"`) {
				t.Fatalf("initialize: %s", got)
			}
			l.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
			want := map[int]string{} // id → the refusal word, "" for an answer of the child
			lines := []string{}
			for i, a := range attacks {
				lines = append(lines, call(i+1, a.params))
				want[i+1] = string(refusal.PolicyDenied)
			}
			cleanOK := read(`{"path":` + q(ok) + `}`)
			lines = append(lines, call(100, cleanOK))
			want[100] = ""
			if pname == "policy set" {
				lines = append(lines, call(101, read(`{"path":`+q(secret)+`}`)))
				want[101] = string(refusal.PolicyDenied)
			}
			for _, line := range lines {
				l.send(line + "\n")
			}
			got := map[int]string{}
			for len(got) < len(want) {
				s := l.recv()
				if strings.Contains(s, "THE-SECRET") {
					t.Fatalf("the secret came back: %s", s)
				}
				var m struct {
					ID     int             `json:"id"`
					Result json.RawMessage `json:"result"`
					Error  *struct {
						Code int `json:"code"`
						Data struct {
							Aegis struct{ Layer, Code string }
						} `json:"data"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(s), &m); err != nil {
					t.Fatalf("%q: %v", s, err)
				}
				switch {
				case m.Error != nil && m.Error.Code == -32042 && m.Error.Data.Aegis.Layer == "wrap":
					got[m.ID] = m.Error.Data.Aegis.Code
				case m.Result != nil && strings.Contains(string(m.Result), "harmless"):
					got[m.ID] = ""
				default:
					t.Fatalf("unexpected answer %s", s)
				}
			}
			for id, w := range want {
				name := "clean read"
				if id <= len(attacks) {
					name = attacks[id-1].name
				}
				if got[id] != w {
					t.Errorf("%s (id %d): got %q, want %q", name, id, got[id], w)
				}
			}
			if code := l.wait(); code != 0 {
				t.Errorf("wrap exited %d; stderr: %s", code, l.errb.String())
			}
			recs := readRecords(t, auditPath)
			byID := map[string]Record{}
			for _, r := range recs {
				byID[string(r.ID)] = r
			}
			for i, a := range attacks {
				if r := byID[itoaID(i+1)]; r.Rule != ruleUnreadable || r.Outcome != "refused" {
					t.Errorf("%s: record %+v, want refused with rule %q", a.name, r, ruleUnreadable)
				}
			}
			r := byID["100"]
			if wantHash := testParamsKey.Hash(json.RawMessage(`{"path":` + q(ok) + `}`)); r.Outcome != "allowed" || r.ParamsHash != wantHash {
				t.Errorf("clean read: record %+v, want allowed with params_hash %s (the arguments the child ran)", r, wantHash)
			}
			if pname == "policy set" {
				if r := byID["101"]; r.Rule != "cedar:secret" {
					t.Errorf("clean read of the secret: record %+v, want rule cedar:secret", r)
				}
			}
		})
	}
}

func itoaID(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
