package upstream

import (
	"encoding/json"
	"testing"
)

// TestParseCaps: what a client declares, as the set the gateway relays
// and announces.
func TestParseCaps(t *testing.T) {
	for _, tc := range []struct {
		name, declared, want string
	}{
		{"nothing", ``, ``},
		{"empty", `{}`, ``},
		{"not an object", `[]`, ``},
		{"Go SDK client default", `{"roots":{"listChanged":true}}`, `{"roots":{}}`},
		{"sampling", `{"sampling":{}}`, `{"sampling":{}}`},
		{"sampling with context and tools", `{"sampling":{"tools":{},"context":{}}}`, `{"sampling":{"context":{},"tools":{}}}`},
		{"empty elicitation is form", `{"elicitation":{}}`, `{"elicitation":{"form":{}}}`},
		{"elicitation url only", `{"elicitation":{"url":{}}}`, `{"elicitation":{"url":{}}}`},
		{"elicitation both", `{"elicitation":{"url":{},"form":{}}}`, `{"elicitation":{"form":{},"url":{}}}`},
		{"null and strings do not count", `{"sampling":null,"roots":"yes","elicitation":{}}`, `{"elicitation":{"form":{}}}`},
		{"unknown members dropped", `{"experimental":{"x":{}},"extensions":{"a/b":{}},"tasks":{},"roots":{}}`, `{"roots":{}}`},
		{"everything", `{"roots":{"listChanged":true},"sampling":{"context":{},"tools":{}},"elicitation":{"form":{},"url":{}}}`,
			`{"elicitation":{"form":{},"url":{}},"roots":{},"sampling":{"context":{},"tools":{}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ParseCaps(json.RawMessage(tc.declared))
			if got := string(c.JSON()); got != tc.want {
				t.Fatalf("announced %s, want %s", got, tc.want)
			}
			if again := ParseCaps(c.JSON()); again != c {
				t.Fatalf("JSON does not read back: %v then %v", c, again)
			}
			if got, ok := ParseCapsTag(c.Tag()); !ok || got != c {
				t.Fatalf("tag %q reads back as %v %v", c.Tag(), got, ok)
			}
			if c.AsksClient() != (tc.want != "") {
				t.Fatalf("AsksClient %v for %s", c.AsksClient(), tc.want)
			}
		})
	}
	for _, bad := range []string{"", "0", "000", "40", "ff", "0A", "g0", "-1"} {
		if c, ok := ParseCapsTag(bad); ok {
			t.Errorf("tag %q read as %v", bad, c)
		}
	}
	n := 0
	for c := Caps(0); c <= capAll; c++ {
		if !c.valid() {
			if _, ok := ParseCapsTag(c.Tag()); ok {
				t.Errorf("tag %q of a set ParseCaps never returns was read", c.Tag())
			}
			continue
		}
		n++
		if c != 0 && !json.Valid(c.JSON()) {
			t.Errorf("set %v: invalid JSON %s", c, c.JSON())
		}
		if ParseCaps(c.JSON()) != c {
			t.Errorf("set %v does not read back from %s", c, c.JSON())
		}
	}
	if n != 40 {
		t.Errorf("%d sets, want 40", n)
	}
}
