//lint:file-ignore SA1019 sampling is deprecated as of 2026-07-28 (SEP-2577), but 2025-11-25 clients and servers use it and the gateway relays it

package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestVersionMatrix: a client of either protocol version (the Go SDK
// client speaking 2025-11-25 over a session, or 2026-07-28 stateless)
// reaches an upstream of either version (the everything-server stateful,
// or stateless, where it speaks 2026-07-28) through /mcp and
// /mcp/{server}: tools, prompts, resources, templates, completion, and
// progress notifications streamed during a call.
func TestVersionMatrix(t *testing.T) {
	for _, up := range []struct {
		name      string
		stateless bool
	}{{"upstream 2025 stateful", false}, {"upstream 2026 stateless", true}} {
		t.Run(up.name, func(t *testing.T) {
			upstreamURL := mcptest.Conformance(t, up.stateless)
			e := newEnv(t, func(_ *config.Settings, m *memstore.Store) {
				must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "everything", URL: upstreamURL}))
			})
			for _, tc := range []struct {
				client, path, wantVersion string
			}{
				{"2025-11-25", "/mcp", "2025-11-25"},
				{"2025-11-25", "/mcp/everything", "2025-11-25"},
				{"", "/mcp", "2026-07-28"},
				{"", "/mcp/everything", "2026-07-28"},
			} {
				t.Run("client "+tc.wantVersion+" "+tc.path, func(t *testing.T) {
					exercise(t, e, tc.path, tc.client, tc.wantVersion)
				})
			}
		})
	}
}

// exercise runs every carried method once with the Go SDK client.
func exercise(t *testing.T, e *env, path, version, wantVersion string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var progress []float64
	client := mcp.NewClient(&mcp.Implementation{Name: "matrix", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Progress)
			mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: e.URL + path, HTTPClient: bearerClient(e.KeyA),
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != wantVersion {
		t.Fatalf("negotiated %q, want %q", got, wantVersion)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"}); err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(prompts.Prompts) == 0 {
		t.Fatalf("prompts/list: %v %+v", err, prompts)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_simple_prompt"}); err != nil {
		t.Fatalf("prompts/get: %v", err)
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil || len(res.Resources) == 0 {
		t.Fatalf("resources/list: %v %+v", err, res)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://static-text"})
	if err != nil || len(read.Contents) == 0 {
		t.Fatalf("resources/read: %v %+v", err, read)
	}
	tmpls, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpls.ResourceTemplates) == 0 {
		t.Fatalf("resources/templates/list: %v %+v", err, tmpls)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/42/data"}); err != nil {
		t.Fatalf("resources/read by template: %v", err)
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{
		Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
		Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "a"},
	}); err != nil {
		t.Fatalf("completion/complete: %v", err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_progress", Meta: mcp.Meta{"progressToken": "p1"}}); err != nil {
		t.Fatalf("tools/call with progress: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 {
		t.Fatal("no progress notification reached the client")
	}
}

// TestAggregateTwoServers: two real upstreams in one tenant's /mcp whose
// tools, prompts, resources and templates all collide. The prefixed names
// reach the server they name (the audit record says which); a plain
// collided name is -32601 naming the choices; reads are audited with
// their method; a server-to-client request (sampling) from one of them is
// relayed to the client and its answer carried back.
func TestAggregateTwoServers(t *testing.T) {
	alpha, beta := mcptest.Conformance(t, false), mcptest.Conformance(t, false)
	e := newEnv(t, func(_ *config.Settings, m *memstore.Store) {
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "alpha", URL: alpha}))
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "beta", URL: beta}))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "aggregate", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "answered by the client"}}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL + "/mcp", HTTPClient: bearerClient(e.KeyA)},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	names := func(list []string) map[string]bool {
		m := map[string]bool{}
		for _, n := range list {
			m[n] = true
		}
		return m
	}
	tools, err := cs.ListTools(ctx, nil)
	must(t, err)
	var tn []string
	for _, tl := range tools.Tools {
		tn = append(tn, tl.Name)
	}
	prompts, err := cs.ListPrompts(ctx, nil)
	must(t, err)
	var pn []string
	for _, p := range prompts.Prompts {
		pn = append(pn, p.Name)
	}
	resources, err := cs.ListResources(ctx, nil)
	must(t, err)
	var rn []string
	for _, r := range resources.Resources {
		rn = append(rn, r.URI)
	}
	tmpls, err := cs.ListResourceTemplates(ctx, nil)
	must(t, err)
	var mn []string
	for _, r := range tmpls.ResourceTemplates {
		mn = append(mn, r.URITemplate)
	}
	for _, tc := range []struct {
		list       string
		got        map[string]bool
		want, gone string
	}{
		{"tools", names(tn), "alpha.test_simple_text", "test_simple_text"},
		{"tools", names(tn), "beta.test_simple_text", "test_simple_text"},
		{"prompts", names(pn), "beta.test_simple_prompt", "test_simple_prompt"},
		{"resources", names(rn), "alpha.test://static-text", "test://static-text"},
		{"templates", names(mn), "beta.test://template/{id}/data", "test://template/{id}/data"},
	} {
		if !tc.got[tc.want] || tc.got[tc.gone] {
			t.Errorf("%s: want %q and not %q in %v", tc.list, tc.want, tc.gone, tc.got)
		}
	}

	for _, tc := range []struct {
		name      string
		call      func() error
		wantErr   string // "" for success
		method    string // audited method; "" when not audited
		server    string
		auditTool string
	}{
		{"prefixed tool", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta.test_simple_text"})
			return err
		}, "", "tools/call", "beta", "test_simple_text"},
		{"plain collided tool", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
			return err
		}, "call one of alpha.test_simple_text, beta.test_simple_text", "tools/call", "", ""},
		{"prefixed prompt", func() error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha.test_simple_prompt"})
			return err
		}, "", "prompts/get", "alpha", "prompt:test_simple_prompt"},
		{"plain collided prompt", func() error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_simple_prompt"})
			return err
		}, "call one of alpha.test_simple_prompt, beta.test_simple_prompt", "prompts/get", "", ""},
		{"prefixed resource", func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "beta.test://static-text"})
			return err
		}, "", "resources/read", "beta", "resource:test://static-text"},
		{"prefixed templated resource", func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "alpha.test://template/7/data"})
			return err
		}, "", "resources/read", "alpha", "resource:test://template/7/data"},
		{"plain templated resource of two servers", func() error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://template/7/data"})
			return err
		}, "call one of alpha.test://template/7/data, beta.test://template/7/data", "resources/read", "", ""},
		{"completion of a prefixed prompt", func() error {
			_, err := cs.Complete(ctx, &mcp.CompleteParams{
				Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "beta.test_prompt_with_arguments"},
				Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "a"},
			})
			return err
		}, "", "completion/complete", "beta", "prompt:test_prompt_with_arguments"},
		{"sampling relayed to the client", func() error {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha.test_sampling", Arguments: map[string]any{"prompt": "hi"}})
			if err == nil && (res.IsError || !strings.Contains(textOf(res), "answered by the client")) {
				t.Errorf("sampling result %q does not carry the client's answer", textOf(res))
			}
			return err
		}, "", "tools/call", "alpha", "test_sampling"},
		{"the relayed request is audited", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta.test_sampling", Arguments: map[string]any{"prompt": "hi"}})
			return err
		}, "", "sampling/createMessage", "beta", ""},
		{"and the client's answer", func() error {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta.test_sampling", Arguments: map[string]any{"prompt": "hi"}})
			return err
		}, "", "response", "beta", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(auditRecords(t, e))
			err := tc.call()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			// The record is written once the answer is: wait for it.
			var found bool
			var recs []audit.Record
			for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				recs = auditRecords(t, e)
				for _, r := range recs[before:] {
					if r.Method == tc.method && r.Server == tc.server && (tc.auditTool == "" || r.Tool == tc.auditTool) {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("no audit record %s server %q tool %q among %+v", tc.method, tc.server, tc.auditTool, recs[before:])
			}
		})
	}
}

func auditRecords(t *testing.T, e *env) []audit.Record {
	t.Helper()
	now := e.Clock.Now()
	recs, _, err := e.Store.Query(context.Background(), audit.Query{Tenant: "acme", From: now.Add(-time.Hour), To: now.Add(time.Hour), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// bearerClient is an HTTP client that sends key as the bearer token.
func bearerClient(key string) *http.Client {
	return &http.Client{Transport: bearer{key: key, base: clientTransport}}
}

// clientTransport is the transport of the tests' MCP clients: not
// http.DefaultTransport, whose idle connections every httptest.Server's
// Close closes, which fails a request of a parallel test that has just
// picked one ("CloseIdleConnections called", seen once in 200 runs of
// TestEveryMessageChecked).
var clientTransport = http.DefaultTransport.(*http.Transport).Clone()

// TestGetStream: the session's GET stream carries what an upstream sends
// outside any request: a tools/list_changed (after which the gateway lists
// the server again, so the new tool is there) and the
// notifications/resources/updated of a subscription (the everything-server
// updates test://watched-resource every 3 s).
func TestGetStream(t *testing.T) {
	upstreamURL := mcptest.Conformance(t, false)
	e := newEnv(t, func(_ *config.Settings, m *memstore.Store) {
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "everything", URL: upstreamURL}))
	})
	for _, path := range []string{"/mcp", "/mcp/everything"} {
		t.Run(path, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			changed, updated := make(chan struct{}, 16), make(chan string, 16)
			client := mcp.NewClient(&mcp.Implementation{Name: "listener", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
				ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL + path, HTTPClient: bearerClient(e.KeyA)},
				&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			must(t, err)
			defer cs.Close()
			// The first call opens the upstream session, and the GET
			// stream the client holds listens on it from its next opening;
			// a subscription then waits for the stream's updates.
			must(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://watched-resource"}))
			select {
			case uri := <-updated:
				if uri != "test://watched-resource" {
					t.Fatalf("updated %q", uri)
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("no notifications/resources/updated within 15 s; log:\n%s", e.logs())
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_trigger_tool_change"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("no notifications/tools/list_changed within 10 s")
			}
			tools, err := cs.ListTools(ctx, nil)
			must(t, err)
			var found bool
			for _, tl := range tools.Tools {
				found = found || tl.Name == "__transient_tool_for_list_changed"
			}
			if !found {
				t.Error("the tool added upstream is not listed after list_changed")
			}
		})
	}
}
