package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/connecttest"
	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// tsConnectClient is a TypeScript SDK client (MCP 2025-11-25) that
// connects to URL with KEY, declaring elicitation { url: {} } when
// URL_MODE is 1 and elicitation {} (form only) otherwise. It calls the
// tool TOOL and prints what it got as one JSON line (step "first"): the
// error's code, its class (the SDK turns -32042 into its
// UrlElicitationRequiredError), its elicitations and data; then it waits
// for a line on stdin (the person has connected), sends the identical
// call again and prints that answer (step "retry").
const tsConnectClient = `
const sdk = process.env.SDK;
const { Client } = await import(sdk + "/dist/esm/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/dist/esm/client/streamableHttp.js");
const t = await import(sdk + "/dist/esm/types.js");
const caps = process.env.URL_MODE === "1" ? { elicitation: { url: {} } } : { elicitation: {} };
const client = new Client({ name: "ts-connect", version: "1" }, { capabilities: caps });
client.setRequestHandler(t.ElicitRequestSchema, async () => ({ action: "decline" }));
const transport = new StreamableHTTPClientTransport(new URL(process.env.URL), { requestInit: { headers: { Authorization: "Bearer " + process.env.KEY } } });
await client.connect(transport);
const call = () => client.callTool({ name: process.env.TOOL, arguments: {} });
const report = async (step) => {
  try {
    const r = await call();
    console.log(JSON.stringify({ step, code: 0, text: (r.content && r.content[0] && r.content[0].text) || "", isError: !!r.isError }));
  } catch (e) {
    console.log(JSON.stringify({ step, code: e.code ?? -1, kind: e.constructor.name, message: String(e.message),
      elicitations: e instanceof t.UrlElicitationRequiredError ? e.elicitations : null, data: e.data ?? null }));
  }
};
await report("first");
const lines = (await import("node:readline")).createInterface({ input: process.stdin });
for await (const _ of lines) break;
await report("retry");
await client.close();
`

// tsAnswer is one line the client printed.
type tsAnswer struct {
	Step         string
	Code         int
	Kind         string
	Message      string
	Text         string
	Elicitations []struct{ Mode, ElicitationID, URL, Message string }
	Data         struct {
		URL    string
		Server string
		Aegis  struct{ Layer, Code string }
	}
}

// TestConnectionsTypeScriptClient: the TypeScript SDK's client calls a
// tool of a server with auth: oauth through /t/acme/mcp. Declaring
// elicitation.url, it gets -32042 (its UrlElicitationRequiredError) with
// one URL-mode elicitation; without it, -32065 CONNECTION_REQUIRED with
// the link in its message and data. The link is followed through the npm
// oidc-provider's login and consent, and the identical call, sent again
// by the same client on the same session, succeeds with that caller's
// own grant.
func TestConnectionsTypeScriptClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node, sdk := tsSDK(t, ctx)
	script := filepath.Join(t.TempDir(), "connect.mjs")
	must(t, os.WriteFile(script, []byte(tsConnectClient), 0o644))
	w := newConnWorld(t, memstore.New())
	for _, tc := range []struct {
		name, caller string
		urlMode      bool
	}{
		{"elicitation.url", "alice", true},
		{"no url capability", "bob", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode := "0"
			if tc.urlMode {
				mode = "1"
			}
			_, before := w.up.Seen()
			var stderr syncbuf.Buffer
			cmd := exec.CommandContext(ctx, node, script)
			cmd.Env = append(os.Environ(), "SDK=file://"+sdk, "URL="+w.gw+"/t/acme/mcp", "KEY="+w.keys[tc.caller], "TOOL=docs.whoami", "URL_MODE="+mode)
			cmd.Stderr = &stderr
			stdin, err := cmd.StdinPipe()
			must(t, err)
			stdout, err := cmd.StdoutPipe()
			must(t, err)
			must(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			lines := bufio.NewScanner(stdout)
			next := func(step string) tsAnswer {
				t.Helper()
				for lines.Scan() {
					var a tsAnswer
					if json.Unmarshal(lines.Bytes(), &a) == nil && a.Step == step {
						return a
					}
				}
				t.Fatalf("the TypeScript client printed no %q answer; stderr:\n%s", step, stderr.String())
				return tsAnswer{}
			}

			// The SDK's UrlElicitationRequiredError keeps only
			// data.elicitations; the word is in the message too.
			first := next("first")
			if !strings.HasSuffix(first.Message, "(CONNECTION_REQUIRED)") ||
				!tc.urlMode && (first.Data.Aegis.Code != "CONNECTION_REQUIRED" || first.Data.Aegis.Layer != "gateway") {
				t.Fatalf("first call: %+v; want CONNECTION_REQUIRED from the gateway", first)
			}
			prefix := w.gw + "/t/acme/connect/start?state="
			var link string
			if tc.urlMode {
				e := first.Elicitations
				if first.Code != -32042 || first.Kind != "UrlElicitationRequiredError" || len(e) != 1 ||
					e[0].Mode != "url" || e[0].ElicitationID == "" || e[0].Message == "" || !strings.HasPrefix(e[0].URL, prefix) {
					t.Fatalf("first call: %+v; want -32042 UrlElicitationRequiredError with one url elicitation", first)
				}
				link = e[0].URL
			} else {
				if first.Code != -32065 || first.Kind != "McpError" || first.Data.Server != "docs" ||
					!strings.HasPrefix(first.Data.URL, prefix) || !strings.Contains(first.Message, first.Data.URL) {
					t.Fatalf("first call: %+v; want -32065 with the link in message and data", first)
				}
				link = first.Data.URL
			}
			if _, calls := w.up.Seen(); calls != before {
				t.Fatalf("the upstream got %d MCP requests before %s connected", calls-before, tc.caller)
			}

			// The person opens the link, signs in and consents.
			st, page, _ := connecttest.Consent(t, connecttest.Browser(nil), link, tc.caller, nil)
			if st != http.StatusOK || !strings.Contains(page, "Connected to docs") {
				t.Fatalf("consent ended %d: %.300s", st, page)
			}
			_, err = io.WriteString(stdin, "connected\n")
			must(t, err)
			retry := next("retry")
			if retry.Code != 0 || retry.Text != "subject="+tc.caller {
				t.Fatalf("the identical call after consent: %+v; want subject=%s", retry, tc.caller)
			}
			must(t, stdin.Close())
			must(t, cmd.Wait())
		})
	}
}
