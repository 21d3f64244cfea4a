package config

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/nametest"
	"github.com/aegis-gw/aegis/shared/registry"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsFromSeed(t *testing.T) {
	s, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.ApprovalTTL != time.Hour || s.UpstreamTimeout != 10*time.Second || s.UpstreamMaxRetries != 2 ||
		s.CircuitFailureThreshold != 5 || s.CircuitCooldown != 10*time.Second || s.UpstreamMaxConcurrent != 64 ||
		s.RateLimitPerSession != 120 || s.RateLimitPerTool != 60 || s.RateLimitPerKey != 600 || s.ThreatMode != "block" ||
		s.InputValidation != "block" || s.EgressAction != "block" || s.PIIAction != "redact" || s.BillingEnforce {
		t.Fatalf("defaults differ from the seed: %+v", s)
	}
}

func TestBadSettingsNameTheVariable(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"RATE_LIMIT_PER_TOOL", "ten"},
		{"RATE_LIMIT_PER_SESSION", "-1"},
		{"RATE_LIMIT_PER_KEY", "-5"},
		{"RATE_LIMIT_PER_KEY", "lots"},
		{"UPSTREAM_TIMEOUT_SECS", "0"},
		{"THREAT_MODE", "panic"},
		{"PII_ACTION", "delete"},
		{"BILLING_ENFORCE", "yes"},
		{"MAX_BODY_BYTES", "99999999999"},
		{"POLICY_REFRESH_SECS", "0"},
	} {
		_, err := FromEnv(env(map[string]string{tc.name: tc.value}))
		if err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s=%s: err %v, want one naming the variable", tc.name, tc.value, err)
		}
	}
	if _, err := FromEnv(env(map[string]string{"SESSION_IDLE_SECS": "100", "SESSION_LIFETIME_SECS": "50"})); err == nil {
		t.Error("idle longer than lifetime accepted")
	}
	s, err := FromEnv(env(map[string]string{"RATE_LIMIT_PER_TOOL": "0", "RATE_LIMIT_PER_KEY": "0", "SERVED_TENANTS": "a, b"}))
	if err != nil || s.RateLimitPerTool != 0 || s.RateLimitPerKey != 0 || !s.Served("b") || s.Served("c") {
		t.Fatalf("0 and lists: %+v %v", s, err)
	}
	if s.PolicyRefresh != 5*time.Second {
		t.Errorf("POLICY_REFRESH_SECS default %v, want 5s", s.PolicyRefresh)
	}
	if s, err := FromEnv(env(map[string]string{"POLICY_REFRESH_SECS": "30"})); err != nil || s.PolicyRefresh != 30*time.Second {
		t.Errorf("POLICY_REFRESH_SECS=30: %v, %v", s.PolicyRefresh, err)
	}
}

func TestDemoConfigIsValid(t *testing.T) {
	b, err := os.ReadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ParseFile(b, env(map[string]string{"AEGIS_DEMO_UPSTREAM": "http://127.0.0.1:9/mcp"}), true)
	if err != nil {
		t.Fatal(err)
	}
	ts, ss, _ := f.Registry()
	if len(ts) != 1 || ts[0].ID != "demo" || len(ss) != 1 || ss[0].Name != "mock-primary" || !ss[0].Tools["transfer"].RequiresApproval {
		t.Fatalf("demo config: %+v %+v", ts, ss)
	}
}

func TestBadFilesNameTheField(t *testing.T) {
	base := `tenants:
  - id: acme
    tier: growth
    keys:
      - {id: abcd1234, caller: bot, sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
    servers:
      - name: billing
        url: https://billing.example.com/mcp
        credential: {header: Authorization, ref: env:TOKEN}
`
	if _, err := ParseFile([]byte(base), env(nil), false); err != nil {
		t.Fatalf("valid file refused: %v", err)
	}
	held, err := ParseFile([]byte(strings.Replace(base, "tier: growth", "tier: growth\n    new_tools: hold", 1)), env(nil), false)
	if err != nil {
		t.Fatal(err)
	}
	if ts, _, _ := held.Registry(); len(ts) != 1 || !ts[0].HoldsNewTools() {
		t.Fatalf("new_tools: hold not carried to the registry: %+v", ts)
	}
	oauthFile := strings.Replace(base, "credential: {header: Authorization, ref: env:TOKEN}", "auth: oauth\n        oauth: {client_id: gw-acme, client_secret_ref: env:DOCS_SECRET, scopes: [mcp]}", 1)
	f, err := ParseFile([]byte(oauthFile), env(nil), false)
	if err != nil {
		t.Fatalf("auth: oauth refused: %v", err)
	}
	if _, ss, _ := f.Registry(); len(ss) != 1 || !ss[0].NeedsConnection() || ss[0].OAuth.ClientID != "gw-acme" || ss[0].OAuth.ClientSecretRef != "env:DOCS_SECRET" {
		t.Fatalf("auth: oauth not carried to the registry: %+v", ss)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"bad tier", "tier: growth", "tier: gold", "tenants[0].tier"},
		{"missing tier", "tier: growth", "", "tenants[0].tier"},
		{"bad id", "id: acme", "id: Acme!", "tenants[0].id"},
		{"http outside local mode", "https://billing", "http://billing", "tenants[0].servers[0].url"},
		{"metadata address", "billing.example.com", "169.254.169.254", "tenants[0].servers[0].url"},
		{"loopback outside local mode", "billing.example.com", "127.0.0.1", "tenants[0].servers[0].url"},
		{"userinfo in URL", "https://billing", "https://u:p@billing", "tenants[0].servers[0].url"},
		{"a key instead of a hash", "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "sha256: aegis_abcd1234_secretsecretsecretsecret", "tenants[0].keys[0].sha256"},
		{"bad credential ref", "ref: env:TOKEN", "ref: vault:x", "tenants[0].servers[0].credential.ref"},
		{"unknown field", "tier: growth", "tier: growth\n    skip_auth: true", "skip_auth"},
		{"not YAML", "tenants:", "tenants: [", "invalid YAML"},
		{"bad new_tools", "tier: growth", "tier: growth\n    new_tools: review", "tenants[0].new_tools"},
		{"auth oauth with a brokered credential", "credential: {header: Authorization, ref: env:TOKEN}", "credential: {header: Authorization, ref: env:TOKEN}\n        auth: oauth\n        oauth: {client_id: gw}", "tenants[0].servers[0].credential"},
		{"auth oauth without a client", "credential: {header: Authorization, ref: env:TOKEN}", "auth: oauth", "tenants[0].servers[0].oauth"},
		{"unknown auth", "credential: {header: Authorization, ref: env:TOKEN}", "auth: saml", "tenants[0].servers[0].auth"},
		{"oauth without auth oauth", "credential: {header: Authorization, ref: env:TOKEN}", "oauth: {client_id: gw}", "tenants[0].servers[0].oauth"},
		{"bad client secret ref", "credential: {header: Authorization, ref: env:TOKEN}", "auth: oauth\n        oauth: {client_id: gw, client_secret_ref: vault:x}", "tenants[0].servers[0].oauth.client_secret_ref"},
		{"client id with a space", "credential: {header: Authorization, ref: env:TOKEN}", "auth: oauth\n        oauth: {client_id: a b}", "tenants[0].servers[0].oauth.client_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile([]byte(strings.Replace(base, tc.from, tc.to, 1)), env(nil), false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func TestFunctionTimeoutRule(t *testing.T) {
	for _, tc := range []struct {
		name            string
		upstream, fn    string
		wantErr         bool
		wantVars        []string
		requireFunction bool
	}{
		{name: "template default", upstream: "10", fn: "15"},
		{name: "largest", upstream: "24", fn: "29"},
		{name: "no margin", upstream: "10", fn: "14", wantErr: true, wantVars: []string{"UPSTREAM_TIMEOUT_SECS", "FUNCTION_TIMEOUT_SECS"}},
		{name: "over API Gateway", upstream: "10", fn: "30", wantErr: true, wantVars: []string{"FUNCTION_TIMEOUT_SECS"}},
		{name: "upstream too long for any function", upstream: "25", fn: "29", wantErr: true, wantVars: []string{"UPSTREAM_TIMEOUT_SECS", "FUNCTION_TIMEOUT_SECS"}},
		{name: "outside Lambda", upstream: "60"},
		{name: "missing on Lambda", upstream: "10", requireFunction: true, wantErr: true, wantVars: []string{"FUNCTION_TIMEOUT_SECS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := FromEnv(env(map[string]string{"UPSTREAM_TIMEOUT_SECS": tc.upstream, "FUNCTION_TIMEOUT_SECS": tc.fn}))
			if err == nil && tc.requireFunction {
				err = s.ValidateFunction()
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			for _, v := range tc.wantVars {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("error %q does not name %s", err, v)
				}
			}
		})
	}
}

// TestNamesFollowTheRegistryRule: the config file accepts exactly the
// tenant ids, server names and callers the registry's rule accepts, the
// same ones the admin API accepts (admin's TestNamesFollowTheRegistryRule
// has the same examples). docs/design/names.md gives the rule.
func TestNamesFollowTheRegistryRule(t *testing.T) {
	file := func(id, server, caller string) []byte {
		q := func(s string) string { b, _ := json.Marshal(s); return string(b) } // JSON strings are YAML
		return []byte(`tenants:
  - id: ` + q(id) + `
    tier: free
    keys:
      - {id: abcd1234, caller: ` + q(caller) + `, sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}
    servers:
      - name: ` + q(server) + `
        url: https://mcp.example.com/mcp
`)
	}
	check := func(kind, name, field string, ok bool, err error) {
		t.Helper()
		switch {
		case ok && err != nil:
			t.Errorf("%s %q refused: %v", kind, name, err)
		case !ok && (err == nil || !strings.Contains(err.Error(), field)):
			t.Errorf("%s %q: err %v, want one naming %s", kind, name, err, field)
		}
	}
	for _, tc := range nametest.IDs {
		if got := registry.ValidateServerName(tc.Name) == nil; got != tc.OK {
			t.Fatalf("registry.ValidateServerName(%q) ok=%v; this table says %v", tc.Name, got, tc.OK)
		}
		_, err := ParseFile(file("acme", tc.Name, "bot"), env(nil), false)
		check("server name", tc.Name, "tenants[0].servers[0].name", tc.OK, err)
		_, err = ParseFile(file(tc.Name, "billing", "bot"), env(nil), false)
		check("tenant id", tc.Name, "tenants[0].id", tc.OK, err)
	}
	for _, tc := range nametest.Callers {
		if got := registry.ValidateCaller(tc.Name) == nil; got != tc.OK {
			t.Fatalf("registry.ValidateCaller(%q) ok=%v; this table says %v", tc.Name, got, tc.OK)
		}
		_, err := ParseFile(file("acme", "billing", tc.Name), env(nil), false)
		check("caller", tc.Name, "tenants[0].keys[0].caller", tc.OK, err)
	}
}

// An unknown field is named by its path in the file, with its line, the
// fields known there and the nearest one; the Go type is not mentioned.
func TestUnknownFieldNamesPath(t *testing.T) {
	y := `tenants:
  - id: acme
    tier: growth
    servrs:
      - name: a
        url: https://a.example.com/mcp
  - id: b
    tier: free
    servers:
      - name: s
        url: https://s.example.com/mcp
        credential: {header: X-Key, reff: env:K}
`
	_, err := ParseFile([]byte(y), func(string) string { return "" }, false)
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"tenants[0].servrs: unknown field (line 4); did you mean servers?; known fields here: cedar_policies, egress_action, id, input_validation, issuers, keys, manifest, new_tools, pii_action, policy_mode, refusal_shape, roles, servers, threat_mode, tier, webhook_secret_ref, webhook_url",
		"tenants[1].servers[0].credential.reff: unknown field (line 12); did you mean ref?; known fields here: header, ref",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "config.") {
		t.Errorf("error names a Go type:\n%s", msg)
	}
	// A top-level typo too.
	if _, err := ParseFile([]byte("tenant: []\n"), nil, false); err == nil || !strings.Contains(err.Error(), "tenant: unknown field (line 1); did you mean tenants?; known fields here: tenants") {
		t.Errorf("top level: %v", err)
	}
}

// An unset ${VAR} in a server URL is named, not reported as the URL it
// leaves behind.
func TestUnsetVariableNamed(t *testing.T) {
	y := "tenants:\n  - id: acme\n    tier: growth\n    servers:\n      - name: a\n        url: ${UPSTREAM}/mcp\n"
	_, err := ParseFile([]byte(y), func(string) string { return "" }, true)
	if err == nil || err.Error() != `tenants[0].servers[0].url: ${UPSTREAM} is not set in the environment (in "${UPSTREAM}/mcp")` {
		t.Fatalf("%v", err)
	}
	f, err := ParseFile([]byte(y), func(k string) string { return map[string]string{"UPSTREAM": "http://127.0.0.1:9"}[k] }, true)
	if err != nil || f.Tenants[0].Servers[0].URL != "http://127.0.0.1:9/mcp" {
		t.Fatalf("%v %+v", err, f)
	}
}
