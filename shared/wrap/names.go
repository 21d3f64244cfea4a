package wrap

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tool names, methods and keys as every child may read them.
//
// wrap decides on the string it decodes; the child acts on the string it
// decodes, and readers differ where a string holds characters nobody
// agrees on: a C-string reader stops at a NUL, a shell drops it and
// splits at whitespace, a reader may trim, skip zero-width characters,
// lower-case, or NFKC-normalise (fullwidth "ｗｒｉｔｅ" is "write" to it).
// So (docs/wrap.md, "Tool names"):
//
//   - a tools/call whose name holds a hidden character (hiddenInName) is
//     refused before any glob is tried, and so is any request whose
//     method holds one (hiddenInMethod): such a string is not one wrap
//     can read the way every child does;
//   - deny and approval globs match the name as sent or its folded
//     spelling (foldName), so no spelling of a denied name gets through;
//     allow globs match the name as sent only, so a spelling can never
//     widen what is allowed;
//   - a key of the request or of its params is taken for "method",
//     "params", "name" or "id" when it folds to one (keyIs), and then
//     makes the call ambiguous unless it is exactly that key.

// hiddenInName reports whether r may not appear in a tool name: C0 (NUL,
// TAB, LF, CR, ESC, ...), DEL and C1 controls; format characters (Unicode
// category Cf: zero-width space and joiners, the byte order mark, the soft
// hyphen, bidi embeddings, overrides, isolates and marks, the tag
// characters U+E0000–U+E007F); the other default-ignorable code points
// (variation selectors, the combining grapheme joiner, Hangul fillers, the
// reserved block up to U+E0FFF); U+FFFD, which is what Go makes of a lone
// surrogate escape ("\ud800") that another reader keeps; and whitespace of
// every kind, the ASCII space included. MCP tool names are letters,
// digits, "_", "-" and "." (2025-11-25: no spaces), so no real tool is
// refused by this.
func hiddenInName(r rune) bool {
	switch {
	case r < 0x20 || (0x7f <= r && r <= 0x9f):
		return true
	case r < 0x7f:
		return r == ' '
	case r == utf8.RuneError, 0xe0000 <= r && r <= 0xe0fff:
		return true
	}
	return unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) || unicode.Is(unicode.Variation_Selector, r)
}

// hiddenInMethod reports whether r may not appear in a method: what may
// not appear in a tool name, except the ASCII space. A space in a method
// is visible, and no reader drops one from inside it; a method that is
// "tools/call" once spaces around it are trimmed is taken for a
// tools/call (methodIsCall) and refused as ambiguous.
func hiddenInMethod(r rune) bool { return r != ' ' && hiddenInName(r) }

// hasHidden reports whether s holds a rune for which hidden is true.
func hasHidden(s string, hidden func(rune) bool) bool {
	for _, r := range s {
		if hidden(r) {
			return true
		}
	}
	return false
}

// plainASCII reports whether s holds only printable ASCII other than the
// space: a string that every reader reads alike, and folds to its lower
// case.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// foldRune maps r to the lower case of its upper case: the one spelling
// of a letter under any case rule a reader applies (ſ and S read s, ı and
// İ read i, K, the Kelvin sign, reads k).
func foldRune(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }

// foldName is the folded spelling of s: NFKC (compatibility forms such as
// fullwidth and mathematical letters, ligatures and circled letters
// become the plain letters; composed and decomposed accents become one
// form), then foldRune on every character, then NFKC again. An ASCII s
// is only lower-cased.
func foldName(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	return norm.NFKC.String(strings.Map(foldRune, norm.NFKC.String(s)))
}

// methodIsCall reports whether method m may be read as tools/call by some
// child: it holds a hidden character (no reader can be relied on to read
// it as wrap does), or it is "tools/call" once folded and trimmed of
// spaces.
func methodIsCall(m string) bool { return methodIs(m, "tools/call") }

// methodIs is methodIsCall for any method want (lower-case ASCII).
func methodIs(m, want string) bool {
	return hasHidden(m, hiddenInMethod) || foldName(strings.Trim(m, " ")) == want
}

// keyIs reports whether the member key k may be read as want (a lower-case
// ASCII key: "method", "params", "name", "id") by some child: equal to it
// under Unicode case folding (Go's encoding/json matches struct fields
// that way), or folding to it once trimmed of spaces with its hidden
// characters dropped, or cut at the first one (a C-string reader stops at
// a NUL).
func keyIs(k, want string) bool {
	if strings.EqualFold(k, want) {
		return true
	}
	if plainASCII(k) {
		return false // folds to its lower case, which EqualFold compared
	}
	drop := strings.Map(func(r rune) rune {
		if hiddenInMethod(r) {
			return -1
		}
		return r
	}, k)
	cut := k
	if i := strings.IndexFunc(k, hiddenInMethod); i >= 0 {
		cut = k[:i]
	}
	return foldName(strings.Trim(drop, " ")) == want || foldName(strings.Trim(cut, " ")) == want
}
