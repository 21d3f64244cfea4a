package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/textproto"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Redacted replaces a brokered credential wherever it is found in what comes
// back from an upstream.
const Redacted = "[REDACTED]"

// Lengths that decide what is scrubbed.
//
// A credential (or a part of one, see NewScrubber) shorter than minScrubLen
// bytes is not scrubbed at all: it would redact ordinary text.
//
// The base64 of a value inside a longer string (base64("user:" + secret))
// is scrubbed only for values of at least minShiftLen bytes: 8 bytes leave
// at least 10 base64 characters that depend on the value alone (60 bits),
// so a chance match in unrelated base64 (an image in a result) is out of
// reach, while shorter values would redact common 4- to 8-character runs.
//
// minTail is the shortest end of a cut text that is redacted because it
// could be the start of the credential (see Scrubber.cut): shorter ends
// are too likely to be ordinary text, and reveal at most 3 bytes.
const (
	minScrubLen = 4
	minShiftLen = 8
	minTail     = 4
)

// maxJSONDepth is how deep a credential inside JSON strings inside JSON
// strings is still recognised: 1 is a string of the answer, 2 a string of a
// JSON document carried as text in one (tool results often do that), 3 one
// level further.
const maxJSONDepth = 3

// maxSpell is the longest spelling of one byte of a value that is
// recognised: a \uXXXX escape at depth 3, whose backslash is itself
// spelled at depth 2 (`\\\\u0026`, 4 + 5 bytes).
const maxSpell = 1<<(maxJSONDepth-1) + 5

// Scrubber removes a brokered credential from upstream answers in every
// form it may take there. It matches the credential's bytes through the
// escapes that encoders write, in any mix, on every byte that is not a
// letter or a digit (no encoder escapes those, and requiring them as they
// are is what lets a scan skip text fast):
//
//   - raw;
//   - JSON string escapes, nested up to maxJSONDepth levels: the short
//     escapes (\" \\ \/ \n ...) and \uXXXX in either case, surrogate pairs
//     included, so the HTML-safe (Go), plain, slash-escaping (PHP) and
//     ASCII-only (Python) encodings of a value are all caught;
//   - URL percent-escapes in either case, and '+' for a space;
//   - base64, standard or URL alphabet, padded or not, both of the whole
//     value and of the value inside a longer string at each of the three
//     byte alignments (values of minShiftLen bytes or more); the escapes
//     above apply to the base64 text too.
//
// The values removed are the credential as injected (trimmed), and when it
// starts with an auth scheme ("Bearer x", "token x", "Basic x") the part
// after the scheme, and for Basic the decoded "user:password" and the
// password.
//
// The zero value removes nothing. A Scrubber is immutable and safe for
// concurrent use.
type Scrubber struct {
	set *scrubSet
}

// scrubSet is what NewScrubber prepares.
type scrubSet struct {
	pats   []pattern
	maxLen int
}

// pattern is one byte string to find. A match covers at least p[:min] and
// extends as far into p as the text allows (base64 forms: the last
// character and the padding exist only when the value ends the encoded
// string).
type pattern struct {
	p   string
	min int
	b64 bool // '-' stands for '+' and '_' for '/' (URL alphabet)
	// anchor is a run of letters and digits in p[:min] (see anchorOf),
	// which every match contains as it is. A match starts between near
	// and far bytes before an occurrence of it: p's bytes before the
	// anchor are spelled in 1 (letters and digits) to maxSpell bytes
	// each, and the anchor may be found more than once in p[:min]. Empty
	// when p[:min] has no letter or digit: then a match may start
	// anywhere.
	anchor    string
	near, far int
}

// NewScrubber returns a Scrubber for secret. Leading and trailing ASCII
// whitespace is trimmed first, as net/http trims it from a header value
// it sends. An empty or very short secret gives a Scrubber that removes
// nothing.
func NewScrubber(secret string) Scrubber {
	set := &scrubSet{}
	for _, v := range credentialValues(textproto.TrimString(secret)) {
		set.add(pattern{p: v, min: len(v)})
		for _, pt := range base64Patterns(v) {
			set.add(pt)
		}
	}
	if len(set.pats) == 0 {
		return Scrubber{}
	}
	return Scrubber{set: set}
}

// credentialValues lists the values to remove for a trimmed credential:
// itself, the token after an auth scheme, and Basic's decoded credentials.
// Values shorter than minScrubLen are left out.
func credentialValues(v string) []string {
	var vals []string
	add := func(s string) {
		if len(s) >= minScrubLen && !slices.Contains(vals, s) {
			vals = append(vals, s)
		}
	}
	add(v)
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok || !isScheme(scheme) {
		return vals
	}
	rest = textproto.TrimString(rest)
	add(rest)
	if strings.EqualFold(scheme, "Basic") {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
			if b, err := enc.DecodeString(rest); err == nil {
				add(string(b))
				if _, pass, ok := strings.Cut(string(b), ":"); ok {
					add(pass)
				}
				break
			}
		}
	}
	return vals
}

// isScheme reports whether w looks like an HTTP auth scheme (Bearer, Basic,
// Token, Bot, Digest, AWS4-HMAC-SHA256...): a letter, then letters, digits,
// '-', '_' or '.', 32 bytes at most.
func isScheme(w string) bool {
	if w == "" || len(w) > 32 || !isAlnum(w[0]) || isDigit(w[0]) {
		return false
	}
	for i := 1; i < len(w); i++ {
		if c := w[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// base64Patterns are the base64 forms of v. For values shorter than
// minShiftLen: the encoding of the whole value only (unpadded, the padding
// optional). Otherwise, for each alignment k of v after k bytes of other
// data: the characters that depend on v's bits alone, then, optionally, the
// last character and the padding that follow when v ends the data (k = 0
// is the encoding of the whole value).
func base64Patterns(v string) []pattern {
	if len(v) < minShiftLen {
		return []pattern{{p: base64.StdEncoding.EncodeToString([]byte(v)), min: base64.RawStdEncoding.EncodedLen(len(v)), b64: true}}
	}
	pats := make([]pattern, 0, 3)
	for k := range 3 {
		buf := make([]byte, k+len(v))
		copy(buf[k:], v)
		enc := base64.StdEncoding.EncodeToString(buf)
		first := (8*k + 5) / 6      // the first character made of v's bits only
		end := 8 * (k + len(v)) / 6 // the end of the characters made of v's bits only
		pats = append(pats, pattern{p: enc[first:], min: end - first, b64: true})
	}
	return pats
}

func (s *scrubSet) add(pt pattern) {
	for _, q := range s.pats {
		if q.p == pt.p && q.min == pt.min && q.b64 == pt.b64 {
			return
		}
	}
	head := pt.p[:pt.min]
	pt.anchor = anchorOf(head)
	pt.near = len(head)
	for off := 0; pt.anchor != ""; {
		k := strings.Index(head[off:], pt.anchor)
		if k < 0 {
			break
		}
		q, far := off+k, 0
		for _, c := range []byte(head[:q]) {
			if isAlnum(c) {
				far++
			} else {
				far += maxSpell
			}
		}
		pt.near, pt.far = min(pt.near, q), max(pt.far, far)
		off = q + 1
	}
	s.pats = append(s.pats, pt)
	s.maxLen = max(s.maxLen, len(pt.p))
}

// maxAnchor is the longest anchor: 16 letters and digits of a credential
// do not occur by chance, and a short needle keeps the search fast.
const maxAnchor = 16

// anchorOf picks the anchor in head: maxAnchor letters and digits in a row
// (fewer when head has no such run), starting where the first two bytes are
// least common in text (capitals, then digits, then small letters), for the
// substring search to stop at as few places as possible.
func anchorOf(head string) string {
	var runs [][2]int // runs of letters and digits: head[r[0]:r[1]]
	longest := 0
	for i := 0; i < len(head); i++ {
		j := i
		for j < len(head) && isAlnum(head[j]) {
			j++
		}
		if j > i {
			runs = append(runs, [2]int{i, j})
			longest = max(longest, j-i)
		}
		i = j
	}
	n := min(longest, maxAnchor)
	if n == 0 {
		return ""
	}
	rank := func(c byte) int {
		switch {
		case c >= 'A' && c <= 'Z':
			return 2
		case isDigit(c):
			return 1
		}
		return 0
	}
	best, bestScore := "", -1
	for _, r := range runs {
		for i := r[0]; i+n <= r[1]; i++ {
			score := 3 * rank(head[i])
			if n > 1 {
				score += rank(head[i+1])
			}
			if score > bestScore {
				best, bestScore = head[i:i+n], score
			}
		}
	}
	return best
}

// Active reports whether s removes anything.
func (s Scrubber) Active() bool { return s.set != nil }

// JSON returns raw with every form of the secret replaced by Redacted. raw
// is not modified; when nothing matches, raw itself is returned (no copy on
// the common path). A match never includes an unescaped '"', '\' or control
// character and never starts inside a JSON escape, so a valid document
// stays valid.
func (s Scrubber) JSON(raw json.RawMessage) json.RawMessage {
	if s.set == nil || len(raw) == 0 {
		return raw
	}
	return s.set.scrub(raw, true)
}

// String removes every form of the secret, the raw one included, from a
// plain string (an error detail).
func (s Scrubber) String(v string) string {
	if s.set == nil || v == "" {
		return v
	}
	b := []byte(v)
	if out := s.set.scrub(b, false); &out[0] != &b[0] {
		return string(out)
	}
	return v
}

// span is the most text one match can cover.
func (s Scrubber) span() int {
	if s.set == nil {
		return 0
	}
	return maxSpell * s.set.maxLen
}

// cut returns at most the first n bytes of b, an upstream's text, for an
// error detail or a log line, with the credential removed. The whole of b
// is scrubbed first and cut after; then, when anything was cut (or b itself
// was cut short by a read limit: more), an end of at least minTail bytes
// that could be the start of a form of the credential is replaced by
// Redacted too. The result may exceed n by that marker. b is not modified.
func (s Scrubber) cut(b []byte, n int, more bool) []byte {
	if s.set != nil {
		b = s.set.scrub(b, false)
	}
	if len(b) > n {
		b, more = b[:n], true
	}
	if more && s.set != nil {
		b = s.set.redactTail(b)
	}
	return b
}

// interval is a match: t[start:end].
type interval struct{ start, end int }

// scrub replaces every match in t by Redacted; overlapping or touching
// matches become one. It returns t itself when nothing matches.
//
// The work is bounded: each position is tried at most once per pattern,
// every step of every try draws on a budget proportional to t, and one try
// whose alternatives multiply (a value made of '%' and '\', against a text
// made of them) may take only a few times the pattern's length. Going over
// either fails closed: the whole of t is redacted, as a JSON string when t
// is JSON.
func (s *scrubSet) scrub(t []byte, inJSON bool) []byte {
	sc := scan{t: t, json: inJSON, budget: workPerByte*len(t) + workBase}
	for i := range s.pats {
		sc.find(&s.pats[i])
	}
	switch {
	case sc.budget < 0 && inJSON:
		return []byte(`"` + Redacted + `"`)
	case sc.budget < 0:
		return []byte(Redacted)
	case len(sc.found) == 0:
		return t
	}
	found := sc.found
	slices.SortFunc(found, func(a, b interval) int { return a.start - b.start })
	out := make([]byte, 0, len(t))
	prev := 0
	for i := 0; i < len(found); {
		start, end := found[i].start, found[i].end
		for i++; i < len(found) && found[i].start <= end; i++ {
			end = max(end, found[i].end)
		}
		out = append(out, t[prev:start]...)
		out = append(out, Redacted...)
		prev = end
	}
	return append(out, t[prev:]...)
}

// The work budget of one scrub, in walker steps: far more than any real
// answer needs (a text that is the credential over and over costs about
// two steps per byte), and workPerTry per byte of the pattern for one try
// (a walk without alternatives takes one step per byte).
const (
	workPerByte = 16
	workBase    = 1 << 16
	workPerTry  = 16
)

// scan is one scrub of t: the matches found and the work left.
type scan struct {
	t      []byte
	json   bool
	found  []interval
	budget int
}

// find adds the matches of pt. Each occurrence of the anchor, found by a
// plain substring search, fixes the few places where a match can start.
func (sc *scan) find(pt *pattern) {
	t := sc.t
	next := 0 // positions before next have been tried for pt
	try := func(from, to int) {
		for st := max(from, next); st <= to && sc.budget >= 0; st++ {
			if sc.json && insideEscape(t, st) {
				continue
			}
			w := walker{t: t, pt: pt, json: sc.json, end: -1, budget: &sc.budget}
			w.walk(0, st)
			if w.end > st {
				sc.found = append(sc.found, interval{st, w.end})
			}
		}
		next = max(next, to+1)
	}
	if pt.anchor == "" {
		for st := range t {
			if c := t[st]; c == pt.p[0] || c == '\\' || c == '%' || c == '+' || pt.b64 && (c == '-' || c == '_') {
				try(st, st)
			}
		}
		return
	}
	anchor := []byte(pt.anchor)
	for off := 0; sc.budget >= 0; {
		k := bytes.Index(t[off:], anchor)
		if k < 0 {
			return
		}
		x := off + k
		try(x-pt.far, x-pt.near)
		off = x + 1
	}
}

// insideEscape reports whether t[i] is part of a JSON escape that starts
// before i (the letter of \n, a hex digit of \u0026). A backslash starts an
// escape when the run of backslashes it ends is odd.
func insideEscape(t []byte, i int) bool {
	for s := i - 1; s >= 0 && s >= i-5; s-- {
		if t[s] != '\\' {
			continue
		}
		run := 1
		for r := s - 1; r >= 0 && t[r] == '\\'; r-- {
			run++
		}
		if run%2 == 0 {
			return false // s is the letter of a \\ that ends at s+1 <= i
		}
		size := 2
		if s+1 < len(t) && t[s+1] == 'u' {
			size = 6
		}
		return i < s+size
	}
	return false
}

// redactTail replaces the end of t when it is the start of a form of the
// credential, at least minTail bytes long (t was cut there).
func (s *scrubSet) redactTail(t []byte) []byte {
	budget := workPerByte*len(t) + workBase
	for i := max(0, len(t)-maxSpell*s.maxLen); i <= len(t)-minTail; i++ {
		for idx := range s.pats {
			w := walker{t: t, pt: &s.pats[idx], end: -1, budget: &budget}
			w.walk(0, i)
			if w.partial || w.end == len(t) || budget < 0 {
				return append(t[:i:i], Redacted...)
			}
		}
	}
	return t
}

// walker matches one pattern against the text from one position. Most
// steps have one way forward; a few have several (a '%' in the value is
// also the start of "%25"), and all are followed, but the other ways die
// within a step or two on any real text; a walk that takes more than
// workPerTry steps per byte of the pattern stops the whole scrub (see
// scrubSet.scrub).
type walker struct {
	t       []byte
	pt      *pattern
	json    bool // no unescaped '"', '\' or control character
	end     int  // end of the longest match so far, or -1
	partial bool // the text ended inside a possible match
	budget  *int // steps left for the whole scrub, set below 0 to stop it
	taken   int  // steps this walk has taken
}

// maxSteps is the most ways forward from one state: a character read at
// each JSON depth 0..maxJSONDepth, a percent-escape, a '+' for a space.
const maxSteps = maxJSONDepth + 3

type step struct{ k, j int }

// walk matches pt.p[k:] at t[j:].
func (w *walker) walk(k, j int) {
	for {
		if *w.budget--; *w.budget < 0 {
			return
		}
		if w.taken++; w.taken > workPerTry*len(w.pt.p)+64 {
			*w.budget = -1
			return
		}
		if k >= w.pt.min && j > w.end {
			w.end = j
		}
		if k == len(w.pt.p) {
			return
		}
		if j == len(w.t) {
			w.partial = w.partial || k > 0
			return
		}
		var steps [maxSteps]step
		n := w.steps(k, j, &steps)
		if n == 0 {
			return
		}
		for _, st := range steps[1:n] {
			w.walk(st.k, st.j)
		}
		k, j = steps[0].k, steps[0].j
	}
}

// steps lists the ways t[j:] can go on with pt.p[k:]. Letters and digits
// of p are taken only as they are.
func (w *walker) steps(k, j int, out *[maxSteps]step) int {
	p, c := w.pt.p[k], w.t[j]
	if isAlnum(p) {
		if c != p {
			return 0
		}
		out[0] = step{k + 1, j + 1}
		return 1
	}
	n := 0
	add := func(k2, j2 int) {
		for _, st := range out[:n] {
			if st.k == k2 && st.j == j2 {
				return
			}
		}
		out[n] = step{k2, j2}
		n++
	}
	depths := 0
	if c == '\\' {
		depths = maxJSONDepth
	}
	for d := 0; d <= depths; d++ {
		ch, st := readChar(w.t, j, d)
		switch st {
		case charOK:
			if k2, ok := w.accept(k, ch); ok {
				add(k2, ch.end)
			}
		case charShort:
			w.partial = w.partial || k > 0
		}
	}
	switch c {
	case '%':
		switch {
		case j+2 < len(w.t):
			if v, ok := unhex2(w.t[j+1], w.t[j+2]); ok && w.same(v, p) {
				add(k+1, j+3)
			}
		case k > 0 && (j+1 == len(w.t) || isHex(w.t[j+1])):
			w.partial = true
		}
	case '+':
		if p == ' ' {
			add(k+1, j+1)
		}
	}
	return n
}

// accept reports whether ch continues pt.p at k, and where it leaves k.
func (w *walker) accept(k int, ch char) (int, bool) {
	p := w.pt.p
	if ch.raw {
		if w.json && (ch.v == '"' || ch.v == '\\' || ch.v < 0x20) {
			return 0, false
		}
		return k + 1, w.same(byte(ch.v), p[k])
	}
	if ch.v < utf8.RuneSelf {
		return k + 1, w.same(byte(ch.v), p[k])
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], ch.v)
	return k + n, strings.HasPrefix(p[k:], string(buf[:n]))
}

// same reports whether text byte c stands for pattern byte p.
func (w *walker) same(c, p byte) bool {
	return c == p || w.pt.b64 && (c == '-' && p == '+' || c == '_' && p == '/')
}

// char is one character of a text read at some JSON depth: a byte as it
// stands in the text (raw), or the code point of an escape.
type char struct {
	v    rune
	raw  bool
	viaU bool // spelled, at some depth, as a \u escape
	end  int  // where its spelling ends in the text
}

// Outcomes of readChar.
const (
	charOK    = iota
	charBad   // not a valid escape at that depth
	charShort // the text ends inside the character
)

// readChar reads one character of t[j:] seen at JSON depth d: at depth 0
// the byte itself, at depth d the text that depth d-1 reads, unescaped once
// more. An escape at depth d is spelled with depth d-1 characters, so '"'
// is `\"` at depth 1 and `\\\"` at depth 2; the backslash and the letter of
// an escape are not taken spelled as \u escapes themselves, and the 'u' and
// the hex digits of a \u escape only as plain bytes (which bounds a
// spelling by maxSpell).
func readChar(t []byte, j, d int) (char, int) {
	if j >= len(t) {
		return char{}, charShort
	}
	if d == 0 {
		return char{v: rune(t[j]), raw: true, end: j + 1}, charOK
	}
	c, st := readChar(t, j, d-1)
	if st != charOK || c.v != '\\' {
		return c, st
	}
	e, st := readChar(t, c.end, d-1)
	if st != charOK {
		return e, st
	}
	if c.viaU || e.viaU {
		return char{}, charBad
	}
	if e.v < utf8.RuneSelf {
		if r, ok := shortEscape(byte(e.v)); ok {
			return char{v: r, end: e.end}, charOK
		}
	}
	if e.v != 'u' || e.end != c.end+1 {
		return char{}, charBad
	}
	u, st := hex4(t, e.end)
	if st != charOK {
		return char{}, st
	}
	end := e.end + 4
	switch {
	case u >= 0xdc00 && u < 0xe000:
		return char{}, charBad
	case u >= 0xd800 && u < 0xdc00:
		// A high surrogate: the low one must follow, \uXXXX at depth d.
		b, st := readChar(t, end, d-1)
		switch {
		case st != charOK:
			return char{}, st
		case b.v != '\\' || b.viaU:
			return char{}, charBad
		case b.end >= len(t):
			return char{}, charShort
		case t[b.end] != 'u':
			return char{}, charBad
		}
		lo, st := hex4(t, b.end+1)
		if st != charOK {
			return char{}, st
		}
		r := utf16.DecodeRune(u, lo)
		if r == utf8.RuneError {
			return char{}, charBad
		}
		return char{v: r, viaU: true, end: b.end + 5}, charOK
	}
	return char{v: u, viaU: true, end: end}, charOK
}

// hex4 reads the four plain hex digits at t[j:].
func hex4(t []byte, j int) (rune, int) {
	var u rune
	for i := j; i < j+4; i++ {
		if i >= len(t) {
			return 0, charShort
		}
		v, ok := hexVal(t[i])
		if !ok {
			return 0, charBad
		}
		u = u<<4 | rune(v)
	}
	return u, charOK
}

// shortEscape is the character of the two-character JSON escape \e.
func shortEscape(e byte) (rune, bool) {
	switch e {
	case '"', '\\', '/':
		return rune(e), true
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

func unhex2(a, b byte) (byte, bool) {
	hi, ok1 := hexVal(a)
	lo, ok2 := hexVal(b)
	return hi<<4 | lo, ok1 && ok2
}

func isHex(c byte) bool { _, ok := hexVal(c); return ok }

func hexVal(c byte) (byte, bool) {
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

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'z' }
