package wrap

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
	"github.com/aegis-gw/aegis/shared/refusal"
)

// tsWrapClient starts ARGV (JSON) over stdio with the TypeScript SDK's
// client, calls each tool of TOOLS (JSON) and prints one JSON line per
// call: the error's code, message and data, and whether the SDK made it
// a URL elicitation.
const tsWrapClient = `
const sdk = process.env.SDK;
const { Client } = await import(sdk + "/dist/esm/client/index.js");
const { StdioClientTransport } = await import(sdk + "/dist/esm/client/stdio.js");
const t = await import(sdk + "/dist/esm/types.js");
const [command, ...args] = JSON.parse(process.env.ARGV);
const client = new Client({ name: "ts-wrap", version: "1" }, { capabilities: { elicitation: { url: {} } } });
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: "ignore" }));
for (const tool of JSON.parse(process.env.TOOLS)) {
  try {
    await client.callTool({ name: tool, arguments: { text: "x" } });
    console.log(JSON.stringify({ tool, code: 0 }));
  } catch (e) {
    console.log(JSON.stringify({ tool, code: e.code ?? -1, message: String(e.message), data: e.data ?? null,
      mcpError: e instanceof t.McpError, urlElicitation: e instanceof t.UrlElicitationRequiredError }));
  }
}
await client.close();
`

// TestTSClientReadsWrapRefusal: the TypeScript SDK's client, which speaks
// MCP 2025-11-25 (where -32042 means "URL elicitation required", and it
// declares URL elicitation here), gets wrap's -32042 frame and surfaces it
// as a plain McpError, not a URL elicitation, with the tool, the rule, the
// next step and the word in its message (issue 29).
func TestTSClientReadsWrapRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, err := conformance.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	suite, err := conformance.Install(ctx, dir)
	if err != nil {
		t.Fatalf("MISSING TOOL: %v", err)
	}
	sdk := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")
	script := filepath.Join(t.TempDir(), "client.mjs")
	if err := os.WriteFile(script, []byte(tsWrapClient), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{self(t), roleFlag + "wrap", "--policy", writeFile(t, "policy.yaml", testPolicy), "--"}, childArgv(t, "mcpserver", filepath.Join(t.TempDir(), "ran"))...)
	aj, _ := json.Marshal(argv)
	cmd := exec.CommandContext(ctx, suite.Node, script)
	cmd.Env = append(os.Environ(), "SDK=file://"+sdk, "ARGV="+string(aj), `TOOLS=["shell_exec","pay_invoice"]`)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, out)
	}
	want := map[string]struct{ word, rule string }{
		"shell_exec":  {string(refusal.PolicyDenied), "deny:shell_*"},
		"pay_invoice": {string(refusal.PendingApproval), "approval:pay_*"},
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			Tool, Message            string
			Code                     int64
			Data                     struct{ Rule, Tool string }
			MCPError, URLElicitation bool
		}
		if json.Unmarshal([]byte(line), &r) != nil || r.Tool == "" {
			continue
		}
		w, ok := want[r.Tool]
		if !ok {
			continue
		}
		seen++
		if r.URLElicitation || !r.MCPError || r.Code != int64(refusal.CodeWrapRefused) {
			t.Errorf("%s: code %d, McpError %v, URL elicitation %v; want a plain McpError -32042", r.Tool, r.Code, r.MCPError, r.URLElicitation)
		}
		if !strings.Contains(r.Message, `aegis wrap refused this tools/call of "`+r.Tool+`" by rule `+w.rule+"; ") || !strings.HasSuffix(r.Message, "("+w.word+")") {
			t.Errorf("%s: the client surfaced %q", r.Tool, r.Message)
		}
		if r.Data.Rule != w.rule || r.Data.Tool != r.Tool {
			t.Errorf("%s: data %+v", r.Tool, r.Data)
		}
	}
	if seen != len(want) {
		t.Fatalf("the client reported %d of %d calls:\n%s", seen, len(want), out)
	}
}
