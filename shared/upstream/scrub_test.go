package upstream

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/registry"
)

func srvAt(u string) *registry.Server { return &registry.Server{Tenant: "t", Name: "s", URL: u} }

func TestScrubber(t *testing.T) {
	for _, secret := range []string{"ghp_abcdef0123456789", `we"ird\va/lue+&<>=`, "ünïcode-sécret", "a b c d"} {
		s := NewScrubber(secret)
		esc, _ := json.Marshal(secret)
		forms := []string{string(esc[1 : len(esc)-1]), url.QueryEscape(secret), url.PathEscape(secret),
			base64.StdEncoding.EncodeToString([]byte(secret)), base64.URLEncoding.EncodeToString([]byte(secret)),
			base64.RawStdEncoding.EncodeToString([]byte(secret)), base64.RawURLEncoding.EncodeToString([]byte(secret))}
		for _, f := range forms {
			doc, _ := json.Marshal(map[string]any{"text": "before " + f + " after", "n": 1})
			// json.Marshal escapes <>& as \u003c...; the scrubber knows both.
			out := s.JSON(doc)
			if !json.Valid(out) {
				t.Fatalf("%q: scrubbed JSON invalid: %s", secret, out)
			}
			var v struct{ Text string }
			_ = json.Unmarshal(out, &v)
			if strings.Contains(v.Text, secret) || strings.Contains(v.Text, f) {
				t.Errorf("secret %q form %q survived: %s", secret, f, out)
			}
			if !strings.Contains(v.Text, Redacted) {
				t.Errorf("secret %q form %q: no redaction in %s", secret, f, out)
			}
		}
		if got := s.String("detail " + secret + " " + url.QueryEscape(secret)); strings.Contains(got, secret) {
			t.Errorf("String kept %q: %s", secret, got)
		}
	}
	// No secret, or too short: untouched, no copy.
	doc := json.RawMessage(`{"a":"abc"}`)
	if out := NewScrubber("").JSON(doc); &out[0] != &doc[0] {
		t.Error("empty scrubber copied")
	}
	if out := NewScrubber("abc").JSON(doc); string(out) != string(doc) {
		t.Error("3-character secret scrubbed")
	}
	clean := json.RawMessage(`{"a":"nothing here"}`)
	if out := NewScrubber("ghp_abcdef0123456789").JSON(clean); &out[0] != &clean[0] {
		t.Error("no match but copied")
	}
}

func TestSetMeta(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, `{"_meta":{"k":1}}`},
		{`null`, `{"_meta":{"k":1}}`},
		{`{}`, `{"_meta":{"k":1}}`},
		{`{"name":"x"}`, `{"name":"x","_meta":{"k":1}}`},
		{`{"_meta":{"a":true},"name":"x"}`, `{"_meta":{"a":true,"k":1},"name":"x"}`},
		{`{"_meta":{"k":"client's"}}`, `{"_meta":{"k":"client's"}}`},
		{`[1]`, `[1]`},
		{`{"_meta":7}`, `{"_meta":7}`},
	}
	for _, tc := range tests {
		if got := string(SetMeta(json.RawMessage(tc.in), "k", json.RawMessage(`1`))); got != tc.want {
			t.Errorf("SetMeta(%s) = %s; want %s", tc.in, got, tc.want)
		}
	}
}
