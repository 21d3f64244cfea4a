package wrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
)

func TestGlob(t *testing.T) {
	cases := []struct {
		glob, name string
		want       bool
	}{
		{"echo", "echo", true},
		{"echo", "echo2", false},
		{"echo", "Echo", false},
		{"shell_*", "shell_", true},
		{"shell_*", "shell_exec", true},
		{"shell_*", "xshell_exec", false},
		{"*", "anything/with.dots-and/slashes", true},
		{"fs/*", "fs/a/b", true},
		{"*_delete", "fs_delete", true},
		{"*_delete", "fs_delete_not", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"t?ol", "tool", true},
		{"t?ol", "tol", false},
		{"t?ol", "tøol", true},
		{"[ab]x", "bx", true},
		{"[!ab]x", "bx", false},
		{"[^ab]x", "cx", true},
		{"v[0-9]", "v7", true},
		{"v[0-9]", "vx", false},
		{`lit\*`, "lit*", true},
		{`lit\*`, "litx", false},
		{"**", "", true},
		{"x*", "x", true},
	}
	for _, tc := range cases {
		g, err := compileGlob(tc.glob)
		if err != nil {
			t.Fatalf("%q: %v", tc.glob, err)
		}
		if got := g.match(tc.name); got != tc.want {
			t.Errorf("%q matches %q: got %v, want %v", tc.glob, tc.name, got, tc.want)
		}
	}
	for _, bad := range []string{"", "[abc", "[]", `trailing\`, "[z-a]", "\xff"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestDecidePrecedence(t *testing.T) {
	p, err := ParsePolicy([]byte("deny: [shell_*]\napproval: [pay_*, shell_ok]\nallow: [echo, pay_*, shell_*]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool string
		want Decision
	}{
		{"echo", Decision{Rule: "allow:echo"}},
		{"shell_ok", Decision{Refused: true, Word: refusal.PolicyDenied, Rule: "deny:shell_*"}},
		{"pay_invoice", Decision{Refused: true, Word: refusal.PendingApproval, Rule: "approval:pay_*"}},
		{"other", Decision{Refused: true, Word: refusal.PolicyDenied, Rule: ruleNoAllow}},
	}
	for _, tc := range cases {
		if got := p.Decide(tc.tool); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.tool, got, tc.want)
		}
	}
	if d := emptyPolicy.Decide("anything"); d.Refused {
		t.Errorf("the empty policy refused: %+v", d)
	}
	none, _ := ParsePolicy([]byte("allow: []\n"))
	if d := none.Decide("echo"); !d.Refused {
		t.Errorf("allow: [] let a call through")
	}
}

func TestPolicyHashIsCanonical(t *testing.T) {
	a, err := ParsePolicy([]byte("deny: [b, a]\napproval: [x]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParsePolicy([]byte("# same rules, other order\napproval:\n  - 'x'\ndeny:\n  - \"a\"\n  - b\n  - a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash() != b.Hash() {
		t.Errorf("same rules, different hashes: %s %s", a.Hash(), b.Hash())
	}
	c, _ := ParsePolicy([]byte("deny: [b, a]\napproval: [x]\nallow: []\n"))
	if c.Hash() == a.Hash() {
		t.Error("an allow list did not change the hash")
	}
	// Pinned, and quoted by docs/wrap.md: without --policy the set in
	// force is the empty one, whose hash is the gateway's
	// (audit.PolicyHashNone); a policy file without globs is a set in
	// force (it refuses what wrap cannot read), hashed like any other.
	if got := emptyPolicy.Hash(); got != audit.PolicyHashNone {
		t.Errorf("empty policy hash %s, want audit.PolicyHashNone %s", got, audit.PolicyHashNone)
	}
	noGlobs, err := ParsePolicy([]byte("deny: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	const noGlobsHash = "8011eea4a01571994f035efc1d129fade14c4e9b98a1dd76555d34ead3f24c7d" // {"version":1,"allow":null,"approval":[],"deny":[]}
	if got := noGlobs.Hash(); got != noGlobsHash || got != audit.PolicyHash([]byte(`{"version":1,"allow":null,"approval":[],"deny":[]}`)) {
		t.Errorf("hash of deny: [] %s, want %s", got, noGlobsHash)
	}
	for _, h := range []string{a.Hash(), c.Hash(), noGlobs.Hash(), emptyPolicy.Hash()} {
		if !audit.IsHash(h) {
			t.Errorf("policy hash %q is not in the audit record's hash format", h)
		}
	}
	doc, err := os.ReadFile("../../docs/wrap.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{audit.PolicyHashNone, noGlobsHash} {
		if !strings.Contains(string(doc), h) {
			t.Errorf("docs/wrap.md does not quote the policy hash %s", h)
		}
	}
}

func TestPolicyLoadErrors(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"empty file", "", "policy is empty"},
		{"comments only", "# nothing\n", "policy is empty"},
		{"empty mapping", "{}\n", "policy is empty"},
		{"bad yaml", "deny: [a\n", "not valid YAML"},
		{"not a mapping", "- a\n- b\n", "must be a mapping"},
		{"unknown key", "deny: [a]\ndenny: [b]\n", `line 2: unknown field "denny"`},
		{"null list", "deny:\n", `field "deny" must be a list`},
		{"scalar list", "allow: echo\n", `field "allow" must be a list`},
		{"bad glob", "approval:\n  - ok\n  - \"[oops\"\n", `line 3: field "approval": glob "[oops" has an unterminated [`},
		{"empty glob", "deny: ['']\n", `field "deny": empty glob`},
		{"non-string entry", "deny: [{a: 1}]\n", `field "deny": every entry must be a string glob`},
		{"number entry", "deny: [42]\n", `field "deny": every entry must be a string glob`},
		{"duplicate key", "deny: [a]\ndeny: [b]\n", `field "deny" appears twice`},
		{"two documents", "deny: [a]\n---\ndeny: [b]\n", "more than one YAML document"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Through the CLI: exit 2, the file and the field named, no child started.
	p := writeFile(t, "bad.yaml", "deny: [a]\ndenny: [b]\n")
	var out, errb syncbuf.Buffer
	marker := filepath.Join(t.TempDir(), "started")
	code := Run([]string{"--policy", p, "--", "/bin/sh", "-c", "touch " + marker}, strings.NewReader(""), &out, &errb)
	if code != ExitUsage || !strings.Contains(errb.String(), p) || !strings.Contains(errb.String(), `unknown field "denny"`) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the child was started despite a bad policy")
	}
}
