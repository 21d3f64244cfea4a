package upstream

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/registry"
)

const annotated = `{"name":"lookup","inputSchema":{"type":"object","properties":{
	"region":{"type":"string","x-mcp-header":"Region"},
	"count":{"type":"integer","x-mcp-header":"Count"},
	"flag":{"type":"boolean","x-mcp-header":"Flag"},
	"note":{"type":"string","x-mcp-header":"Note"},
	"nested":{"type":"object","properties":{"id":{"type":"string","x-mcp-header":"Id"}}},
	"plain":{"type":"string"}}}}`

func TestParamHeaders(t *testing.T) {
	params := json.RawMessage(`{"name":"lookup","arguments":{"region":"eu-west-1","count":42,"flag":true,"note":" café ","nested":{"id":"x-1"},"plain":"p"}}`)
	got := paramHeaders(json.RawMessage(annotated), params)
	want := map[string]string{
		"Mcp-Param-Region": "eu-west-1",
		"Mcp-Param-Count":  "42",
		"Mcp-Param-Flag":   "true",
		"Mcp-Param-Note":   "=?base64?IGNhZsOpIA==?=",
		"Mcp-Param-Id":     "x-1",
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, tc := range []string{`{"count":1.5}`, `{"count":9007199254740993}`, `{"count":"7"}`, `{"region":null}`, `{"region":["a"]}`} {
		h := paramHeaders(json.RawMessage(annotated), json.RawMessage(`{"name":"lookup","arguments":`+tc+`}`))
		if strings.Contains(tc, `"7"`) {
			if h["Mcp-Param-Count"] != "7" {
				t.Errorf("%s: a string value is sent as is: %v", tc, h)
			}
			continue
		}
		if len(h) != 0 {
			t.Errorf("%s: want no header, got %v", tc, h)
		}
	}
	if h := paramHeaders(json.RawMessage(`{"name":"x","inputSchema":{"type":"object"}}`), params); h != nil {
		t.Errorf("unannotated tool: %v", h)
	}
}

// TestParamHeadersAcceptedBySDK: a Go SDK v1.8.0 stateless (2026-07-28)
// server checks Mcp-Param-* against the body and refuses a call without
// them; through our client, with the tool definition, the call runs.
func TestParamHeadersAcceptedBySDK(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "sdk-upstream", Version: "1"}, nil)
	var def mcp.Tool
	if err := json.Unmarshal([]byte(annotated), &def); err != nil {
		t.Fatal(err)
	}
	s.AddTool(&def, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "found"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c := &Client{HTTP: &http.Client{}, Timeout: 5 * time.Second}
	rs := &registry.Server{Tenant: "t", Name: "s", URL: "http://" + ln.Addr().String()}
	ctx := context.Background()
	sess, err := c.Initialize(ctx, rs)
	if err != nil || !IsModern(sess.Protocol) {
		t.Fatalf("initialize: %+v %v", sess, err)
	}
	params := json.RawMessage(`{"name":"lookup","arguments":{"region":"eu-west-1","count":3,"flag":false,"note":"naïve","nested":{"id":"n"}}}`)
	send := func(toolDef json.RawMessage) (string, error) {
		resp, _, err := c.Call(ctx, &Exchange{Server: rs, Session: sess, ID: json.RawMessage(`1`), Method: "tools/call", Params: params, ToolDef: toolDef})
		if err != nil {
			return "", err
		}
		return string(resp.Result) + string(resp.Error), nil
	}
	if out, err := send(nil); err == nil && strings.Contains(out, "found") {
		t.Fatalf("the SDK server accepted a call without its Mcp-Param headers (%s): the test proves nothing", out)
	}
	out, err := send(json.RawMessage(annotated))
	if err != nil || !strings.Contains(out, "found") {
		t.Fatalf("with the tool definition: %v %s", err, out)
	}
}
