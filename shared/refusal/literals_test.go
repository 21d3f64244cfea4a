package refusal

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// What counts as a literal refusal code or word, outside this package
// (TestNoLiteralsOutsideTable):
//
//   - an integer literal whose value, with a unary minus before it, lies in
//     JSON-RPC's reserved range -32768..-32000 (the standard codes and the
//     implementation-defined server errors, where every aegis code is);
//   - a string literal that is such a number ("-32063"), or whose whole
//     value is a word of Table ("POLICY_DENIED");
//
// in the non-test Go files of the module. Comments are not code and are
// not read. The one exception: shared/jsonrpc, the JSON-RPC layer this
// package builds on (it cannot import the table), declares the five
// standard codes of the JSON-RPC 2.0 specification, -32700 and
// -32600..-32603, once each; this table takes them from there.
//
// A code or word anywhere else is a second source of truth: build it with
// this package's constants (refusal.CodeUpstream, refusal.PolicyDenied) or
// builders instead.

// jsonrpcStandard are the codes shared/jsonrpc may declare.
var jsonrpcStandard = map[int64]bool{-32700: true, -32600: true, -32601: true, -32602: true, -32603: true}

type literal struct {
	pos  token.Position
	text string
}

// literals lists the refusal codes and words written as literals in the
// Go source file at path.
func literals(t *testing.T, fset *token.FileSet, path string, words map[string]bool) []literal {
	t.Helper()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []literal
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.UnaryExpr:
			if lit, ok := n.X.(*ast.BasicLit); ok && n.Op == token.SUB && lit.Kind == token.INT {
				if v, err := strconv.ParseInt(lit.Value, 0, 64); err == nil && reserved(-v) {
					out = append(out, literal{fset.Position(n.Pos()), "-" + lit.Value})
				}
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(n.Value)
			if err != nil {
				return true
			}
			if words[s] {
				out = append(out, literal{fset.Position(n.Pos()), n.Value})
			} else if v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil && reserved(v) {
				out = append(out, literal{fset.Position(n.Pos()), n.Value})
			}
		}
		return true
	})
	return out
}

func reserved(v int64) bool { return -32768 <= v && v <= -32000 }

// TestNoLiteralsOutsideTable fails for every refusal code or word written
// as a literal outside this package (see the rules above).
func TestNoLiteralsOutsideTable(t *testing.T) {
	root := filepath.Join("..", "..")
	words := map[string]bool{}
	for _, e := range Table {
		words[string(e.Word)] = true
	}
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		dir := filepath.ToSlash(filepath.Dir(rel))
		if dir == "shared/refusal" {
			return nil
		}
		seen++
		for _, l := range literals(t, fset, path, words) {
			if dir == "shared/jsonrpc" && jsonrpcStandard[parseCode(l.text)] {
				continue
			}
			t.Errorf("%s:%d: %s written as a literal: use shared/refusal's constant or builder", rel, l.pos.Line, l.text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 100 {
		t.Fatalf("read only %d Go files under %s: the walk missed the module", seen, root)
	}
}

func parseCode(s string) int64 {
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil {
		return 0
	}
	return v
}

// TestLiteralScanner: the scanner finds what it must and nothing else.
func TestLiteralScanner(t *testing.T) {
	src := `package x

// -32003 in a comment is not code.
const a = -32003
var b = "POLICY_DENIED"
var c = "-32063"
var d = -31999
var e = "POLICY_DENIED_NOT"
var f = 32003
var g = -0x7D00 // -32000 in hex
func h() int { return -(32601) }
`
	dir := t.TempDir()
	path := filepath.Join(dir, "x.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{"POLICY_DENIED": true}
	var got []string
	for _, l := range literals(t, token.NewFileSet(), path, words) {
		got = append(got, l.text)
	}
	want := []string{"-32003", `"POLICY_DENIED"`, `"-32063"`, "-0x7D00"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("found %q, want %q", got, want)
	}
}
