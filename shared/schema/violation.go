package schema

import (
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// first returns the JSON pointer and keyword of the first violation in ve,
// an error of validating v.
//
// The violations are the leaves of ve's tree, where a leaf is an error that
// names a keyword of its own: the tree is descended through the whole
// schema, groups of errors, references and allOf (every one of whose
// subschemas must hold, so a failure inside is the call's), and not into
// anyOf, oneOf, not, contains or propertyNames, whose inner failures are
// only alternatives: "anyOf" at its place is the violation. "First" is the
// least by instance location (a parent before its members, members by
// name, array elements by index), then by keyword: the library collects
// errors in map order, and the answer must not change from call to call.
func first(ve *jsonschema.ValidationError, v any, names map[string]bool) (pointer, keyword string) {
	var best *jsonschema.ValidationError
	var bestKw string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		switch e.ErrorKind.(type) {
		case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
			if len(e.Causes) > 0 {
				for _, c := range e.Causes {
					walk(c)
				}
				return
			}
		}
		kw := keywordOf(e.ErrorKind)
		if best == nil || before(e.InstanceLocation, kw, best.InstanceLocation, bestKw) {
			best, bestKw = e, kw
		}
	}
	walk(ve)
	return pointerOf(best.InstanceLocation, v, names), bestKw
}

// keywordOf names the keyword that failed.
func keywordOf(k jsonschema.ErrorKind) string {
	if p := k.KeywordPath(); len(p) > 0 {
		return p[0] // dependentRequired/PROP → dependentRequired
	}
	switch k.(type) {
	case *kind.FalseSchema:
		return "false" // a subschema that is false: nothing is allowed there
	case *kind.Not:
		return "not"
	case *kind.RefCycle:
		return "$ref"
	}
	return "schema"
}

// before orders violations: by instance location token by token (a
// prefix first; two indices by number), then by keyword.
func before(a []string, akw string, b []string, bkw string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			an, bn := isIndex(a[i]), isIndex(b[i])
			if an && bn && len(a[i]) != len(b[i]) {
				return len(a[i]) < len(b[i])
			}
			return a[i] < b[i]
		}
	}
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return akw < bkw
}

func isIndex(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// pointerOf renders loc, an instance location within v, as a JSON pointer
// (RFC 6901) that carries nothing of the caller's: an array index is kept,
// a member name is kept only if the schema declares it (names), any other
// is written "*".
func pointerOf(loc []string, v any, names map[string]bool) string {
	var b strings.Builder
	cur := v
	for _, tok := range loc {
		b.WriteByte('/')
		switch x := cur.(type) {
		case []any:
			b.WriteString(tok) // an index the validator wrote
			cur = nil
			if n, ok := atoi(tok); ok && n < len(x) {
				cur = x[n]
			}
		case map[string]any:
			if names[tok] {
				b.WriteString(escape(tok))
			} else {
				b.WriteByte('*')
			}
			cur = x[tok]
		default:
			b.WriteByte('*')
			cur = nil
		}
	}
	return b.String()
}

func atoi(s string) (int, bool) {
	if !isIndex(s) || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

var escaper = strings.NewReplacer("~", "~0", "/", "~1")

func escape(tok string) string { return escaper.Replace(tok) }

// declaredNames collects the property names a schema document declares:
// the members of every properties, dependentRequired, dependentSchemas and
// dependencies object, the strings of every required array and of
// dependentRequired's lists, anywhere in the document. They are the upstream's words, not the caller's, and may
// appear in a pointer.
func declaredNames(doc any) map[string]bool {
	names := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, sub := range x {
				switch k {
				case "properties", "dependentRequired", "dependentSchemas", "dependencies":
					if m, ok := sub.(map[string]any); ok {
						for name, dep := range m {
							names[name] = true
							addStrings(names, dep) // dependentRequired's lists
						}
					}
				case "required":
					addStrings(names, sub)
				}
				walk(sub)
			}
		case []any:
			for _, sub := range x {
				walk(sub)
			}
		}
	}
	walk(doc)
	return names
}

// addStrings adds the strings of v, if it is an array, to names.
func addStrings(names map[string]bool, v any) {
	a, _ := v.([]any)
	for _, s := range a {
		if s, ok := s.(string); ok {
			names[s] = true
		}
	}
}
