package wrap

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A glob matches a whole tool name. Its syntax:
//
//   - any run of characters, including none and including '/' and '.'
//     ?        exactly one character
//     [abc]    one character from the set; ranges as [a-z]; [!...] or [^...] negates
//     \c       the character c literally
//
// match is case-sensitive and works on the decoded tool name (a JSON
// escape in the request cannot hide a name from a glob); matchFolded
// works on the name's folded spelling (foldName), with the glob's letters
// folded the same way. A glob holds no hidden character (hiddenInName: a
// name holding one is refused before globs are tried, so such a glob
// could never match) and is in NFKC form (so that its folded letters are
// spelled as a folded name's are).
type glob struct {
	src   string
	parts []globPart
}

type globKind uint8

const (
	gLit  globKind = iota // one literal rune
	gOne                  // ?
	gStar                 // *
	gSet                  // [...]
)

type globPart struct {
	kind   globKind
	r      rune
	ranges [][2]rune // gSet
	negate bool      // gSet
}

// compileGlob parses pattern, or says what is wrong with it.
func compileGlob(pattern string) (*glob, error) {
	if pattern == "" {
		return nil, fmt.Errorf("empty glob")
	}
	if !utf8.ValidString(pattern) {
		return nil, fmt.Errorf("glob %q is not valid UTF-8", pattern)
	}
	if hasHidden(pattern, hiddenInName) {
		return nil, fmt.Errorf("glob %q holds a control, invisible or whitespace character, which no tool name may hold", pattern)
	}
	if !norm.NFKC.IsNormalString(pattern) {
		return nil, fmt.Errorf("glob %q is not in Unicode NFKC form; write %q", pattern, norm.NFKC.String(pattern))
	}
	g := &glob{src: pattern}
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			if n := len(g.parts); n > 0 && g.parts[n-1].kind == gStar {
				continue // ** is *
			}
			g.parts = append(g.parts, globPart{kind: gStar})
		case '?':
			g.parts = append(g.parts, globPart{kind: gOne})
		case '\\':
			if i+1 == len(rs) {
				return nil, fmt.Errorf("glob %q ends in a lone backslash", pattern)
			}
			i++
			g.parts = append(g.parts, globPart{kind: gLit, r: rs[i]})
		case '[':
			p := globPart{kind: gSet}
			j := i + 1
			if j < len(rs) && (rs[j] == '!' || rs[j] == '^') {
				p.negate = true
				j++
			}
			for ; j < len(rs) && rs[j] != ']'; j++ {
				lo := rs[j]
				if lo == '\\' {
					if j+1 == len(rs) {
						break
					}
					j++
					lo = rs[j]
				}
				hi := lo
				if j+2 < len(rs) && rs[j+1] == '-' && rs[j+2] != ']' {
					hi = rs[j+2]
					if hi == '\\' && j+3 < len(rs) {
						j++
						hi = rs[j+2]
					}
					j += 2
					if hi < lo {
						return nil, fmt.Errorf("glob %q has a backwards range %c-%c", pattern, lo, hi)
					}
				}
				p.ranges = append(p.ranges, [2]rune{lo, hi})
			}
			if j >= len(rs) {
				return nil, fmt.Errorf("glob %q has an unterminated [", pattern)
			}
			if len(p.ranges) == 0 {
				return nil, fmt.Errorf("glob %q has an empty set []", pattern)
			}
			g.parts = append(g.parts, p)
			i = j
		default:
			g.parts = append(g.parts, globPart{kind: gLit, r: c})
		}
	}
	return g, nil
}

// one reports whether the character r matches p. folded: r is a
// character of a folded name (foldName), and matches a literal whose
// folded form it is, or a set that holds any character of its case
// orbit (r, unicode.SimpleFold(r), ...).
func (p *globPart) one(r rune, folded bool) bool {
	switch p.kind {
	case gLit:
		return p.r == r || (folded && foldRune(p.r) == r)
	case gOne:
		return true
	case gSet:
		in := p.holds(r)
		for f := unicode.SimpleFold(r); folded && !in && f != r; f = unicode.SimpleFold(f) {
			in = p.holds(f)
		}
		return in != p.negate
	}
	return false
}

// holds reports whether r is in the set's ranges (negation aside).
func (p *globPart) holds(r rune) bool {
	for _, rg := range p.ranges {
		if rg[0] <= r && r <= rg[1] {
			return true
		}
	}
	return false
}

// match reports whether the whole of name matches g, as spelled.
func (g *glob) match(name string) bool { return g.matchName(name, false) }

// matchFolded reports whether the whole of folded, a name's folded
// spelling (foldName), matches g with its letters folded.
func (g *glob) matchFolded(folded string) bool { return g.matchName(folded, true) }

// matchName runs in O(len(name)·len(parts)) at worst: one backtrack
// point, the last star.
func (g *glob) matchName(name string, folded bool) bool {
	parts := g.parts
	pi, ni := 0, 0
	starPi, starNi := -1, 0
	for ni < len(name) {
		r, size := utf8.DecodeRuneInString(name[ni:])
		if pi < len(parts) {
			p := &parts[pi]
			if p.kind == gStar {
				starPi, starNi = pi, ni
				pi++
				continue
			}
			if p.one(r, folded) {
				pi++
				ni += size
				continue
			}
		}
		if starPi < 0 {
			return false
		}
		// Let the last star swallow one more character and retry.
		_, s := utf8.DecodeRuneInString(name[starNi:])
		starNi += s
		pi, ni = starPi+1, starNi
	}
	for pi < len(parts) && parts[pi].kind == gStar {
		pi++
	}
	return pi == len(parts)
}
