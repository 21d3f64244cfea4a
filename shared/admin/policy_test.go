package admin_test

import (
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/policy"
)

func TestPolicyRoutes(t *testing.T) {
	e := newEnv(t, "", nil)
	k := e.adminKey
	var got admin.PolicyAnswer
	if code := e.admin("GET", "/admin/v1/tenants/acme/policy", k, "", &got); code != 200 || got.Stored || got.Hash != audit.PolicyHashNone || got.Source != "" {
		t.Fatalf("GET before any PUT = %d %+v; want 200, the empty set", code, got)
	}
	const src = "cedar_policies: |\n  @id(\"echo-only\")\n  permit (principal, action, resource == Tool::\"mock/echo\");\npolicy_mode: audit\n"
	set, err := policy.ParseSet([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := policy.Hash(set)
	if code := e.admin("PUT", "/admin/v1/tenants/acme/policy", k, src, &got); code != 200 || got.Hash != want || !got.Stored {
		t.Fatalf("PUT = %d %+v; want 200 hash %s", code, got, want)
	}
	if code := e.admin("GET", "/admin/v1/tenants/acme/policy", k, "", &got); code != 200 || got.Source != src || got.Hash != want || got.Updated == "" {
		t.Fatalf("GET = %d %+v; want the source as sent, hash %s", code, got, want)
	}
	// JSON is YAML.
	if code := e.admin("PUT", "/admin/v1/tenants/acme/policy", k, `{"roles":{"ops":{"allow":["mock/*"]}}}`, &got); code != 200 || got.Hash == want {
		t.Fatalf("PUT JSON = %d %+v", code, got)
	}

	for _, c := range []struct {
		name, body   string
		field        string
		line, column int
	}{
		{"cedar syntax", "cedar_policies: |\n  permit (principal, action, resource);\n  permit (principal action, resource);\n", "cedar_policies", 2, 25},
		{"unknown field", "rolez: {}\n", "body", 0, 0},
		{"bad mode", "policy_mode: maybe\n", "body", 0, 0},
		{"bad manifest", "manifest: {max_tool_calls: -1}\n", "body", 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b struct {
				admin.ErrorBody
				Policy admin.PolicyError `json:"policy"`
			}
			code := e.admin("PUT", "/admin/v1/tenants/acme/policy", k, c.body, &b)
			if code != 400 || b.Error.Code != admin.CodeBadRequest || b.Error.Field != c.field {
				t.Fatalf("PUT = %d %+v; want 400 field %s", code, b, c.field)
			}
			if b.Policy.Line != c.line || b.Policy.Column != c.column {
				t.Errorf("line:column = %d:%d, want %d:%d (%s)", b.Policy.Line, b.Policy.Column, c.line, c.column, b.Error.Message)
			}
			if c.line > 0 && !strings.Contains(b.Error.Message, "cedar_policies:") {
				t.Errorf("message %q does not name cedar_policies:LINE:COLUMN", b.Error.Message)
			}
		})
	}
	// The refused PUTs stored nothing.
	if e.admin("GET", "/admin/v1/tenants/acme/policy", k, "", &got); !strings.Contains(got.Source, "roles") {
		t.Errorf("after refused PUTs the set is %q", got.Source)
	}
	if code := e.admin("PUT", "/admin/v1/tenants/nope/policy", k, "{}", &got); code != 404 {
		t.Errorf("PUT for an unknown tenant = %d, want 404", code)
	}
}
