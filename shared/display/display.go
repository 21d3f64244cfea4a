// Package display renders text that an agent (or a tenant) supplied for a
// human to read: a terminal, a log viewer, a console. Such text can carry
// characters that act instead of showing: an escape sequence that sets the
// window title or erases rows, a carriage return that writes over a line, a
// line feed or a tab that forges a table row, a bidi override that reorders
// what is read, a zero-width or tag character that hides a word.
//
// Hidden is the one list of such characters. Text spells each one out as a
// Go-style escape for a table cell or a line of text; JSON writes each one
// inside a JSON document as a JSON escape, so the document still decodes to
// the same values. The approvers' view (package approval) uses Hidden with
// its own spelling, "[U+XXXX]", inside the JSON it shows.
//
// The package imports nothing of aegis's; every function is safe for
// concurrent use and returns its input itself, without allocating, when
// there is nothing to escape.
package display

import (
	"unicode"
	"unicode/utf8"
)

// defaultIgnorable is the Unicode property Default_Ignorable_Code_Point
// (DerivedCoreProperties.txt; the same ranges from Unicode 14 to 17):
// characters that a renderer shows as nothing when it has no glyph for
// them, assigned or not. The standard library has no table for it.
var defaultIgnorable = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x00AD, Hi: 0x00AD, Stride: 1}, // soft hyphen
		{Lo: 0x034F, Hi: 0x034F, Stride: 1}, // combining grapheme joiner
		{Lo: 0x061C, Hi: 0x061C, Stride: 1}, // Arabic letter mark
		{Lo: 0x115F, Hi: 0x1160, Stride: 1}, // Hangul choseong and jungseong fillers
		{Lo: 0x17B4, Hi: 0x17B5, Stride: 1}, // Khmer inherent vowels
		{Lo: 0x180B, Hi: 0x180F, Stride: 1}, // Mongolian variation selectors, vowel separator
		{Lo: 0x200B, Hi: 0x200F, Stride: 1}, // zero-width space, joiners, direction marks
		{Lo: 0x202A, Hi: 0x202E, Stride: 1}, // bidi embeddings and overrides
		{Lo: 0x2060, Hi: 0x206F, Stride: 1}, // word joiner, invisible operators, bidi isolates
		{Lo: 0x3164, Hi: 0x3164, Stride: 1}, // Hangul filler
		{Lo: 0xFE00, Hi: 0xFE0F, Stride: 1}, // variation selectors 1 to 16
		{Lo: 0xFEFF, Hi: 0xFEFF, Stride: 1}, // zero-width no-break space
		{Lo: 0xFFA0, Hi: 0xFFA0, Stride: 1}, // halfwidth Hangul filler
		{Lo: 0xFFF0, Hi: 0xFFF8, Stride: 1}, // reserved
	},
	R32: []unicode.Range32{
		{Lo: 0x1BCA0, Hi: 0x1BCA3, Stride: 1}, // shorthand format controls
		{Lo: 0x1D173, Hi: 0x1D17A, Stride: 1}, // musical symbol format controls
		{Lo: 0xE0000, Hi: 0xE0FFF, Stride: 1}, // tags, variation selectors 17 to 256, reserved
	},
	LatinOffset: 1,
}

// Hidden reports whether r acts on, or vanishes from, what a reader sees,
// and so is spelled out by Text and JSON:
//
//   - every C0 control (U+0000 to U+001F: NUL, TAB, LF, CR, ESC, ...), DEL
//     and every C1 control (U+0080 to U+009F, CSI among them);
//   - every format character (Unicode category Cf): bidi embeddings,
//     overrides, isolates and marks, zero-width space and joiners, the
//     word joiner, the byte order mark, tag characters, the soft hyphen;
//   - every other default-ignorable code point (fillers, variation
//     selectors, the combining grapheme joiner, reserved ranges);
//   - the line and paragraph separators (U+2028, U+2029) and the blank
//     braille pattern (U+2800), which shows as a space but is not one.
//
// Everything else, ASCII space and all letters, marks and symbols of any
// script, is shown as it is.
func Hidden(r rune) bool {
	switch {
	case r < 0x20 || r >= 0x7F && r <= 0x9F:
		return true
	case r < 0xA0:
		return false
	case r == 0x2028 || r == 0x2029 || r == 0x2800:
		return true
	}
	return unicode.Is(unicode.Cf, r) || unicode.Is(defaultIgnorable, r)
}

// Text returns s as a human is shown it, one line with every Hidden
// character and every byte of invalid UTF-8 spelled out:
//
//   - TAB, LF and CR as \t, \n and \r; other characters below U+0080 (the
//     other C0 controls and DEL) as \xHH, ESC as \x1b;
//   - other Hidden characters as \uHHHH (\u202e, \u200b, \u0085), or
//     \UHHHHHHHH above U+FFFF (\U000e0041);
//   - a byte that is not part of valid UTF-8 as \xHH (always 80 or more,
//     so it never reads as a control).
//
// Hex digits are lower case. Backslashes are left as they are, so text
// that holds nothing hidden (a Windows path, a regular expression) comes
// back unchanged; an agent can therefore write "\x1b" literally, which
// can make text look more suspect, never less. Text returns s itself,
// without allocating, when nothing needs spelling out.
func Text(s string) string {
	i := clean(s)
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = appendHex(append(b, `\x`...), uint32(s[i]), 2)
		case !Hidden(r):
			b = append(b, s[i:i+n]...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x80:
			b = appendHex(append(b, `\x`...), uint32(r), 2)
		case r <= 0xFFFF:
			b = appendHex(append(b, `\u`...), uint32(r), 4)
		default:
			b = appendHex(append(b, `\U`...), uint32(r), 8)
		}
		i += n
	}
	return string(b)
}

// clean returns the length of the longest prefix of s that holds nothing
// to spell out.
func clean(s string) int {
	for i := 0; i < len(s); {
		if c := s[i]; c >= 0x20 && c < 0x7F {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || Hidden(r) {
			return i
		}
		i += n
	}
	return len(s)
}

// JSON returns the JSON document b with every Hidden character and every
// byte of invalid UTF-8 inside a string written as a JSON escape (\u001b,
// \u202e, a surrogate pair above U+FFFF; invalid bytes as \ufffd, as
// encoding/json decodes them). encoding/json already escapes the C0
// controls but writes DEL, the C1 controls, bidi and zero-width
// characters as they are; after JSON, a document holds only printable
// text, and it decodes to the same values as before (invalid bytes
// aside). Outside strings, JSON white space (space, TAB, LF, CR) is left
// as it is, and any other Hidden character or invalid byte is written as
// an escape too, so that input that is not JSON cannot reach a terminal
// raw either. JSON returns b itself, without allocating, when nothing
// needs escaping; it never modifies b.
func JSON(b []byte) []byte {
	i, in := cleanJSON(b, 0, false)
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			r = utf8.RuneError
		}
		out = appendJSONEscape(out, r)
		i += n
		j, in2 := cleanJSON(b, i, in)
		out = append(out, b[i:j]...)
		i, in = j, in2
	}
	return out
}

// cleanJSON scans b from i, inside a string or not, and returns where the
// first character to escape starts (len(b) if none) and whether it is
// inside a string.
func cleanJSON(b []byte, i int, in bool) (int, bool) {
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			in = !in
			i++
		case c == '\\' && in:
			i += 2 // a backslash and the byte it escapes, which is ASCII in valid JSON
			if i > len(b) {
				return len(b), in
			}
			if b[i-1] >= 0x80 || b[i-1] < 0x20 {
				return i - 1, in
			}
		case c >= 0x20 && c < 0x7F:
			i++
		case !in && (c == '\t' || c == '\n' || c == '\r'):
			i++
		default:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 || Hidden(r) {
				return i, in
			}
			i += n
		}
	}
	return len(b), in
}

// appendJSONEscape appends r as a JSON \u escape (a surrogate pair above
// U+FFFF).
func appendJSONEscape(b []byte, r rune) []byte {
	if r > 0xFFFF {
		r -= 0x10000
		b = appendHex(append(b, `\u`...), uint32(0xD800+(r>>10)), 4)
		return appendHex(append(b, `\u`...), uint32(0xDC00+(r&0x3FF)), 4)
	}
	return appendHex(append(b, `\u`...), uint32(r), 4)
}

// appendHex appends v as digits lower-case hex digits.
func appendHex(b []byte, v uint32, digits int) []byte {
	const hex = "0123456789abcdef"
	for shift := (digits - 1) * 4; shift >= 0; shift -= 4 {
		b = append(b, hex[v>>uint(shift)&0xF])
	}
	return b
}
