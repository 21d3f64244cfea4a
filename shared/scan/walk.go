package scan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// String is one JSON string (or, with Number set, one number) met by Walk.
// Its slices are valid only during the visit that receives it: the walker
// reuses them.
type String struct {
	// Path is the RFC 6901 pointer of the value; for an object key, the
	// pointer of its member.
	Path []byte
	// Key reports that the string is an object key.
	Key bool
	// Number reports that the value is a JSON number; Raw and Decoded are
	// then its literal text.
	Number bool
	// Start and End are the bounds of the string's content in the
	// document, between its quotes: Raw is doc[Start:End].
	Start, End int
	Raw        []byte
	// Decoded is the content with every escape decoded (a lone surrogate
	// becomes U+FFFD, as encoding/json reads it). It is Raw itself when
	// the string holds no escape.
	Decoded []byte
	// Escaped reports that Raw holds an escape.
	Escaped bool
	// Member is the raw key of the member the value belongs to (for an
	// array element, that of the nearest enclosing member), nil at the top
	// level and for keys. Detectors use it as context ("ssn", "dob").
	Member []byte
}

// SyntaxError is the error Walk and Scan return for a document that is not
// one JSON value.
type SyntaxError struct {
	Offset int // the byte where the document stops being JSON
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("scan: invalid JSON at byte %d: %s", e.Offset, e.msg)
}

// MaxNesting is how deeply arrays and objects may nest in a document Walk
// accepts: encoding/json's own limit.
const MaxNesting = 10000

// Walk calls visit for every string of doc, object keys included, and
// every number, in document order, in one pass. doc must be one JSON value
// (RFC 8259, surrounding whitespace allowed); otherwise Walk returns a
// *SyntaxError, after visiting the strings before the error. A non-nil
// error from visit stops the walk and is returned. Walk does not modify
// doc and does not look inside strings that hold JSON text (Scanner does).
func Walk(doc []byte, visit func(s *String) error) error {
	return WalkVisitor(doc, funcVisitor(visit))
}

// Visitor receives the strings of a walk (see Walk).
type Visitor interface {
	Visit(s *String) error
}

// WalkVisitor is Walk with v.Visit as the visit function. It allocates
// nothing once its pooled buffers have grown to the document's needs, so
// a caller that keeps its own state in a reused v walks for free.
func WalkVisitor(doc []byte, v Visitor) error {
	w := walkerPool.Get().(*walker)
	w.reset(doc, v)
	err := w.run()
	w.reset(nil, nil)
	walkerPool.Put(w)
	return err
}

var walkerPool = sync.Pool{New: func() any { return new(walker) }}

type funcVisitor func(s *String) error

func (f funcVisitor) Visit(s *String) error { return f(s) }

// walker is one Walk. It keeps its buffers between walks when reused.
type walker struct {
	doc  []byte
	i    int
	path []byte
	buf  []byte // decoded strings
	str  String
	v    Visitor
	// lazy is the Scanner's level this walk serves, or nil. String.Path
	// is then left nil: the walk notes the reference tokens of the path
	// in steps instead, and pathNow builds it for the Scanner, at a
	// finding. The walk also hands each string to lazy.scan itself,
	// without filling a String: most strings are short, and that was a
	// large part of their cost.
	lazy  lazyVisitor
	steps []step
	key   []byte // a decoded key, for pathNow
	// minNumber: numbers whose literal is shorter are not visited (the
	// Scanner finds nothing in fewer than 9 bytes); 0 visits all.
	minNumber int
}

// lazyVisitor is what a lazy walk hands its strings to (the Scanner's
// level): a string's content as written (a number's literal), whether
// it holds an escape, the raw key of its member, and whether it is a key
// or a number.
type lazyVisitor interface {
	scan(raw []byte, esc bool, member []byte, key, number bool)
}

// step is one reference token of a lazy walk's path: an object member's
// key, doc[start:end] as written, or an array index (start -1, end the
// index). It holds no pointer, so that noting it costs a store.
type step struct {
	start, end int
	esc        bool // the key holds an escape
}

func (w *walker) reset(doc []byte, v Visitor) {
	w.doc, w.i, w.path, w.steps, w.v = doc, 0, w.path[:0], w.steps[:0], v
	w.str = String{}
}

// pathNow returns the pointer of the current string: String.Path, or for
// a lazy walk the path built from its steps. It is valid until the walk
// goes on.
func (w *walker) pathNow() []byte {
	if w.lazy == nil {
		return w.str.Path
	}
	w.path = w.path[:0]
	for _, st := range w.steps {
		w.path = append(w.path, '/')
		if st.start < 0 {
			w.path = appendIndex(w.path, st.end)
			continue
		}
		key := w.doc[st.start:st.end]
		if st.esc {
			w.key = AppendUnescaped(w.key[:0], key)
			key = w.key
		}
		w.path = appendToken(w.path, key)
	}
	return w.path
}

func (w *walker) run() error {
	w.space()
	if err := w.value(0, nil); err != nil {
		return err
	}
	w.space()
	if w.i != len(w.doc) {
		return w.fail("data after the value")
	}
	return nil
}

func (w *walker) fail(msg string) error { return &SyntaxError{Offset: w.i, msg: msg} }

func (w *walker) space() {
	// Most calls meet no space at all: one comparison decides.
	if w.i < len(w.doc) && w.doc[w.i] > ' ' {
		return
	}
	i := w.i
	for i < len(w.doc) {
		switch w.doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	w.i = i
}

func (w *walker) value(depth int, member []byte) error {
	if w.i >= len(w.doc) {
		return w.fail("unexpected end")
	}
	switch c := w.doc[w.i]; c {
	case '{':
		if depth >= MaxNesting {
			return w.fail("nested too deep")
		}
		return w.object(depth)
	case '[':
		if depth >= MaxNesting {
			return w.fail("nested too deep")
		}
		return w.array(depth, member)
	case '"':
		start, end, esc, err := w.quoted()
		if err != nil {
			return err
		}
		if w.lazy != nil {
			w.lazy.scan(w.doc[start:end], esc, member, false, false)
			return nil
		}
		return w.visit(start, end, esc, false, member)
	case 't':
		return w.literal("true")
	case 'f':
		return w.literal("false")
	case 'n':
		return w.literal("null")
	default:
		start := w.i
		if err := w.number(); err != nil {
			return err
		}
		if w.i-start < w.minNumber {
			return nil
		}
		if w.lazy != nil {
			w.lazy.scan(w.doc[start:w.i], false, member, false, true)
			return nil
		}
		s := &w.str
		s.Path, s.Key, s.Number, s.Start, s.End, s.Member = w.path, false, true, start, w.i, member
		s.Raw = w.doc[start:w.i]
		s.Decoded, s.Escaped = s.Raw, false
		return w.v.Visit(s)
	}
}

func (w *walker) literal(lit string) error {
	if len(w.doc)-w.i < len(lit) || string(w.doc[w.i:w.i+len(lit)]) != lit {
		return w.fail("invalid literal")
	}
	w.i += len(lit)
	return nil
}

func (w *walker) number() error {
	d, i := w.doc, w.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		w.i = i
		return w.fail("invalid value")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			w.i = i
			return w.fail("invalid number")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			w.i = i
			return w.fail("invalid number")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	w.i = i
	return nil
}

func (w *walker) object(depth int) error {
	w.i++ // '{'
	w.space()
	if w.i < len(w.doc) && w.doc[w.i] == '}' {
		w.i++
		return nil
	}
	base, steps := len(w.path), len(w.steps)
	if w.lazy != nil {
		w.steps = append(w.steps, step{}) // this member's, steps[steps]
	}
	for {
		if w.i >= len(w.doc) || w.doc[w.i] != '"' {
			return w.fail("expected a member name")
		}
		start, end, esc, err := w.quoted()
		if err != nil {
			return err
		}
		if w.lazy != nil {
			w.steps[steps] = step{start: start, end: end, esc: esc}
		} else {
			key := w.doc[start:end]
			if esc {
				w.buf = AppendUnescaped(w.buf[:0], key)
				key = w.buf
			}
			w.path = appendToken(append(w.path[:base], '/'), key)
		}
		if w.lazy != nil {
			w.lazy.scan(w.doc[start:end], esc, nil, true, false)
		} else if err := w.visit(start, end, esc, true, nil); err != nil {
			return err
		}
		if w.i >= len(w.doc) || w.doc[w.i] != ':' {
			w.space()
			if w.i >= len(w.doc) || w.doc[w.i] != ':' {
				return w.fail("expected ':'")
			}
		}
		w.i++
		w.space()
		if err := w.value(depth+1, w.doc[start:end]); err != nil {
			return err
		}
		w.space()
		if w.i >= len(w.doc) {
			return w.fail("unexpected end")
		}
		switch w.doc[w.i] {
		case ',':
			w.i++
			w.space()
		case '}':
			w.i++
			w.path, w.steps = w.path[:base], w.steps[:steps]
			return nil
		default:
			return w.fail("expected ',' or '}'")
		}
	}
}

func (w *walker) array(depth int, member []byte) error {
	w.i++ // '['
	w.space()
	if w.i < len(w.doc) && w.doc[w.i] == ']' {
		w.i++
		return nil
	}
	base, steps := len(w.path), len(w.steps)
	if w.lazy != nil {
		w.steps = append(w.steps, step{start: -1}) // this element's, steps[steps]
	}
	for n := 0; ; n++ {
		if w.lazy != nil {
			w.steps[steps].end = n
		} else {
			w.path = appendIndex(append(w.path[:base], '/'), n)
		}
		if err := w.value(depth+1, member); err != nil {
			return err
		}
		w.space()
		if w.i >= len(w.doc) {
			return w.fail("unexpected end")
		}
		switch w.doc[w.i] {
		case ',':
			w.i++
			w.space()
		case ']':
			w.i++
			w.path, w.steps = w.path[:base], w.steps[:steps]
			return nil
		default:
			return w.fail("expected ',' or ']'")
		}
	}
}

// strByte classifies the bytes of a string's content: 0 plain, 1 ends or
// escapes ('"', '\'), 2 invalid (a control character).
var strByte = func() (t [256]uint8) {
	for c := range 0x20 {
		t[c] = 2
	}
	t['"'], t['\\'] = 1, 1
	return t
}()

// special8 marks (with its high bit) each of the eight bytes of x that
// is '"', '\\' or a control character (below 0x20): the bytes that end a
// plain run of a string's content (strByte not 0). A byte's mark is exact
// when no lower byte is marked, so the lowest mark is the first such byte.
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// A byte below 0x20 is found by subtracting 0x20 from each byte, a
	// byte equal to c by subtracting 1 from x^c; a byte of 0x80 or more
	// stays out of the tests (&^).
	q, b := x^('"'*ones), x^('\\'*ones)
	return ((x-0x20*ones)&^x | (q-ones)&^q | (b-ones)&^b) & highs
}

// plain8 reports whether none of the eight bytes of x is '"', '\\' or a
// control character (strByte 0).
func plain8(x uint64) bool { return special8(x) == 0 }

// quoted reads the string at w.i (its opening quote) and returns the
// bounds of its content and whether it holds an escape.
func (w *walker) quoted() (start, end int, esc bool, err error) {
	d := w.doc
	i := w.i + 1
	start = i
	base := unsafe.Pointer(unsafe.SliceData(d))
	for {
		// Eight bytes at a time up to the first special one, then byte
		// by byte near the end of the document.
		for {
			if i+8 > len(d) {
				for i < len(d) && strByte[d[i]] == 0 {
					i++
				}
				break
			}
			// d[i:i+8] is in d: read without slicing d (a check of its
			// bounds and a masked pointer at every step).
			if m := special8(binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(base, i))[:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(d) {
			w.i = i
			return 0, 0, false, w.fail("unterminated string")
		}
		switch d[i] {
		case '"':
			w.i = i + 1
			return start, i, esc, nil
		case '\\':
			esc = true
			if i+1 >= len(d) {
				w.i = i
				return 0, 0, false, w.fail("unterminated string")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) || !isHex(d[i+5]) {
					w.i = i
					return 0, 0, false, w.fail("invalid \\u escape")
				}
				i += 6
			default:
				w.i = i
				return 0, 0, false, w.fail("invalid escape")
			}
		default:
			w.i = i
			return 0, 0, false, w.fail("control character in string")
		}
	}
}

// visit fills w.str for the string doc[start:end] and calls the visitor.
func (w *walker) visit(start, end int, esc, key bool, member []byte) error {
	s := &w.str
	s.Path, s.Key, s.Number, s.Start, s.End, s.Member = w.path, key, false, start, end, member
	s.Raw = w.doc[start:end]
	s.Decoded = s.Raw
	s.Escaped = esc
	if esc {
		w.unescape()
	}
	return w.v.Visit(s)
}

// unescape decodes w.str.Raw into w.buf, w.str.Decoded.
func (w *walker) unescape() {
	w.buf = AppendUnescaped(w.buf[:0], w.str.Raw)
	w.str.Decoded = w.buf
}

// appendIndex appends n, an array index, in decimal.
func appendIndex(dst []byte, n int) []byte {
	if n < 10 {
		return append(dst, byte('0'+n))
	}
	return strconv.AppendInt(dst, int64(n), 10)
}

// appendToken appends key as a JSON pointer reference token: '~' as "~0",
// '/' as "~1".
func appendToken(dst, key []byte) []byte {
	plain := true
	for _, c := range key {
		plain = plain && c != '~' && c != '/'
	}
	if plain {
		return append(dst, key...)
	}
	for _, c := range key {
		switch c {
		case '~':
			dst = append(dst, '~', '0')
		case '/':
			dst = append(dst, '~', '1')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// AppendUnescaped appends the content of a JSON string, c (the text between
// its quotes), with its escapes decoded as encoding/json decodes them: the
// short escapes, \uXXXX in either case, surrogate pairs; a lone surrogate
// becomes U+FFFD. A backslash that starts no valid escape is kept as it
// is, so any text can be decoded (a string's content seen once more as
// JSON text, as the upstream scrubber does).
func AppendUnescaped(dst, c []byte) []byte {
	for i := 0; i < len(c); {
		b := c[i]
		if b != '\\' || i+1 >= len(c) {
			// Copy the run up to the next backslash at once.
			j := len(c)
			if k := bytes.IndexByte(c[i+1:], '\\'); k >= 0 {
				j = i + 1 + k
			}
			dst = append(dst, c[i:j]...)
			i = j
			continue
		}
		if r, ok := ShortEscape(c[i+1]); ok {
			dst = append(dst, r)
			i += 2
			continue
		}
		u, ok := hex4(c, i+2)
		if c[i+1] != 'u' || !ok {
			dst = append(dst, b)
			i++
			continue
		}
		i += 6
		if utf16.IsSurrogate(u) {
			r := utf8.RuneError
			if u < 0xdc00 && i+1 < len(c) && c[i] == '\\' && c[i+1] == 'u' {
				if lo, ok := hex4(c, i+2); ok {
					if d := utf16.DecodeRune(u, lo); d != utf8.RuneError {
						r = d
						i += 6
					}
				}
			}
			u = r
		}
		dst = utf8.AppendRune(dst, u)
	}
	return dst
}

// shortEscape is the byte of the two-character JSON escape \e.
func ShortEscape(e byte) (byte, bool) {
	switch e {
	case '"', '\\', '/':
		return e, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// hex4 reads four hex digits at c[j:].
func hex4(c []byte, j int) (rune, bool) {
	if j+4 > len(c) {
		return 0, false
	}
	var u rune
	for _, b := range c[j : j+4] {
		v, ok := HexVal(b)
		if !ok {
			return 0, false
		}
		u = u<<4 | rune(v)
	}
	return u, true
}

func isHex(c byte) bool { _, ok := HexVal(c); return ok }

// HexVal is the value of the hex digit c (either case).
func HexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// AppendEscaped appends s as the content of a JSON string (without the
// quotes): '"', '\', control characters, U+2028 and U+2029 are escaped,
// invalid UTF-8 becomes \ufffd, everything else is kept as it is (no HTML
// escaping): what log/slog's JSON handler writes. The result decodes back
// to s when s is valid UTF-8. s is only read.
func AppendEscaped(dst, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	start := 0 // s[start:i] is kept as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, `\n`...)
			case '\r':
				dst = append(dst, `\r`...)
			case '\t':
				dst = append(dst, `\t`...)
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\u202`...)
			dst = append(dst, hexDigits[r&0xf])
		default:
			i += n
			continue
		}
		i += n
		start = i
	}
	return append(dst, s[start:]...)
}

// AppendEscapedString is AppendEscaped for a string, without copying it.
func AppendEscapedString(dst []byte, s string) []byte {
	return AppendEscaped(dst, unsafe.Slice(unsafe.StringData(s), len(s))) // read only
}
