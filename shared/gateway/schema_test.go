package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/schema"
)

// countedUpstream is a demo upstream behind a proxy that counts the
// tools/call requests that reach it, whatever the upstream then makes of
// them (the Go SDK validates arguments itself, so the demo's own tool
// counters cannot tell a forwarded invalid call from a refused one).
type countedUpstream struct {
	URL   string
	calls atomic.Int64
}

func startCountedUpstream(t *testing.T) *countedUpstream {
	t.Helper()
	d, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	target, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	rp := httputil.NewSingleHostReverseProxy(target)
	u := &countedUpstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &m) == nil && m.Method == "tools/call" {
			u.calls.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL + "/mcp"
	return u
}

// schemaEnv is the harness's gateway with INPUT_VALIDATION=mode and acme's
// mock-primary behind a counting proxy.
func schemaEnv(t *testing.T, mode string) (*env, *countedUpstream) {
	up := startCountedUpstream(t)
	e := newEnv(t, func(s *config.Settings, st *memstore.Store) {
		s.InputValidation = mode
		// The cases carry an AWS key id as a member name: the egress
		// check would refuse them, and this test is about schemas.
		s.EgressAction = "off"
		must(t, st.PutServer(context.Background(), registry.Server{Tenant: "acme", Name: "mock-primary", URL: up.URL}))
	})
	return e, up
}

// TestInputValidation: the demo's echo tool lists {"message": string}
// (required, nothing else). Under block a call that fails it is -32602
// with the pointer and keyword and never reaches the upstream; under
// monitor and off it goes through.
func TestInputValidation(t *testing.T) {
	bad := []struct {
		name, args, pointer, keyword string
	}{
		{"wrong type", `{"message":5}`, "/message", "type"},
		{"missing required", `{}`, "", "required"},
		{"absent arguments", "", "", "required"},
		{"additional property", `{"message":"hi","AKIAIOSFODNN7EXAMPLE":1}`, "", "additionalProperties"},
	}
	body := func(args string) string {
		if args == "" {
			return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
		}
		return call("1", "echo", args)
	}

	t.Run("block", func(t *testing.T) {
		e, up := schemaEnv(t, "block")
		for _, tc := range bad {
			r := e.post(t, "/v1/invoke", e.KeyA, body(tc.args))
			if r.Status != http.StatusOK || r.code() != -32602 || r.word() != "INVALID_PARAMS" {
				t.Fatalf("%s: %d %s", tc.name, r.Status, r.Raw)
			}
			var d struct {
				Pointer *string `json:"pointer"`
				Keyword string  `json:"keyword"`
			}
			if err := json.Unmarshal(r.Error.Data, &d); err != nil || d.Pointer == nil || *d.Pointer != tc.pointer || d.Keyword != tc.keyword {
				t.Fatalf("%s: data %s, want pointer %q keyword %q", tc.name, r.Error.Data, tc.pointer, tc.keyword)
			}
			if strings.Contains(string(r.Raw), "AKIA") {
				t.Fatalf("%s: the refusal echoes the arguments: %s", tc.name, r.Raw)
			}
			wantSchemaFinding(t, e.lastRecord(t), tc.keyword, audit.ActionBlocked)
		}
		if n := up.calls.Load(); n != 0 {
			t.Fatalf("the upstream got %d tools/call for calls refused by their schema", n)
		}
		r := e.post(t, "/v1/invoke", e.KeyA, call("2", "echo", `{"message":"hello"}`))
		if r.Error != nil || !strings.Contains(string(r.Result), "hello") {
			t.Fatalf("a valid call: %s", r.Raw)
		}
		if n := up.calls.Load(); n != 1 {
			t.Fatalf("the upstream got %d tools/call, want the valid one", n)
		}
		if logs := e.logs(); strings.Contains(logs, "AKIA") {
			t.Fatalf("logs echo the arguments: %s", logs)
		}
	})

	for _, mode := range []string{"monitor", "off"} {
		t.Run(mode, func(t *testing.T) {
			e, up := schemaEnv(t, mode)
			for i, tc := range bad {
				r := e.post(t, "/v1/invoke", e.KeyA, body(tc.args))
				if r.word() != "" {
					t.Fatalf("%s: refused by aegis: %s", tc.name, r.Raw)
				}
				if n := up.calls.Load(); n != int64(i+1) {
					t.Fatalf("%s: the upstream got %d tools/call, want %d", tc.name, n, i+1)
				}
				if mode == "monitor" {
					wantSchemaFinding(t, e.lastRecord(t), tc.keyword, audit.ActionLogged)
				} else if rec := e.lastRecord(t); slices.ContainsFunc(rec.Findings, func(f audit.Finding) bool { return f.Kind == schema.FindingKind }) {
					// Other findings are the upstream's: its own validator's
					// error names the AWS key id, and the result scan masks it.
					t.Fatalf("%s: INPUT_VALIDATION=off recorded a schema finding: %+v", tc.name, rec.Findings)
				}
			}
			logs := e.logs()
			if strings.Contains(logs, "AKIA") {
				t.Fatalf("logs echo the arguments: %s", logs)
			}
			warned := strings.Count(logs, "arguments fail the tool's inputSchema")
			if mode == "off" {
				if warned != 0 {
					t.Fatalf("INPUT_VALIDATION=off logged violations: %s", logs)
				}
				return
			}
			if warned != len(bad) {
				t.Fatalf("monitor logged %d violations, want %d: %s", warned, len(bad), logs)
			}
			for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
				var rec struct{ Level, Msg, Tool, Server, Pointer, Keyword string }
				if json.Unmarshal([]byte(line), &rec) != nil || !strings.Contains(rec.Msg, "inputSchema") {
					continue
				}
				if rec.Level != "WARN" || rec.Tool != "echo" || rec.Server != "mock-primary" || rec.Keyword == "" {
					t.Fatalf("monitor log line: %s", line)
				}
			}
		})
	}
}

// wantSchemaFinding: rec holds the schema finding for keyword, with act,
// and no other finding in the arguments (egress is off here).
func wantSchemaFinding(t *testing.T, rec audit.Record, keyword, act string) {
	t.Helper()
	want := audit.Finding{At: audit.AtArguments, Kind: schema.FindingKind, Rule: keyword, Action: act}
	var args []audit.Finding
	for _, f := range rec.Findings {
		if f.At == audit.AtArguments {
			args = append(args, f)
		}
	}
	if len(args) != 1 || args[0] != want {
		t.Fatalf("audit findings %+v, want %+v", rec.Findings, want)
	}
}
