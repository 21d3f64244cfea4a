package scan

import (
	"encoding/json"
	"os"
	"testing"
)

// gitleaksCases is testdata/gitleaks-v8.30.1.json: the true and false
// positives that gitleaks v8.30.1's rule definitions (MIT licence) check
// themselves against, for the 25 of its rules whose formats this scanner
// claims, as its utils.Validate received them (docs/design/scan.md says how
// they were taken out). Each true positive is a line of code or config
// holding one credential; each false positive holds none by gitleaks'
// judgement.
type gitleaksRule struct {
	Rule string   `json:"rule"`
	TP   []string `json:"tp"`
	FP   []string `json:"fp"`
}

// gitleaksFloors are, per gitleaks rule, the true positives this scanner
// must find and the most of the false positives it may flag. Where it
// finds fewer or flags more, the reason is the shape the scanner asks for,
// written here:
var gitleaksFloors = map[string]struct{ found, flagged int }{
	// flagged: AKIAIOSFODNN7EXAMPLE, AWS's documented example key, which
	// gitleaks allows by name. A gateway cannot tell it from a real one.
	"aws-access-token":        {130, 1},
	"github-pat":              {26, 0},
	"github-fine-grained-pat": {26, 0},
	"github-oauth":            {26, 0},
	"github-app-token":        {52, 0},
	"github-refresh-token":    {26, 0},
	"gitlab-pat":              {26, 0},
	"gitlab-pat-routable":     {26, 0},
	"slack-bot-token":         {30, 0},
	// flagged: xoxp- tokens with made-up numbers ("xoxp-1234-1234-1234-...")
	// that still have a token's shape.
	"slack-user-token":             {33, 3},
	"slack-app-token":              {30, 0},
	"slack-config-access-token":    {31, 2},
	"slack-config-refresh-token":   {29, 0},
	"slack-legacy-bot-token":       {37, 0},
	"slack-legacy-workspace-token": {31, 0},
	"slack-legacy-token":           {33, 0},
	// missed: sk_prod_ and rk_prod_, which are not Stripe's prefixes
	// (sk_live_, sk_test_, rk_live_, rk_test_).
	"stripe-access-token": {34, 0},
	"openai-api-key":      {35, 0},
	// flagged: sk-ant- keys of other lengths than gitleaks' 93; a key
	// with Anthropic's prefix is taken at any length.
	"anthropic-api-key":       {2, 3},
	"anthropic-admin-api-key": {2, 3},
	// flagged: real-shaped Google API keys that gitleaks allows because
	// they are known to be public, and one made of the alphabet in order.
	"gcp-api-key":      {27, 16},
	"npm-access-token": {26, 0},
	// missed: gitleaks' generated SendGrid keys are 66 characters of
	// [a-z0-9=_.-]; SendGrid's are SG.<22>.<43> of base64url.
	"sendgrid-api-token": {7, 0},
	// missed: a first segment that does not decode to a JOSE header
	// ("ey4sirr1...", "eyJhbGciOiee..."), and unsigned tokens (alg "none",
	// no signature).
	"jwt":         {34, 0},
	"private-key": {3, 0},
}

// TestGitleaksCases: the scanner against gitleaks' own rule cases, a
// labelled set this project did not write; the floors above, and a table
// per rule in -v.
func TestGitleaksCases(t *testing.T) {
	b, err := os.ReadFile("testdata/gitleaks-v8.30.1.json")
	if err != nil {
		t.Fatal(err)
	}
	var rules []gitleaksRule
	if err := json.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	if len(rules) != len(gitleaksFloors) {
		t.Fatalf("%d rules in the data, %d floors", len(rules), len(gitleaksFloors))
	}
	s := New(nil)
	credential := func(text string) bool {
		doc, _ := json.Marshal(map[string]any{"content": []any{map[string]string{"type": "text", "text": text}}})
		fs, err := s.Scan(doc, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			if f.Kind == KindCredential {
				return true
			}
		}
		return false
	}
	var found, positives, flagged, negatives int
	t.Logf("%-30s %9s %9s", "gitleaks rule", "found", "flagged")
	for _, r := range rules {
		want, ok := gitleaksFloors[r.Rule]
		if !ok {
			t.Fatalf("rule %s has no floor", r.Rule)
		}
		f, g, shown := 0, 0, 0
		show := func(what, text string) {
			if shown < 3 {
				t.Logf("%s: %s %.120q", r.Rule, what, text)
				shown++
			}
		}
		for _, tp := range r.TP {
			if credential(tp) {
				f++
			} else {
				show("missed", tp)
			}
		}
		for _, fp := range r.FP {
			if credential(fp) {
				g++
				show("flagged", fp)
			}
		}
		t.Logf("%-30s %4d/%-4d %4d/%-4d", r.Rule, f, len(r.TP), g, len(r.FP))
		if f < want.found || g > want.flagged {
			t.Errorf("%s: found %d of %d (want at least %d), flagged %d of %d (want at most %d)",
				r.Rule, f, len(r.TP), want.found, g, len(r.FP), want.flagged)
		}
		found, positives, flagged, negatives = found+f, positives+len(r.TP), flagged+g, negatives+len(r.FP)
	}
	t.Logf("%-30s %4d/%-4d %4d/%-4d", "all", found, positives, flagged, negatives)
}
