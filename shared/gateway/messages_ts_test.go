package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/conformance"
	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// tsClient is a client of the TypeScript SDK (@modelcontextprotocol/sdk,
// installed with the pinned conformance suite on its pinned Node 22): it
// connects to URL with KEY, sends each client-to-server row with VALUE in
// its parameter (and answers sampling, elicitation and roots with it),
// and prints one JSON line per row: its name, and the error code it got
// (0: none) or the tool's text.
const tsClient = `
const sdk = process.env.SDK;
const { Client } = await import(sdk + "/dist/esm/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/dist/esm/client/streamableHttp.js");
const t = await import(sdk + "/dist/esm/types.js");
const v = process.env.VALUE, uri = process.env.URI;
const client = new Client({ name: "ts-rows", version: "1" }, { capabilities: { sampling: {}, elicitation: {}, roots: {} } });
client.setRequestHandler(t.CreateMessageRequestSchema, async () => ({ role: "assistant", model: "m", content: { type: "text", text: v } }));
client.setRequestHandler(t.ElicitRequestSchema, async () => ({ action: "accept", content: { card: v } }));
client.setRequestHandler(t.ListRootsRequestSchema, async () => ({ roots: [{ uri: "file:///" + uri, name: v }] }));
const transport = new StreamableHTTPClientTransport(new URL(process.env.URL), { requestInit: { headers: { Authorization: "Bearer " + process.env.KEY } } });
await client.connect(transport);
const rows = {
  "prompts/get": () => client.getPrompt({ name: "greet", arguments: { name: v } }),
  "completion/complete": () => client.complete({ ref: { type: "ref/prompt", name: "greet" }, argument: { name: "name", value: v } }),
  "resources/read": () => client.readResource({ uri: "test://item/" + uri }),
  "resources/subscribe": () => client.subscribeResource({ uri: "test://item/" + uri }),
  "sampling": () => client.callTool({ name: "ask", arguments: { what: "sampling" } }),
  "elicitation": () => client.callTool({ name: "ask", arguments: { what: "elicitation" } }),
  "roots": () => client.callTool({ name: "ask", arguments: { what: "roots" } }),
};
for (const [name, fn] of Object.entries(rows)) {
  try {
    const r = await fn();
    console.log(JSON.stringify({ name, code: 0, text: (r.content && r.content[0] && r.content[0].text) || "" }));
  } catch (e) {
    console.log(JSON.stringify({ name, code: e.code ?? -1, text: String(e.message) }));
  }
}
await client.close();
`

// TestEveryMessageCheckedTS: the TypeScript SDK's client through /mcp/a
// and /mcp, against the same Go SDK upstream as TestEveryMessageChecked:
// clean values reach the upstream; a card number in prompts/get
// arguments, a completion value, a resource URI, a subscription or the
// client's sampling, elicitation and roots answers never does (-32053 to
// the client, or, for an answer, to the server in the client's place).
func TestEveryMessageCheckedTS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := conformance.CacheDir()
	must(t, err)
	suite, err := conformance.Install(ctx, dir)
	if err != nil {
		t.Fatalf("MISSING TOOL: %v", err)
	}
	sdk := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "dist", "esm", "client", "index.js")); err != nil {
		t.Fatalf("MISSING TOOL: the TypeScript SDK is not installed with the conformance suite: %v", err)
	}
	script := filepath.Join(t.TempDir(), "client.mjs")
	must(t, os.WriteFile(script, []byte(tsClient), 0o644))
	for _, endpoint := range []string{"/mcp/a", "/mcp"} {
		for _, check := range []string{"clean", "egress"} {
			t.Run(endpoint+" "+check, func(t *testing.T) {
				up := mcptest.StartFull(t)
				e := newEnv(t, func(s *config.Settings, m *memstore.Store) {
					must(t, m.DeleteServer(context.Background(), "acme", "mock-primary"))
					must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "a", URL: up.URL}))
				})
				v, uri := cleanValue, cleanValue
				if check == "egress" {
					v, uri = secretValue, secretInURI
				}
				cmd := exec.CommandContext(ctx, suite.Node, script)
				cmd.Env = append(os.Environ(), "SDK=file://"+sdk, "URL="+e.URL+endpoint, "KEY="+e.KeyA, "VALUE="+v, "URI="+uri)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("the TypeScript client failed: %v\n%s", err, out)
				}
				got := map[string]struct {
					Code int64
					Text string
				}{}
				for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					var r struct {
						Name string
						Code int64
						Text string
					}
					if json.Unmarshal([]byte(line), &r) == nil && r.Name != "" {
						got[r.Name] = struct {
							Code int64
							Text string
						}{r.Code, r.Text}
					}
				}
				for name, at := range map[string]string{"prompts/get": "prompts/get", "completion/complete": "completion/complete", "resources/read": "resources/read", "resources/subscribe": "resources/subscribe"} {
					r, ok := got[name]
					switch {
					case !ok:
						t.Errorf("%s: no result from the client:\n%s", name, out)
					case check == "clean" && (r.Code != 0 || !up.Saw(at, uri)):
						t.Errorf("%s: client got %+v; upstream saw it: %v", name, r, up.Saw(at, uri))
					case check == "egress" && (r.Code != -32053 || up.Saw(at, "")):
						t.Errorf("%s: client got %+v, want -32053; upstream saw it: %v", name, r, up.Saw(at, ""))
					}
				}
				for name, at := range map[string]string{"sampling": "answer:sampling/createMessage", "elicitation": "answer:elicitation/create", "roots": "answer:roots/list"} {
					r, ok := got[name]
					switch {
					case !ok:
						t.Errorf("%s: no result from the client:\n%s", name, out)
					case check == "clean" && (r.Code != 0 || !up.Saw(at, v)):
						t.Errorf("%s: client got %+v; the upstream got %+v", name, r, up.Received())
					case check == "egress" && (!strings.HasPrefix(r.Text, "error: ") || !up.Saw(at, "Sensitive data") || strings.Contains(r.Text, "4111")):
						t.Errorf("%s: client got %+v, want the tool's report of -32053; the upstream got %+v", name, r, up.Received())
					}
				}
			})
		}
	}
}
