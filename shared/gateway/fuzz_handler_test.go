package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/registry"
)

// fuzzSecret is the brokered credential of the fuzzed gateway's upstream.
// It has characters that every encoding spells differently.
const fuzzSecret = "Bearer sk-fuzz/Secret+Value=42&q"

// fuzzForms are the spellings of fuzzSecret that must never leave the
// gateway (docs/security.md): raw, JSON-escaped, URL- and
// percent-encoded, base64 (standard, URL-safe, unpadded) and hex.
func fuzzForms() []string {
	esc, _ := json.Marshal(fuzzSecret)
	b := []byte(fuzzSecret)
	return []string{
		fuzzSecret, string(esc[1 : len(esc)-1]),
		url.QueryEscape(fuzzSecret), url.PathEscape(fuzzSecret),
		base64.StdEncoding.EncodeToString(b), base64.URLEncoding.EncodeToString(b),
		base64.RawStdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b)),
		// The secret part alone, without the scheme.
		"sk-fuzz/Secret+Value=42&q", base64.StdEncoding.EncodeToString([]byte("sk-fuzz/Secret+Value=42&q")),
	}
}

// leakyUpstream is the demo MCP server plus a tool, whoami, that answers
// with the credential it was sent, as an upstream that echoes its
// headers would.
func leakyUpstream(t testing.TB) *httptest.Server {
	srv := demo.NewMCPServer(func(string) {})
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "Tells what credential it got."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			got := ""
			if req.Extra != nil && req.Extra.Header != nil {
				got = req.Extra.Header.Get("X-Upstream-Key")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you sent " + got + " (" + base64.StdEncoding.EncodeToString([]byte(got)) + ")"}}}, nil, nil
		})
	// Stateless: the upstream keeps no session per fuzzed initialize.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	return up
}

// fuzzPaths are the paths a fuzz input picks from (by its path byte); a
// fuzzed suffix may follow.
var fuzzPaths = []string{"/mcp", "/mcp/" + testServer, "/v1/invoke", "/mcp/nosuch", "/", "/health", "/admin/v1/tenants", "/mcp/" + testServer + "/x",
	"/t/" + testTenant + "/mcp", "/t/" + testTenant + "/mcp/" + testServer, "/t/other/v1/invoke", "/.well-known/oauth-protected-resource/t/" + testTenant + "/mcp"}

var fuzzMethods = []string{http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodPut, http.MethodOptions}

// FuzzHandler drives the whole gateway handler (in process, embedded
// store, a brokered credential configured for its upstream) with fuzzed
// bodies, headers and paths, and checks what every answer must be: no
// panic; a 200 is JSON-RPC (a response object or an array of them, as JSON
// or as server-sent events); a 202 is empty; a 4xx is {"error":"..."} or a
// JSON-RPC error (400 -32700), or empty for a notification; every answer
// has X-Correlation-ID; and the
// brokered credential is in no body and no header, in any of fuzzForms.
func FuzzHandler(f *testing.F) {
	up := leakyUpstream(f)
	// A fresh gateway and store per input (the harness ties them to one
	// *testing.T), in front of one upstream: an input's outcome does not
	// depend on the inputs before it.
	env := func(t *testing.T) *upEnv {
		return newUpEnv(t, up.URL+"/", upOpts{
			cred: &registry.Credential{Header: "X-Upstream-Key", Ref: "env:UP_KEY"},
			env:  map[string]string{"UP_KEY": fuzzSecret},
		})
	}
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"tools.echo","arguments":{"message":"` + fuzzSecret + `"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nosuch","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}]`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"message":"\ud800"}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"resources/list"}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":10,"result":{}}`,
		`{`, ``, `null`, `[]`, `{"jsonrpc":"1.0","id":1,"method":"ping"}`,
	}
	for i, s := range seeds {
		f.Add([]byte(s), byte(i%3), byte(i), byte(0), "", "application/json", "2025-06-18", "application/json, text/event-stream", "")
	}
	f.Add([]byte(seeds[2]), byte(1), byte(0), byte(1), "not-a-session", "text/plain", "1999-01-01", "text/html", "/%2e%2e")
	f.Add([]byte(seeds[3]), byte(2), byte(2), byte(2), "", "application/json; charset=utf-8", "", "", "?x=1")
	f.Fuzz(func(t *testing.T, body []byte, authSel, pathSel, methodSel byte, session, ctype, proto, accept, suffix string) {
		e := env(t)
		path := fuzzPaths[int(pathSel)%len(fuzzPaths)] + suffix
		method := fuzzMethods[int(methodSel)%len(fuzzMethods)]
		req, err := http.NewRequest(method, "http://gateway.test"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		switch authSel % 3 {
		case 0:
			req.Header.Set("Authorization", "Bearer "+e.Key)
		case 1:
			req.Header.Set("Authorization", session) // garbage
		}
		for k, v := range map[string]string{"Mcp-Session-Id": session, "Content-Type": ctype, "MCP-Protocol-Version": proto, "Accept": accept} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		e.GW.ServeHTTP(w, req)
		res := w.Result()
		out := w.Body.Bytes()
		checkAnswer(t, res.StatusCode, res.Header, out, isNotification(body))
		var hdrs strings.Builder
		for k, vs := range res.Header {
			hdrs.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
		}
		for _, form := range fuzzForms() {
			if bytes.Contains(out, []byte(form)) || strings.Contains(hdrs.String(), form) {
				t.Fatalf("the brokered credential (as %q) left the gateway: HTTP %d\n%s\n%s", form, res.StatusCode, hdrs.String(), out)
			}
		}
	})
}

// isNotification reports whether body is one JSON-RPC notification (a
// method, and no id or a null id).
func isNotification(body []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	id, hasID := m["id"]
	_, hasMethod := m["method"]
	return hasMethod && (!hasID || string(bytes.TrimSpace(id)) == "null")
}

// checkAnswer fails t unless the answer is well formed for its status. A
// notification refused by the transport's header rules gets its status
// and no body: it never produces a JSON-RPC error (seed 004).
func checkAnswer(t *testing.T, status int, h http.Header, body []byte, notification bool) {
	t.Helper()
	if h.Get("X-Correlation-ID") == "" {
		t.Fatalf("HTTP %d without X-Correlation-ID: %s", status, body)
	}
	switch {
	case status == http.StatusOK && h.Get("Access-Control-Allow-Origin") == "*":
		// Protected resource metadata (RFC 9728), the one 200 that is not
		// JSON-RPC.
		var m struct {
			Resource string `json:"resource"`
		}
		if err := json.Unmarshal(body, &m); err != nil || m.Resource == "" {
			t.Fatalf("HTTP 200 metadata without a resource: %q", body)
		}
	case status == http.StatusOK:
		if strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			for _, line := range strings.Split(string(body), "\n") {
				if data, ok := strings.CutPrefix(line, "data:"); ok && strings.TrimSpace(data) != "" {
					checkRPC(t, []byte(data))
				}
			}
			return
		}
		checkRPC(t, body)
	case status == http.StatusAccepted:
		if len(body) != 0 {
			t.Fatalf("HTTP 202 with a body: %q", body)
		}
	case status == http.StatusNoContent:
		if len(body) != 0 {
			t.Fatalf("HTTP 204 with a body: %q", body)
		}
	case status >= 400 && status < 600 && notification && len(body) == 0:
		return
	case status >= 400 && status < 600:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatalf("HTTP %d answer is not a JSON object: %q", status, body)
		}
		if raw, ok := m["error"]; ok {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				return // {"error":"..."}
			}
		}
		checkRPC(t, body) // a JSON-RPC error (a parse error is HTTP 400)
		if _, ok := m["error"]; !ok {
			t.Fatalf("HTTP %d answer has neither shape: %s", status, body)
		}
	default:
		t.Fatalf("unexpected HTTP %d: %s", status, body)
	}
}

// checkRPC fails t unless b is one JSON-RPC 2.0 response or a non-empty
// array of them.
func checkRPC(t *testing.T, b []byte) {
	t.Helper()
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if err := json.Unmarshal(b, &arr); err != nil || len(arr) == 0 {
			t.Fatalf("batch answer %q: %v", b, err)
		}
		for _, m := range arr {
			checkRPC(t, m)
		}
		return
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    *int    `json:"code"`
			Message *string `json:"message"`
		} `json:"error"`
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || json.Unmarshal(b, &members) != nil {
		t.Fatalf("answer is not JSON-RPC: %q: %v", b, err)
	}
	if _, hasID := members["id"]; m.JSONRPC != "2.0" || !hasID || (m.Result == nil) == (m.Error == nil) {
		t.Fatalf("answer is not a JSON-RPC 2.0 response (jsonrpc, id, and one of result or error): %s", b)
	}
	if m.Error != nil && (m.Error.Code == nil || m.Error.Message == nil) {
		t.Fatalf("JSON-RPC error without code or message: %s", b)
	}
}
