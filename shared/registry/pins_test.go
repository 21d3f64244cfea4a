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

// TestSimilarity: a rename with the same definition, or with a word
// changed, scores over RenameSimilarity; tools of the reference servers
// that share a schema or a description but not both score under it.
func TestSimilarity(t *testing.T) {
	const pathSchema = `{"type":"object","properties":{"path":{"type":"string","description":"Path of the file"}},"required":["path"]}`
	def := func(name, desc, schema string) json.RawMessage {
		return json.RawMessage(`{"name":"` + name + `","description":"` + desc + `","inputSchema":` + schema + `}`)
	}
	readFile := def("read_file", "Read the complete contents of a file from the file system.", pathSchema)
	for _, tc := range []struct {
		name   string
		b      json.RawMessage
		rename bool
	}{
		{"the same definition under another name", def("read_text_file", "Read the complete contents of a file from the file system.", pathSchema), true},
		{"renamed, a word changed", def("read_text_file", "Read the complete contents of a text file from the file system.", pathSchema), true},
		{"renamed, an argument renamed", def("get_file", "Read the complete contents of a file from the file system.", `{"type":"object","properties":{"file":{"type":"string","description":"Path of the file"}},"required":["file"]}`), true},
		{"same schema, another tool", def("delete_file", "Delete a file from the file system permanently.", pathSchema), false},
		{"same description, other arguments", def("read_files", "Read the complete contents of a file from the file system.", `{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"}},"encoding":{"type":"string","enum":["utf-8","latin1"]}},"required":["paths","encoding"]}`), false},
		{"unrelated", def("git_status", "Shows the working tree status.", `{"type":"object","properties":{"repo_path":{"type":"string"}}}`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Similarity(readFile, tc.b)
			if (s >= RenameSimilarity) != tc.rename {
				t.Fatalf("Similarity = %.3f, want a rename: %v", s, tc.rename)
			}
			if s2 := Similarity(tc.b, readFile); s2 != s {
				t.Fatalf("not symmetric: %.3f and %.3f", s, s2)
			}
		})
	}
	if s := Similarity(readFile, json.RawMessage(`[]`)); s != 0 {
		t.Fatalf("Similarity with a non-object = %v", s)
	}

	canon, _, err := CanonicalTool(readFile)
	if err != nil {
		t.Fatal(err)
	}
	oldCanon, oldHash, _ := CanonicalTool(def("read_text_file", "Read the complete contents of a file from the file system.", pathSchema))
	otherCanon, _, _ := CanonicalTool(def("delete_file", "Delete a file from the file system permanently.", pathSchema))
	pins := []Pin{
		{Tool: "delete_file", Def: otherCanon},
		{Tool: "read_text_file", Hash: oldHash, Def: oldCanon},
	}
	// The server lists delete_file and read_file now; read_text_file is gone.
	listed := func(tool string) bool { return tool == "delete_file" || tool == "read_file" }
	if from, score, ok := RenameOf(canon, "read_file", pins, listed); !ok || from.Tool != "read_text_file" || score != 1 {
		t.Fatalf("RenameOf = %+v %v %v, want read_text_file at 1", from, score, ok)
	}
	// A pinned tool its server still lists is no rename's origin.
	if from, _, ok := RenameOf(canon, "read_file", pins, func(string) bool { return true }); ok {
		t.Fatalf("RenameOf = %+v while every pinned tool is listed", from)
	}
}
