//lint:file-ignore SA1019 sampling, roots and logging are deprecated as of 2026-07-28 (SEP-2577), but 2025-11-25 clients and servers use them and the gateway carries them
package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/registry"
)

// The values a row carries: clean, and one holding a card number (and,
// in a URI, a bare card number), which EGRESS_ACTION=block stops.
const (
	cleanValue  = "plain"
	secretValue = "card 4111 1111 1111 1111"
	secretInURI = "4111111111111111"
)

// messageRow is one client-to-server row of the message table, driven
// through the Go SDK client: send carries v in the parameter the row
// checks; at is the method the upstream receives it as (for a client's
// answer, "answer:" + the request's method, recorded by the upstream's
// tool); answer marks a client's answer (the value goes in the client's
// handler, the call is the upstream's tool "ask").
type messageRow struct {
	name     string
	at       string
	answer   string // "sampling", "elicitation", "roots": a client's answer
	send     func(ctx context.Context, cs *mcp.ClientSession, v, uri string) error
	noEgress bool // the row carries no value of the client's (logging/setLevel)
}

var messageRows = []messageRow{
	{name: "prompts/get arguments", at: "prompts/get", send: func(ctx context.Context, cs *mcp.ClientSession, v, _ string) error {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": v}})
		return err
	}},
	{name: "completion/complete argument.value", at: "completion/complete", send: func(ctx context.Context, cs *mcp.ClientSession, v, _ string) error {
		_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: v}})
		return err
	}},
	{name: "completion/complete context.arguments", at: "completion/complete", send: func(ctx context.Context, cs *mcp.ClientSession, v, _ string) error {
		_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "test://item/{id}"}, Argument: mcp.CompleteParamsArgument{Name: "id", Value: "x"}, Context: &mcp.CompleteContext{Arguments: map[string]string{"other": v}}})
		return err
	}},
	{name: "resources/read template URI", at: "resources/read", send: func(ctx context.Context, cs *mcp.ClientSession, _, uri string) error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://item/" + uri})
		return err
	}},
	{name: "resources/subscribe URI", at: "resources/subscribe", send: func(ctx context.Context, cs *mcp.ClientSession, _, uri string) error {
		return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://item/" + uri})
	}},
	{name: "resources/unsubscribe URI", at: "resources/unsubscribe", send: func(ctx context.Context, cs *mcp.ClientSession, _, uri string) error {
		return cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "test://item/" + uri})
	}},
	{name: "logging/setLevel", at: "logging/setLevel", noEgress: true, send: func(ctx context.Context, cs *mcp.ClientSession, _, _ string) error {
		return cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"})
	}},
	{name: "sampling result", at: "answer:sampling/createMessage", answer: "sampling"},
	{name: "elicitation answer", at: "answer:elicitation/create", answer: "elicitation"},
	{name: "roots/list result", at: "answer:roots/list", answer: "roots"},
}

// TestEveryMessageChecked is the table test of the message table's
// client-to-server rows × the checks on them, through the Go SDK client
// and a Go SDK upstream (internal/mcptest.Full), on /mcp/{server} and
// /mcp: each asserts what the upstream received and what the client got.
//
//   - clean: the value reaches the upstream; the client gets its answer.
//   - egress: a card number in the value is refused (-32053 to the client;
//     for a client's answer the upstream gets -32053 in its place), and
//     the upstream never sees it.
//   - stopped: once server a is stopped (POST .../servers/a/stop: a stop
//     in the store, read again on every decision here), nothing more
//     reaches it (-32062 to the client; a client's answer is dropped and
//     the server gets nothing, so its call ends without it).
//   - manifest: under a key manifest that grants only tools/call (a/echo;
//     a/* for the answers, so that the tool asking can run), the row's
//     message is refused (-32005) and the upstream never sees it.
func TestEveryMessageChecked(t *testing.T) {
	for _, endpoint := range []string{"/mcp/a", "/mcp"} {
		for _, check := range []string{"clean", "egress", "stopped", "manifest"} {
			for _, row := range messageRows {
				if check == "egress" && row.noEgress {
					continue
				}
				t.Run(map[string]string{"/mcp/a": "server", "/mcp": "aggregate"}[endpoint]+"/"+check+"/"+row.name, func(t *testing.T) {
					t.Parallel()
					runMessageRow(t, endpoint, check, row)
				})
			}
		}
	}
}

func runMessageRow(t *testing.T, endpoint, check string, row messageRow) {
	up := mcptest.StartFull(t)
	e := newEnv(t, func(s *config.Settings, m *memstore.Store) {
		s.KillSwitchRefresh = 0
		s.UpstreamTimeout = 3 * time.Second
		must(t, m.DeleteServer(context.Background(), "acme", "mock-primary"))
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "a", URL: up.URL}))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := e.KeyA
	if check == "manifest" {
		grant := "a/echo"
		if row.answer != "" {
			grant = "a/*"
		}
		var k registry.Key
		key, k = auth.NewKey("acme", "restricted", e.Clock.Now())
		k.Manifest = &policy.Manifest{Grants: map[string][]string{"tools/call": {grant}}}
		must(t, e.Store.PutKey(ctx, k))
	}
	v, uri := cleanValue, cleanValue
	if check == "egress" {
		v, uri = secretValue, secretInURI
	}
	stop := func() {
		must(t, e.Store.PutStop(context.Background(), killswitch.Stop{Tenant: "acme", Server: "a", Reason: "test", At: e.Clock.Now()}))
	}
	opts := &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if check == "stopped" {
				stop()
			}
			return &mcp.CreateMessageResult{Role: "assistant", Model: "m", Content: &mcp.TextContent{Text: v}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if check == "stopped" {
				stop()
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"card": v}}, nil
		},
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "rows", Version: "1"}, opts)
	client.AddRoots(&mcp.Root{URI: "file:///" + uri, Name: v})
	if row.answer == "roots" && check == "stopped" {
		// The SDK answers roots/list itself: stop the server as the
		// request arrives, before the answer is sent.
		client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "roots/list" {
					stop()
				}
				return next(ctx, method, req)
			}
		})
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.URL + endpoint, HTTPClient: bearerClient(key)},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	must(t, err)
	defer cs.Close()
	if check == "stopped" && row.answer == "" {
		stop()
	}
	up.Reset()

	if row.answer != "" {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"what": row.answer}})
		checkAnswerRow(t, check, row, up, v, res, err)
		return
	}
	err = row.send(ctx, cs, v, uri)
	want := map[string]int64{"clean": 0, "egress": -32053, "stopped": -32062, "manifest": -32005}[check]
	if got := rpcCode(err); got != want {
		t.Fatalf("client got %v (code %d), want code %d", err, got, want)
	}
	seen := up.Saw(row.at, "")
	switch {
	case check == "clean" && !up.Saw(row.at, uri) && !row.noEgress:
		t.Fatalf("the upstream did not receive %s with %q: %+v", row.at, uri, up.Received())
	case check == "clean" && !seen:
		t.Fatalf("the upstream did not receive %s: %+v", row.at, up.Received())
	case check != "clean" && seen:
		t.Fatalf("the upstream received %s (%s): %+v", row.at, check, up.Received())
	}
}

// checkAnswerRow checks a client's answer row: the upstream's tool "ask"
// records what came back to it as the client's answer.
func checkAnswerRow(t *testing.T, check string, row messageRow, up *mcptest.Full, v string, res *mcp.CallToolResult, err error) {
	t.Helper()
	var got *mcptest.Received
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && got == nil; time.Sleep(10 * time.Millisecond) {
		for _, r := range up.Received() {
			if r.Method == row.at {
				got = &r
			}
		}
	}
	switch check {
	case "clean":
		if err != nil || got == nil || got.Err != "" || !strings.Contains(got.Params, v) {
			t.Fatalf("call: %v; the upstream got %+v, want the client's answer with %q", err, got, v)
		}
		if text := textOf(res); !strings.Contains(text, v) {
			t.Fatalf("the client got %q, want the answer echoed", text)
		}
	case "egress", "manifest":
		// The refusal's message: -32053 "Sensitive data in arguments",
		// -32005 "Outside the session's grant".
		msg := map[string]string{"egress": "Sensitive data", "manifest": "grant"}[check]
		if err != nil || got == nil || got.Err == "" || !strings.Contains(got.Err, msg) || strings.Contains(got.Err+got.Params, v) {
			t.Fatalf("call: %v; the upstream got %+v, want the refusal (%q) in the client's place", err, got, msg)
		}
		if text := textOf(res); !strings.Contains(text, "error: ") {
			t.Fatalf("the client got %q, want the tool's report of the refused answer", text)
		}
	case "stopped":
		// Nothing reaches the stopped server: its request waits until
		// the call's deadline ends it.
		if got != nil && got.Err == "" {
			t.Fatalf("the stopped upstream got the client's answer: %+v", got)
		}
	}
}

// rpcCode is the JSON-RPC error code of err (0: none).
func rpcCode(err error) int64 {
	if err == nil {
		return 0
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return -1
}

// TestUnaskedResponseRefused: a JSON-RPC response POSTed to /mcp with an
// id no upstream asked about is refused (HTTP 400) and audited, and
// reaches no server, even when its id has the form of a relayed one.
func TestUnaskedResponseRefused(t *testing.T) {
	up := mcptest.StartFull(t)
	e := newEnv(t, func(s *config.Settings, m *memstore.Store) {
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "a", URL: up.URL}))
	})
	hdr := []string{"Accept", "application/json, text/event-stream"}
	init := e.post(t, "/mcp/a", e.KeyA, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"x","version":"1"}}}`, hdr...)
	sid := init.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("no session: %d %s", init.Status, init.Raw)
	}
	// A request first, so that the session has an upstream session of a.
	if r := e.post(t, "/mcp/a", e.KeyA, call("2", "echo", `{"x":1}`), append(hdr, "Mcp-Session-Id", sid)...); r.Error != nil {
		t.Fatalf("echo: %s", r.Raw)
	}
	up.Reset()
	for _, id := range []string{`"a:1"`, `"a:\"x\""`, `7`, `"mock-primary:1"`} {
		body := `{"jsonrpc":"2.0","id":` + id + `,"result":{"action":"accept","content":{"card":"` + secretValue + `"}}}`
		r := e.post(t, "/mcp", e.KeyA, body, append(hdr, "Mcp-Session-Id", sid)...)
		if r.Status != 400 {
			t.Fatalf("response with id %s: HTTP %d %s, want 400", id, r.Status, r.Raw)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if got := up.Received(); len(got) != 0 {
		t.Fatalf("the upstream received %+v", got)
	}
	n := 0
	for _, r := range auditRecords(t, e) {
		if r.Method == "response" && r.Slot == "asked" && r.Code == -32600 {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d refused responses audited, want 4", n)
	}
}

// TestSessionManifestStopsServerBound: a session whose own manifest (in
// initialize's _meta) grants only tools/call [a/echo] calls a/echo, and
// nothing else reaches server a: resources/subscribe, unsubscribe and
// logging/setLevel are -32005 (grant), and the upstream receives none of
// them.
func TestSessionManifestStopsServerBound(t *testing.T) {
	up := mcptest.StartFull(t)
	e := newEnv(t, func(s *config.Settings, m *memstore.Store) {
		must(t, m.DeleteServer(context.Background(), "acme", "mock-primary"))
		must(t, m.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "a", URL: up.URL}))
	})
	for _, path := range []string{"/mcp/a", "/mcp"} {
		hdr := []string{"Accept", "application/json, text/event-stream"}
		init := e.post(t, path, e.KeyA, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"},"_meta":{"aegis/manifest":{"grants":{"tools/call":["a/echo"]}}}}}`, hdr...)
		sid := init.Header.Get("Mcp-Session-Id")
		if sid == "" {
			t.Fatalf("%s: no session: %d %s", path, init.Status, init.Raw)
		}
		hdr = append(hdr, "Mcp-Session-Id", sid)
		if r := e.post(t, path, e.KeyA, call("2", "echo", `{"x":1}`), hdr...); r.Error != nil {
			t.Fatalf("%s: echo: %s", path, r.Raw)
		}
		up.Reset()
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"test://static"}}`,
			`{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"test://static"}}`,
			`{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug"}}`,
			`{"jsonrpc":"2.0","id":6,"method":"prompts/get","params":{"name":"greet"}}`,
		} {
			if r := e.post(t, path, e.KeyA, body, hdr...); r.code() != -32005 {
				t.Fatalf("%s: %s answered %s, want -32005", path, body, r.Raw)
			}
		}
		// The gateway's own catalog listings may reach it; none of these.
		for _, m := range []string{"resources/subscribe", "resources/unsubscribe", "logging/setLevel", "prompts/get"} {
			if up.Saw(m, "") {
				t.Fatalf("%s: the upstream received %s: %+v", path, m, up.Received())
			}
		}
	}
}
