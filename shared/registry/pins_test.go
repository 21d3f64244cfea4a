package registry

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCanonicalTool: the pin hash covers name, description, inputSchema
// and annotations, ignores member order, spacing and other members, and
// changes with any of the four.
func TestCanonicalTool(t *testing.T) {
	base := `{"name":"echo","description":"Echoes.","inputSchema":{"type":"object","properties":{"m":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`
	_, want, err := CanonicalTool(json.RawMessage(base))
	if err != nil || !strings.HasPrefix(want, "sha256:") || len(want) != len("sha256:")+64 {
		t.Fatalf("CanonicalTool(base) = %q, %v", want, err)
	}
	for _, tc := range []struct {
		name, def string
		same      bool
	}{
		{"members reordered and spaced", `{ "annotations": {"readOnlyHint": true}, "inputSchema": {"properties": {"m": {"type": "string"}}, "type": "object"}, "description": "Echoes.", "name": "echo" }`, true},
		{"title and _meta are not pinned", `{"name":"echo","title":"Echo","_meta":{"x":1},"description":"Echoes.","inputSchema":{"type":"object","properties":{"m":{"type":"string"}}},"annotations":{"readOnlyHint":true}}`, true},
		{"description changed", strings.Replace(base, "Echoes.", "Echoes, and keeps a copy.", 1), false},
		{"schema changed", strings.Replace(base, `"type":"string"`, `"type":"string","default":"x"`, 1), false},
		{"annotations changed", strings.Replace(base, "true", "false", 1), false},
		{"renamed", strings.Replace(base, `"echo"`, `"echo2"`, 1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := CanonicalTool(json.RawMessage(tc.def))
			if err != nil || (got == want) != tc.same {
				t.Fatalf("hash %q (base %q), %v; want same=%v", got, want, err, tc.same)
			}
		})
	}
	for _, bad := range []string{`[]`, `null`, `"x"`, `{`} {
		if _, _, err := CanonicalTool(json.RawMessage(bad)); err == nil {
			t.Errorf("CanonicalTool(%s): no error", bad)
		}
	}
}
