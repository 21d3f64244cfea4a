package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/conformance"
	"github.com/aegis-gw/aegis/internal/npmcache"
	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Real clients nobody here wrote, each given a refusal of each kind in
// the protocol version it speaks (issue 29): what they surface must carry
// the code of that version's numbering, the word, the object and the next
// step. The refusals: a held call (-32061 pending, with its approval id),
// a stopped tool (-32062), a tool's rate window (-32004, when to retry),
// an upstream that did not answer (-32064, the idempotency guidance).

// refusalEnv is a gateway whose acme/mock-primary holds transfer for
// approval, has fail stopped, allows echo twice per window and gives
// slow one second.
func refusalEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, func(s *config.Settings, m *memstore.Store) {
		s.UpstreamTimeout = time.Second
		s.RateLimitPerTool = 2
		s.RateLimitPerSession = 0
		ctx := context.Background()
		servers, err := m.Servers(ctx, "acme")
		must(t, err)
		for _, srv := range servers {
			if srv.Name == "mock-primary" {
				srv.Tools = map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}}
				must(t, m.PutServer(ctx, srv))
			}
		}
		must(t, m.PutStop(ctx, killswitch.Stop{Tenant: "acme", Server: "mock-primary", Tool: "fail", By: "ops", At: time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)}))
	})
}

// surfaced is what a client reported for one call: the code, the
// message as it shows it, and error.data when it kept it.
type surfaced struct {
	Name    string          `json:"name"`
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Class   string          `json:"class"`
}

// refusalCalls are the calls each client makes, in order, by name.
var refusalCalls = []struct {
	name, tool string
	args       map[string]any
}{
	{"held", "transfer", map[string]any{"to": "acct-9", "amount": 5}},
	{"stopped", "fail", map[string]any{}},
	{"echo1", "echo", map[string]any{"message": "a"}},
	{"echo2", "echo", map[string]any{"message": "b"}},
	{"limited", "echo", map[string]any{"message": "c"}},
	{"timeout", "slow", map[string]any{"seconds": 3}},
}

// checkSurfaced asserts what a client surfaced for each call, in
// numbering n. An SDK may put its own prefix before the message
// ("MCP error -32061: "), so the message is matched, not compared.
func checkSurfaced(t *testing.T, got map[string]surfaced, n refusal.Numbering) {
	t.Helper()
	want := map[string]struct {
		code refusal.Code
		re   string
	}{
		"held":    {refusal.CodeApprovalRequired, `Approval required for transfer on mock-primary; a person must approve approval ([0-9a-f-]{36}), then send the identical call again \(APPROVAL_REQUIRED\)`},
		"stopped": {refusal.CodeToolStopped, `Tool fail on mock-primary is stopped by an operator; ask an operator to resume it, as sending the call again will not help until then \(TOOL_STOPPED\)`},
		"limited": {refusal.CodeRateLimited, `Rate limit exceeded: 2 calls per minute per tool; retry in \d+s \(RATE_LIMITED\)`},
		"timeout": {refusal.CodeUpstreamTimeout, `Upstream error: upstream did not respond within 1s; the call may have executed, so confirm the outcome of slow on mock-primary before retrying, and retry only an idempotent tool, with the SAME Idempotency-Key \(UPSTREAM_TIMEOUT\)`},
	}
	for _, ok := range []string{"echo1", "echo2"} {
		if g := got[ok]; g.Code != 0 {
			t.Errorf("%s: %+v, want it to run", ok, g)
		}
	}
	for name, w := range want {
		g, seen := got[name]
		if !seen {
			t.Errorf("%s: the client reported nothing", name)
			continue
		}
		if wc := int64(n.Wire(w.code)); g.Code != wc {
			t.Errorf("%s: code %d, want %d (%s)", name, g.Code, wc, n)
		}
		if g.Code >= -32099 && g.Code <= -32000 && n == refusal.MCP20260728 {
			t.Errorf("%s: a 2026-07-28 client got %d, in the range that version reserves", name, g.Code)
		}
		m := regexp.MustCompile(w.re).FindStringSubmatch(g.Message)
		if m == nil {
			t.Errorf("%s: the client surfaced %q, want it to match %q", name, g.Message, w.re)
			continue
		}
		if name == "held" && len(g.Data) > 0 {
			var d struct {
				ApprovalID string `json:"approval_id"`
			}
			if json.Unmarshal(g.Data, &d) != nil || d.ApprovalID != m[1] {
				t.Errorf("held: data %s, want the approval id of the message %s", g.Data, m[1])
			}
		}
	}
}

// TestClientsSurfaceRefusals: the Go SDK's client (at 2026-07-28, which it
// speaks by default, and at 2025-11-25) and the TypeScript SDK's client
// (2025-11-25) through /mcp.
func TestClientsSurfaceRefusals(t *testing.T) {
	for _, v := range []struct {
		version string
		n       refusal.Numbering
	}{{"", refusal.MCP20260728}, {"2025-11-25", refusal.Seed}} {
		t.Run("go sdk "+v.n.String(), func(t *testing.T) {
			e := refusalEnv(t)
			cs := connectVersion(t, e.URL+"/mcp", e.KeyA, v.version)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got := map[string]surfaced{}
			for _, c := range refusalCalls {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
				s := surfaced{Name: c.name}
				var we *jsonrpc.Error
				switch {
				case errors.As(err, &we):
					s.Code, s.Data = we.Code, we.Data
					s.Message = err.Error() // what the Go SDK shows: "calling "tools/call": MESSAGE"
				case c.name == "limited" && v.n == refusal.Seed && errors.Is(err, mcp.ErrConnectionClosed):
					// The Go SDK's JSON-RPC layer gives -32004 its own
					// meaning ("server is closing", as -32003 and -32005),
					// so at 2025-11-25 it reports seed 004's -32004 as a
					// closed connection and drops the code: only the
					// message reaches the caller, which is why it carries
					// the word and when to retry. The session goes on
					// (the next call below is answered).
					s.Code, s.Message = int64(refusal.CodeRateLimited), err.Error()
				case err != nil:
					t.Fatalf("%s: %v, not a JSON-RPC error", c.name, err)
				}
				got[c.name] = s
			}
			checkSurfaced(t, got, v.n)
		})
	}
	t.Run("typescript sdk seed 004", func(t *testing.T) {
		e := refusalEnv(t)
		got := runTSClient(t, e.URL+"/mcp", e.KeyA)
		for _, name := range []string{"held", "stopped", "limited", "timeout"} {
			if c := got[name].Class; c != "McpError" {
				t.Errorf("%s: the TypeScript SDK raised %s, want McpError", name, c)
			}
		}
		checkSurfaced(t, got, refusal.Seed)
	})
}

// tsRefusalClient calls each of CALLS (JSON) through the TypeScript SDK's
// client at URL with KEY and prints one JSON line per call: the code, the
// message and data of the error it raised, and the error's class.
const tsRefusalClient = `
const sdk = process.env.SDK;
const { Client } = await import(sdk + "/dist/esm/client/index.js");
const { StreamableHTTPClientTransport } = await import(sdk + "/dist/esm/client/streamableHttp.js");
const client = new Client({ name: "ts-refusals", version: "1" });
const transport = new StreamableHTTPClientTransport(new URL(process.env.URL), { requestInit: { headers: { Authorization: "Bearer " + process.env.KEY } } });
await client.connect(transport);
for (const c of JSON.parse(process.env.CALLS)) {
  try {
    await client.callTool({ name: c.tool, arguments: c.args });
    console.log(JSON.stringify({ name: c.name, code: 0 }));
  } catch (e) {
    console.log(JSON.stringify({ name: c.name, code: e.code ?? -1, message: String(e.message), data: e.data ?? null, class: e.constructor.name }));
  }
}
await client.close();
`

func runTSClient(t *testing.T, url, key string) map[string]surfaced {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, sdk := tsSDK(t, ctx)
	script := filepath.Join(t.TempDir(), "client.mjs")
	must(t, os.WriteFile(script, []byte(tsRefusalClient), 0o644))
	calls := make([]map[string]any, len(refusalCalls))
	for i, c := range refusalCalls {
		calls[i] = map[string]any{"name": c.name, "tool": c.tool, "args": c.args}
	}
	cj, _ := json.Marshal(calls)
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "SDK=file://"+sdk, "URL="+url, "KEY="+key, "CALLS="+string(cj))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the TypeScript client failed: %v\n%s", err, out)
	}
	got := map[string]surfaced{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var s surfaced
		if json.Unmarshal([]byte(line), &s) == nil && s.Name != "" {
			got[s.Name] = s
		}
	}
	return got
}

// tsSDK is Node 22 and the TypeScript SDK, installed with the pinned
// conformance suite (internal/conformance).
func tsSDK(t *testing.T, ctx context.Context) (node, sdk string) {
	t.Helper()
	dir, err := conformance.CacheDir()
	must(t, err)
	suite, err := conformance.Install(ctx, dir)
	if err != nil {
		t.Fatalf("MISSING TOOL: %v", err)
	}
	sdk = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")
	if _, err := os.Stat(filepath.Join(sdk, "dist", "esm", "client", "index.js")); err != nil {
		t.Fatalf("MISSING TOOL: the TypeScript SDK is not installed with the conformance suite: %v", err)
	}
	return suite.Node, sdk
}

// The desktop hosts' stdio bridge and the Inspector's CLI, pinned, on
// npm's Node 22 (npmcache).
var (
	mcpRemote = npmcache.Package{Name: "mcp-remote", Version: "0.15.1"}
	inspector = npmcache.Package{Name: "@modelcontextprotocol/inspector", Version: "2.12.0"}
)

// hostClients installs mcp-remote and the Inspector into aegis's cache.
func hostClients(t *testing.T, ctx context.Context) (dir string) {
	t.Helper()
	dir, err := npmcache.Dir("clients")
	must(t, err)
	if err := npmcache.Install(ctx, dir, npmcache.Node, mcpRemote, inspector); err != nil {
		t.Fatalf("MISSING TOOL: %v", err)
	}
	return dir
}

// clientHome is a fresh HOME for a client that stores OAuth state there
// (mcp-remote's ~/.mcp-auth), so that no run reads another's.
func clientEnv(t *testing.T) []string {
	home := t.TempDir()
	return append(os.Environ(), "HOME="+home, "MCP_REMOTE_CONFIG_DIR="+filepath.Join(home, ".mcp-auth"), "MCP_INSPECTOR_SECRET_STORE=memory", "BROWSER=/bin/false")
}

// TestMCPRemoteOverStdio: mcp-remote, as a desktop host runs it, driven
// over stdio with JSON-RPC lines. With the right key a held call reaches
// the host as the gateway's -32061 with the approval id and the next step
// in its message; with a wrong key, mcp-remote (which answers any 401 by
// looking for OAuth) ends with a message that says the key was wrong or
// missing.
func TestMCPRemoteOverStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := hostClients(t, ctx)
	proxy := filepath.Join(dir, "node_modules", "mcp-remote", "dist", "proxy.js")
	e := refusalEnv(t)
	run := func(key string, lines ...string) (stdout, stderr string) {
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, npmcache.NodeBin(dir), proxy, e.URL+"/mcp", "--header", "Authorization:Bearer "+key, "--transport", "http-only")
		cmd.Env = clientEnv(t)
		in, err := cmd.StdinPipe()
		must(t, err)
		var out, errb syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		must(t, cmd.Start())
		for _, l := range lines {
			_, _ = in.Write([]byte(l + "\n"))
		}
		// Wait for the answer to the last request, then close stdin.
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(out.String(), `"id":2`) && !strings.Contains(errb.String(), "Fatal error") {
			time.Sleep(100 * time.Millisecond)
		}
		in.Close()
		_ = cmd.Wait()
		return out.String(), errb.String()
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}`
	initialized := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"transfer","arguments":{"to":"acct-9","amount":5}}}`

	t.Run("held call", func(t *testing.T) {
		out, errs := run(e.KeyA, initialize, initialized, call)
		var answer struct {
			Error *struct {
				Code    int64
				Message string
				Data    struct {
					ApprovalID string `json:"approval_id"`
				}
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"id":2`) {
				_ = json.Unmarshal([]byte(line), &answer)
			}
		}
		switch {
		case answer.Error == nil:
			t.Fatalf("no error for the held call; stdout %s\nstderr %s", out, errs)
		case answer.Error.Code != int64(refusal.CodeApprovalRequired):
			t.Errorf("code %d, want -32061", answer.Error.Code)
		case answer.Error.Data.ApprovalID == "" || !strings.Contains(answer.Error.Message, "a person must approve approval "+answer.Error.Data.ApprovalID+", then send the identical call again (APPROVAL_REQUIRED)"):
			t.Errorf("message %q, data approval_id %q", answer.Error.Message, answer.Error.Data.ApprovalID)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		_, errs := run("aegis_wrongwrong_"+strings.Repeat("x", 40), initialize, initialized, call)
		if !strings.Contains(errs, "Fatal error") || !strings.Contains(errs, "the API key sent was wrong or missing") {
			t.Errorf("mcp-remote did not end with the reason:\n%s", errs)
		}
	})
}

// TestInspectorCLI: the Inspector's CLI. With the right key, a held call
// is reported with the approval id and the next step in its message. With
// a wrong key: run by a person (a terminal), it tries OAuth and ends with
// the gateway's explanation; run in CI as it tells CI to
// (--stored-auth-only), it ends with the 401's reason.
func TestInspectorCLI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := hostClients(t, ctx)
	cli := filepath.Join(dir, "node_modules", ".bin", "mcp-inspector")
	e := refusalEnv(t)
	inspect := func(key string, tty bool, extra ...string) string {
		cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
		defer ccancel()
		args := append([]string{cli, "--cli", e.URL + "/mcp", "--transport", "http", "--header", "Authorization: Bearer " + key}, extra...)
		var cmd *exec.Cmd
		if tty {
			script, err := exec.LookPath("script")
			if err != nil {
				t.Fatalf("MISSING TOOL script (util-linux), to give the Inspector a terminal: %v", err)
			}
			line := shellQuote(npmcache.NodeBin(dir))
			for _, a := range args {
				line += " " + shellQuote(a)
			}
			cmd = exec.CommandContext(cctx, script, "-qec", line, "/dev/null")
		} else {
			cmd = exec.CommandContext(cctx, npmcache.NodeBin(dir), args...)
		}
		cmd.Env = clientEnv(t)
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	t.Run("held call", func(t *testing.T) {
		out := inspect(e.KeyA, false, "--method", "tools/call", "--tool-name", "transfer", "--tool-arg", "to=acct-9", "amount=5")
		if !regexp.MustCompile(`Approval required for transfer on mock-primary; a person must approve approval [0-9a-f-]{36}, then send the identical call again \(APPROVAL_REQUIRED\)`).MatchString(out) {
			t.Errorf("the Inspector reported:\n%s", out)
		}
	})
	wrong := "aegis_wrongwrong_" + strings.Repeat("x", 40)
	t.Run("wrong key, in CI", func(t *testing.T) {
		out := inspect(wrong, false, "--stored-auth-only", "--method", "tools/list")
		if !strings.Contains(out, "invalid API key: the key sent is wrong") {
			t.Errorf("the Inspector reported:\n%s", out)
		}
	})
	t.Run("wrong key, at a terminal", func(t *testing.T) {
		out := inspect(wrong, true, "--method", "tools/list")
		if !strings.Contains(out, "the API key sent was wrong or missing") {
			t.Errorf("the Inspector reported:\n%s", out)
		}
	})
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
