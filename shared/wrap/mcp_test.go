package wrap

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// End to end: the Go SDK's client, through wrap (a separate process, as an
// MCP client would start it), to a real stdio server built on the Go SDK.
func TestMCPClientThroughWrap(t *testing.T) {
	for _, enforce := range []bool{false, true} {
		name := map[bool]string{false: "default", true: "policy"}[enforce]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ran := filepath.Join(dir, "ran")
			audit := filepath.Join(dir, "audit.jsonl")
			args := []string{roleFlag + "wrap"}
			if enforce {
				args = append(args, "--policy", writeFile(t, "policy.yaml", testPolicy), "--audit", audit)
			}
			args = append(append(args, "--"), childArgv(t, "mcpserver", ran)...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "wraptest-client", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(self(t), args...)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatalf("ping: %v", err)
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 3 {
				t.Fatalf("tools/list: %v %v", tools, err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			if err != nil {
				t.Fatalf("echo: %v", err)
			}
			if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "echo:hi" {
				t.Fatalf("echo result %+v", res.Content[0])
			}
			for tool, word := range map[string]string{"shell_exec": "POLICY_DENIED", "pay_invoice": "PENDING_APPROVAL"} {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}})
				if !enforce {
					if err != nil {
						t.Fatalf("%s without a policy: %v", tool, err)
					}
					continue
				}
				var we *jsonrpc.Error
				if !errors.As(err, &we) {
					t.Fatalf("%s: got %v, want a JSON-RPC error", tool, err)
				}
				var data struct {
					Aegis struct{ Layer, Code string }
				}
				_ = json.Unmarshal(we.Data, &data)
				// The Go SDK's client speaks MCP 2026-07-28 to a child that
				// offers it (the child here is a Go SDK server), so wrap's
				// frame carries -33042: that version forbids -32042.
				if we.Code != int64(refusal.MCP20260728.Wire(refusal.CodeWrapRefused)) || we.Code != -33042 || !strings.HasPrefix(we.Message, "aegis wrap refused this tools/call of \""+tool+"\" by rule ") || !strings.HasSuffix(we.Message, "("+word+")") || data.Aegis.Layer != "wrap" || data.Aegis.Code != word {
					t.Errorf("%s: got code %d message %q data %s", tool, we.Code, we.Message, we.Data)
				}
			}
			if err := cs.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			b, _ := os.ReadFile(ran)
			want := "echo\n"
			if !enforce {
				want = "echo\npay_invoice\nshell_exec\n"
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				if len(lines) != 3 {
					t.Errorf("server ran %q", b)
				}
				return
			}
			if string(b) != want {
				t.Errorf("server ran %q, want %q: a refused call reached the child", b, want)
			}
			recs := readRecords(t, audit)
			if len(recs) != 3 {
				t.Errorf("%d records, want 3", len(recs))
			}
		})
	}
}
