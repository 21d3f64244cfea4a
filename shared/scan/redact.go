package scan

import (
	"slices"
	"unsafe"
)

// Marker is the text that replaces a finding of kind k in Redact's
// output: "[masked:<kind>]".
func Marker(k Kind) string { return "[masked:" + k.String() + "]" }

// Redact returns doc with every finding whose kind the predicate selects
// (nil: every kind) replaced by Marker(kind) inside its string; a JSON
// number holding one becomes the string marker. Keys are redacted as
// values are, and a string that carries a JSON text is redacted inside
// that text and encoded again. The output is valid JSON. found is every
// finding of Scan (selected or not). When nothing selected is found, out
// is doc itself; doc is never modified. For a doc that is not one JSON
// value, Redact returns doc, the findings before the error and a
// *SyntaxError.
func (s *Scanner) Redact(doc []byte, kinds func(Kind) bool) (out []byte, found []Finding, err error) {
	found, err = s.Scan(doc, nil)
	if err != nil {
		return doc, found, err
	}
	if kinds == nil {
		kinds = func(Kind) bool { return true }
	}
	if !slices.ContainsFunc(found, func(f Finding) bool { return kinds(f.Kind) }) {
		return doc, found, nil
	}
	r := &redactor{s: s, kinds: kinds, lib: phoneLibBudget}
	out, _, err = r.doc(0, doc)
	if err != nil {
		return doc, found, err // not reached: Scan parsed doc
	}
	return out, found, nil
}

// redactor is one Redact: a walk per level of nesting.
type redactor struct {
	s     *Scanner
	kinds func(Kind) bool
	tmp   []Finding
	lib   int // library checks of phone candidates left (phoneLibBudget)
}

// edit replaces doc[start:end] by repl.
type edit struct {
	start, end int
	repl       []byte
}

// redactLevel is the visitor of one level.
type redactLevel struct {
	r     *redactor
	d     int
	edits []edit
}

// doc returns doc (a JSON text at level d) redacted, and whether it
// changed.
func (r *redactor) doc(d int, doc []byte) ([]byte, bool, error) {
	l := &redactLevel{r: r, d: d}
	w := walker{doc: doc, v: l}
	if err := w.run(); err != nil {
		return doc, false, err
	}
	if len(l.edits) == 0 {
		return doc, false, nil
	}
	out := make([]byte, 0, len(doc)+16*len(l.edits))
	prev := 0
	for _, e := range l.edits {
		out = append(append(out, doc[prev:e.start]...), e.repl...)
		prev = e.end
	}
	return append(out, doc[prev:]...), true, nil
}

func (l *redactLevel) Visit(str *String) error {
	r := l.r
	s := r.s
	if str.Number {
		r.tmp = s.number(str.Decoded, str.Member, r.tmp[:0])
		for _, f := range r.tmp {
			if r.kinds(f.Kind) {
				// The number becomes a string: its quotes are added here.
				l.edits = append(l.edits, edit{str.Start, str.End, []byte(`"` + Marker(f.Kind) + `"`)})
				break
			}
		}
		return nil
	}
	if !str.Key && l.d+1 < s.maxDepth && holdsJSON(str.Decoded) {
		// The inner walk reuses no buffer of this level: str.Decoded
		// stays valid.
		inner, changed, err := r.doc(l.d+1, str.Decoded)
		if err == nil {
			if changed {
				l.edits = append(l.edits, edit{str.Start, str.End, AppendEscaped(nil, inner)})
			}
			return nil
		}
	}
	t := unsafe.String(unsafe.SliceData(str.Decoded), len(str.Decoded)) // read only, during this call
	r.tmp = s.text(t, str.Member, r.tmp[:0], &r.lib)
	if repl := r.masked(str.Decoded); repl != nil {
		l.edits = append(l.edits, edit{str.Start, str.End, AppendEscaped(nil, repl)})
	}
	return nil
}

// masked returns t with the selected findings in r.tmp replaced by their
// markers (overlapping ones joined), or nil when none is selected.
func (r *redactor) masked(t []byte) []byte {
	var out []byte
	prev := 0
	for i := 0; i < len(r.tmp); i++ {
		f := r.tmp[i]
		if !r.kinds(f.Kind) {
			continue
		}
		start, end := max(f.Start, prev), f.End
		if end <= prev {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(t))
		}
		out = append(append(out, t[prev:start]...), Marker(f.Kind)...)
		prev = end
	}
	if out == nil {
		return nil
	}
	return append(out, t[prev:]...)
}
