package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"

	"unicode/utf8"

	"github.com/aegis-gw/aegis/shared/refusal"

	content "github.com/aegis-gw/aegis/shared/scan"
)

// Redacted replaces a brokered credential wherever it is found in what comes
// back from an upstream.
const Redacted = "[REDACTED]"

// Lengths that decide what is scrubbed.
//
// A credential shorter than minScrubLen bytes is not scrubbed at all: it
// would redact ordinary text. A part of one (the token after a scheme,
// Basic's user:password and password, the value of name=value, see
// NewScrubber) shorter than minPartLen bytes is not scrubbed on its own:
// a 4-digit Basic password would redact every number and word holding
// those digits; the whole credential, which holds it, still is.
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
	minPartLen  = 8
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
// form it may take there. Its scan matches the credential's bytes through
// the escapes that encoders write, in any mix, on every byte that is not a
// letter or a digit (requiring those as they are is what lets the scan
// skip text fast; the decoded pass, see deepJSON, then catches escaped
// letters and digits, hex and pieces of the credential):
//
//   - raw;
//   - JSON string escapes, nested up to maxJSONDepth levels: the short
//     escapes (\" \\ \/ \n ...) and \uXXXX in either case, surrogate pairs
//     included, so the HTML-safe (Go), plain, slash-escaping (PHP) and
//     ASCII-only (Python) encodings of a value are all caught;
//   - URL percent-escapes in either case, once or twice over (%252F),
//     and '+' for a space;
//   - base64, standard or URL alphabet, padded or not, both of the whole
//     value and of the value inside a longer string at each of the three
//     byte alignments (values of minShiftLen bytes or more), with line
//     breaks between its characters (wrapped at 76 or 64); the escapes
//     above apply to the base64 text too.
//
// The values removed are the credential as injected (trimmed), and when it
// starts with an auth scheme and whitespace ("Bearer x", "token x",
// "Basic x") the part after the scheme, and for Basic the decoded
// "user:password" and the password; when it is a single name=value pair
// ("sid=x"), the value. Parts shorter than minPartLen are left out.
//
// In JSON, a form inside a string is replaced by Redacted within the
// string; a form outside strings (in a number) takes the whole scalars it
// touches, each replaced by the string "[REDACTED]", so that a valid
// document stays valid.
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
	runs   []runValue // the run rule of the decoded pass
}

// pattern is one byte string to find. A match covers at least p[:min] and
// extends as far into p as the text allows (base64 forms: the last
// character and the padding exist only when the value ends the encoded
// string).
type pattern struct {
	p   string
	min int
	b64 bool // '-' stands for '+' and '_' for '/' (URL alphabet); line breaks may stand between characters
	// short: the value is under minShiftLen bytes. Outside JSON strings
	// its forms are taken only when they are whole scalars.
	short bool
	// punct: p[:min] is JSON punctuation and whitespace only, so a match
	// outside strings holds no scalar to replace.
	punct bool
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
	vals := credentialValues(textproto.TrimString(secret))
	for _, v := range vals {
		set.add(pattern{p: v, min: len(v), short: len(v) < minShiftLen})
		for _, pt := range base64Patterns(v) {
			set.add(pt)
		}
	}
	if len(set.pats) == 0 {
		return Scrubber{}
	}
	set.runs = runValues(vals)
	return Scrubber{set: set}
}

// credentialValues lists the values to remove for a trimmed credential:
// itself, the token after an auth scheme (split from it by any
// whitespace), Basic's decoded credentials, and the value of a single
// name=value pair. The credential is left out under minScrubLen bytes, a
// part of it under minPartLen.
func credentialValues(v string) []string {
	var vals []string
	add := func(s string, least int) {
		if len(s) >= least && !slices.Contains(vals, s) {
			vals = append(vals, s)
		}
	}
	add(v, minScrubLen)
	if i := strings.IndexFunc(v, isSpace); i > 0 && isScheme(v[:i]) {
		rest := strings.TrimLeftFunc(v[i:], isSpace)
		add(rest, minPartLen)
		if strings.EqualFold(v[:i], "Basic") {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
				if b, err := enc.DecodeString(rest); err == nil {
					add(string(b), minPartLen)
					if _, pass, ok := strings.Cut(string(b), ":"); ok {
						add(pass, minPartLen)
					}
					break
				}
			}
		}
		return vals
	}
	if name, val, ok := strings.Cut(v, "="); ok && isName(name) && strings.IndexFunc(val, func(r rune) bool { return isSpace(r) || r == ';' || r == ',' }) < 0 {
		add(val, minPartLen)
	}
	return vals
}

// isSpace reports whether r is ASCII whitespace.
func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// isName reports whether w can be the name of a name=value credential (a
// cookie, a query parameter): letters, digits, '-', '_' and '.', 64 bytes
// at most.
func isName(w string) bool {
	if w == "" || len(w) > 64 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
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
		return []pattern{{p: base64.StdEncoding.EncodeToString([]byte(v)), min: base64.RawStdEncoding.EncodedLen(len(v)), b64: true, short: true}}
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
	pt.punct = !strings.ContainsFunc(head, func(r rune) bool { return r > 0x7f || isScalar(byte(r)) })
	pt.anchor = anchorOf(head, pt.b64)
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
		if pt.b64 && q > 0 {
			// A line break (CR LF, each spelled in up to maxSpell bytes)
			// every minWrapLine characters or more.
			far += (q/minWrapLine + 1) * 2 * maxSpell
		}
		pt.near, pt.far = min(pt.near, q), max(pt.far, far)
		off = q + 1
	}
	s.pats = append(s.pats, pt)
	s.maxLen = max(s.maxLen, len(pt.p))
}

// minWrapLine is the shortest line of wrapped base64 whose every break
// the scan allows for before the anchor (MIME wraps at 76, PEM at 64).
const minWrapLine = 32

// maxAnchor is the longest anchor: 16 letters and digits of a credential
// do not occur by chance, and a short needle keeps the search fast. The
// anchor of a base64 form is maxB64Anchor characters: 8 base64 characters
// of the credential's bits (48 bits) do not occur by chance either, and
// a line break of wrapped base64 falls inside a shorter anchor less often
// (a split anchor hides the form).
const (
	maxAnchor    = 16
	maxB64Anchor = 8
)

// anchorOf picks the anchor in head: maxAnchor (maxB64Anchor for a base64
// form) letters and digits in a row (fewer when head has no such run),
// starting where the first two bytes are least common in text (capitals,
// then digits, then small letters), for the substring search to stop at as
// few places as possible.
func anchorOf(head string, b64 bool) string {
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
	if b64 {
		n = min(n, maxB64Anchor)
	}
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
// character and never starts inside a JSON escape; one inside a string is
// replaced there, and one outside strings (in a number) takes the whole
// scalars it touches, each becoming the string "[REDACTED]". A valid
// document stays valid. When the work budget runs out, the whole of raw
// becomes the string "[REDACTED]" (see ErrorObject for an error member).
func (s Scrubber) JSON(raw json.RawMessage) json.RawMessage {
	if s.set == nil || len(raw) == 0 {
		return raw
	}
	out, _ := s.set.scrubAll(raw, true)
	return out
}

// ErrorObject is JSON for a JSON-RPC error object, which stays an object
// with an integer code: when the work budget runs out it becomes
// {"code":C,"message":"[REDACTED]"}, and when the code itself held a form
// of the secret, the code becomes -32000 (the gateway's upstream error)
// while message and data keep what JSON left of them. C is the upstream's
// code when it is an integer without a form of the secret, else -32000.
func (s Scrubber) ErrorObject(raw json.RawMessage) json.RawMessage {
	if s.set == nil || len(raw) == 0 {
		return raw
	}
	out, ok := s.set.scrubAll(raw, true)
	if !ok {
		code := redactedErrorCode
		var was struct{ Code json.RawMessage }
		if json.Unmarshal(raw, &was) == nil && isInt(was.Code) {
			if c, ok := s.set.scrubAll(was.Code, true); ok && &c[0] == &was.Code[0] {
				code = string(was.Code)
			}
		}
		return json.RawMessage(`{"code":` + code + `,"message":"` + Redacted + `"}`)
	}
	if &out[0] == &raw[0] {
		return out
	}
	var was, is struct{ Code, Message, Data json.RawMessage }
	if json.Unmarshal(raw, &was) != nil || !isInt(was.Code) || json.Unmarshal(out, &is) != nil || isInt(is.Code) {
		return out // not an error object to start with, or its code kept
	}
	msg := is.Message
	if len(msg) == 0 || msg[0] != '"' {
		msg = json.RawMessage(`"` + Redacted + `"`)
	}
	b := []byte(`{"code":` + redactedErrorCode + `,"message":`)
	b = append(b, msg...)
	if is.Data != nil {
		b = append(append(b, `,"data":`...), is.Data...)
	}
	return append(b, '}')
}

// redactedErrorCode is the code of an upstream's JSON-RPC error whose own
// code was taken by the scrubber: -32000, the gateway's upstream error
// (refusal.CodeUpstream).
var redactedErrorCode = strconv.Itoa(int(refusal.CodeUpstream))

// isInt reports whether v is a JSON integer.
func isInt(v json.RawMessage) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 1 && v[0] == '0' {
		return false
	}
	for _, c := range v {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// String removes every form of the secret, the raw one included, from a
// plain string (an error detail).
func (s Scrubber) String(v string) string {
	if s.set == nil || v == "" {
		return v
	}
	b := []byte(v)
	if out, _ := s.set.scrubAll(b, false); &out[0] != &b[0] {
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
		b, _ = s.set.scrubAll(b, false)
	}
	if len(b) > n {
		b, more = b[:n], true
	}
	if more && s.set != nil {
		b = s.set.redactTail(b)
	}
	return b
}

// interval is a match: t[start:end]. In JSON, outside says that it lies
// outside strings; short and punct are its pattern's.
type interval struct {
	start, end            int
	outside, short, punct bool
}

// scrub replaces every match in t by Redacted; overlapping or touching
// matches become one. It returns t itself when nothing matches.
//
// The work is bounded: each position is tried at most once per pattern,
// every step of every try draws on a budget proportional to t, and one try
// whose alternatives multiply (a value made of '%' and '\', against a text
// made of them) may take only a few times the pattern's length. Going over
// either fails closed (ok is false): the whole of t is redacted, as a JSON
// string when t is JSON. Every other loop is one forward pass over t per
// pattern, or over the matches.
func (s *scrubSet) scrub(t []byte, inJSON bool) (out []byte, ok bool) {
	sc := s.newScan(t, inJSON)
	sc.run(s)
	out, ok = sc.splice()
	switch {
	case !ok && inJSON:
		return []byte(`"` + Redacted + `"`), false
	case !ok:
		return []byte(Redacted), false
	}
	return out, true
}

// scrubAll is scrub followed by the decoded pass (see deepJSON and
// deepString).
func (s *scrubSet) scrubAll(t []byte, inJSON bool) ([]byte, bool) {
	out, ok := s.scrub(t, inJSON)
	switch {
	case !ok:
		return out, false
	case inJSON:
		return s.deepJSON(out), true
	}
	return s.deepString(out), true
}

// The work budget of one scrub, in walker steps and bytes of backslash
// runs measured: far more than any real answer needs (a text that is the
// credential over and over costs about two steps per byte), and
// workPerTry per byte of the pattern for one try (a walk without
// alternatives takes one step per byte).
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
	// spent counts the work of the scan, the budget's and the rest: the
	// bytes each linear loop examines (TestScrubberLinearWork).
	spent, budget0 int
}

func (s *scrubSet) newScan(t []byte, inJSON bool) *scan {
	b := workPerByte*len(t) + workBase
	return &scan{t: t, json: inJSON, budget: b, budget0: b}
}

// run finds the matches of every pattern.
func (sc *scan) run(s *scrubSet) {
	for i := range s.pats {
		if sc.budget < 0 {
			return
		}
		sc.find(&s.pats[i])
	}
}

// work is what the scan has cost so far.
func (sc *scan) work() int { return sc.spent + sc.budget0 - sc.budget }

// find adds the matches of pt. Each occurrence of the anchor, found by a
// plain substring search, fixes the few places where a match can start.
// Positions are tried in increasing order, each at most once.
func (sc *scan) find(pt *pattern) {
	t := sc.t
	esc := escapes{t: t, sc: sc}
	next := 0 // positions before next have been tried for pt
	try := func(from, to int) {
		for st := max(from, next); st <= to && sc.budget >= 0; st++ {
			if sc.json && esc.inside(st) {
				continue
			}
			w := walker{t: t, pt: pt, json: sc.json, end: -1, budget: &sc.budget}
			w.walk(0, st)
			if w.end > st {
				sc.found = append(sc.found, interval{start: st, end: w.end, short: pt.short, punct: pt.punct})
			}
		}
		next = max(next, to+1)
	}
	if pt.anchor == "" {
		sc.spent += len(t)
		for st := 0; st < len(t) && sc.budget >= 0; st++ {
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
			sc.spent += len(t) - off
			return
		}
		x := off + k
		sc.spent += k + 1
		try(x-pt.far, x-pt.near)
		off = x + 1
	}
}

// escapes tells whether a position of a JSON text is inside an escape
// that starts before it (the letter of \n, a hex digit of \u0026), for
// positions asked in increasing order. A backslash starts an escape when
// the run of backslashes it ends is odd; the last run measured is kept,
// so each run is measured once, its bytes drawn on the budget.
type escapes struct {
	t        []byte
	sc       *scan
	from, to int // the last run measured: t[from:to]
}

func (e *escapes) inside(i int) bool {
	t := e.t
	for s := i - 1; s >= 0 && s >= i-5; s-- {
		if t[s] != '\\' {
			continue
		}
		if s < e.from || s >= e.to {
			e.from, e.to = s, s+1
			for e.from > 0 && t[e.from-1] == '\\' {
				e.from--
			}
			for e.to < len(t) && t[e.to] == '\\' {
				e.to++
			}
			e.sc.budget -= e.to - e.from
		}
		if (s-e.from+1)%2 == 0 {
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

// splice returns t with the matches found replaced, or t itself when
// there are none; ok is false when the budget ran out, or when a match
// outside JSON strings holds no scalar to replace (a value of JSON
// punctuation only, such as "],[]").
func (sc *scan) splice() (out []byte, ok bool) {
	t, found := sc.t, sc.found
	if sc.budget < 0 {
		return nil, false
	}
	if len(found) == 0 {
		return t, true
	}
	slices.SortFunc(found, func(a, b interval) int { return a.start - b.start })
	if sc.json {
		if found, ok = sc.scalars(found); !ok {
			return nil, false
		}
		slices.SortFunc(found, func(a, b interval) int { return a.start - b.start })
		if len(found) == 0 {
			return t, true
		}
	}
	out = make([]byte, 0, len(t))
	prev := 0
	for i := 0; i < len(found); {
		iv := found[i]
		end := iv.end
		for i++; i < len(found) && found[i].start <= end && found[i].outside == iv.outside; i++ {
			end = max(end, found[i].end)
		}
		if iv.start < prev {
			return nil, false // a match across a string's end: not valid JSON
		}
		out = append(out, t[prev:iv.start]...)
		if !iv.outside {
			out = append(out, Redacted...)
		} else if out, ok = appendScalarsRedacted(out, t[iv.start:end]); !ok {
			return nil, false
		}
		sc.spent += end - prev
		prev = end
	}
	return append(out, t[prev:]...), true
}

// scalars sorts out the matches in a JSON text, sorted by start, in one
// forward pass: a match inside a string stays as it is; one outside
// strings is widened to the whole scalars (numbers, literals) at its ends,
// and dropped when its value is short and it does not cover whole scalars
// already. ok is false for a match outside strings without a scalar.
func (sc *scan) scalars(found []interval) (kept []interval, ok bool) {
	t := sc.t
	str := strState{t: t}
	kept = found[:0]
	prevEnd := 0 // end of the last match widened outside strings
	for _, iv := range found {
		if str.in(iv.start) {
			kept = append(kept, iv)
			continue
		}
		iv.outside = true
		if iv.punct {
			return nil, false
		}
		if iv.short && (iv.start > 0 && isScalar(t[iv.start-1]) || iv.end < len(t) && isScalar(t[iv.end])) {
			continue
		}
		s := iv.start
		for iv.start > prevEnd && isScalar(t[iv.start-1]) {
			iv.start--
		}
		from := max(iv.end, prevEnd)
		e := from
		for e < len(t) && isScalar(t[e]) {
			e++
		}
		sc.spent += s - iv.start + e - from
		iv.end, prevEnd = e, e
		kept = append(kept, iv)
	}
	sc.spent += str.pos
	return kept, true
}

// appendScalarsRedacted appends b, a run of JSON outside strings, with
// each scalar in it replaced by the string "[REDACTED]" and the
// punctuation and whitespace kept. ok is false when b holds no scalar.
func appendScalarsRedacted(out, b []byte) ([]byte, bool) {
	ok := false
	for i := 0; i < len(b); {
		if !isScalar(b[i]) {
			out = append(out, b[i])
			i++
			continue
		}
		for i < len(b) && isScalar(b[i]) {
			i++
		}
		out = append(out, `"`+Redacted+`"`...)
		ok = true
	}
	return out, ok
}

// isScalar reports whether c, outside JSON strings, is part of a number or
// a literal (true, false, null): not whitespace, punctuation or a quote.
func isScalar(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '{', '}', '[', ']', ',', ':', '"':
		return false
	}
	return true
}

// strState tells whether a position of a JSON text is inside a string,
// for positions asked in increasing order: one forward pass.
type strState struct {
	t      []byte
	pos    int  // the state below is that of t[pos]
	inside bool // t[pos] is inside a string (its quotes excluded)
}

func (s *strState) in(i int) bool {
	for s.pos < i {
		rest := s.t[s.pos:i]
		if !s.inside {
			q := bytes.IndexByte(rest, '"')
			if q < 0 {
				s.pos = i
				break
			}
			s.pos += q + 1
			s.inside = true
			continue
		}
		q := bytes.IndexAny(rest, `"\`)
		if q < 0 {
			s.pos = i
			break
		}
		s.pos += q
		if s.t[s.pos] == '"' {
			s.pos++
			s.inside = false
			continue
		}
		s.pos += 2 // an escape; what follows \u is hex digits
	}
	return s.inside
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
// each JSON depth 0..maxJSONDepth, a percent-escape once and twice over
// or '%2B' for a space, a '+' for a space.
const maxSteps = maxJSONDepth + 4

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
// of p are taken only as they are. Between two characters of a base64
// form, a line break (CR or LF, as it is or escaped) is passed over.
func (w *walker) steps(k, j int, out *[maxSteps]step) int {
	p, c := w.pt.p[k], w.t[j]
	wrap := w.pt.b64 && k > 0
	if isAlnum(p) && !(wrap && (c == '\n' || c == '\r' || c == '\\')) {
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
			if wrap && (ch.v == '\n' || ch.v == '\r') && !(ch.raw && w.json) {
				add(k, ch.end)
			} else if !isAlnum(p) {
				if k2, ok := w.accept(k, ch); ok {
					add(k2, ch.end)
				}
			}
		case charShort:
			w.partial = w.partial || k > 0
		}
	}
	if isAlnum(p) {
		return n
	}
	switch c {
	case '%':
		w.percent(k, j, add)
	case '+':
		if p == ' ' {
			add(k+1, j+1)
		}
	}
	return n
}

// percent adds the ways a percent-escape at t[j] goes on with pt.p[k]:
// %XX, %25XX (escaped twice), and %2B for a space (a '+' escaped).
func (w *walker) percent(k, j int, add func(k2, j2 int)) {
	t, p := w.t, w.pt.p[k]
	if j+2 >= len(t) {
		w.partial = w.partial || k > 0 && (j+1 == len(t) || isHex(t[j+1]))
		return
	}
	v, ok := unhex2(t[j+1], t[j+2])
	switch {
	case !ok:
		return
	case w.same(v, p), v == '+' && p == ' ':
		add(k+1, j+3)
	}
	if v != '%' {
		return
	}
	if j+4 >= len(t) {
		w.partial = w.partial || k > 0 && (j+3 == len(t) || isHex(t[j+3]))
		return
	}
	if v, ok := unhex2(t[j+3], t[j+4]); ok && (w.same(v, p) || v == '+' && p == ' ') {
		add(k+1, j+5)
	}
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
		if b, ok := content.ShortEscape(byte(e.v)); ok {
			return char{v: rune(b), end: e.end}, charOK
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
		v, ok := content.HexVal(t[i])
		if !ok {
			return 0, charBad
		}
		u = u<<4 | rune(v)
	}
	return u, charOK
}

func unhex2(a, b byte) (byte, bool) {
	hi, ok1 := content.HexVal(a)
	lo, ok2 := content.HexVal(b)
	return hi<<4 | lo, ok1 && ok2
}

func isHex(c byte) bool { _, ok := content.HexVal(c); return ok }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool { return isDigit(c) || c|0x20 >= 'a' && c|0x20 <= 'z' }

// The decoded pass.
//
// The patterns above take letters and digits only as they stand, which
// keeps the scan fast, but an upstream (or an attacker steering one) may
// spell them otherwise and the agent decodes them all the same: every
// letter as a \uXXXX escape, a single letter escaped, every byte
// percent-encoded, the credential in hex, or all of it but its last bytes.
// So after the scan, each JSON string of an answer (and the whole of a
// plain string) is decoded fully and matched again:
//
//   - the primary view: a JSON string's content with every escape
//     decoded (\uXXXX of any character, surrogate pairs, the short
//     escapes; a lone surrogate becomes U+FFFD as encoding/json reads it),
//     or a plain string as it is;
//   - deeper views: the primary view JSON-unescaped again while it holds a
//     backslash (maxJSONDepth levels in all), and each of those
//     percent-decoded once and twice (%XX in any case) while it holds a '%'.
//
// Each view is matched with every pattern (so base64 with escaped letters
// is caught once decoded), and with the run rule: any runLen(v) bytes in a
// row of a value v (min(12, len(v)-2) bytes for values of 10 bytes or more:
// a prefix of all but the last two bytes, a suffix, a piece of a
// credential split over two content items), and the same run of v's hex
// (2*runLen(v) hex digits, either case, of values of minPartLen bytes or
// more; for 8- and 9-byte values the whole hex).
//
// A match in the primary view is replaced there by Redacted and the string
// is encoded again (escapes of the other characters are normalised: only
// '"', '\', control characters, U+2028, U+2029 and invalid UTF-8, which
// becomes U+FFFD, are escaped). When a deeper view still matches after
// that, the whole string becomes "[REDACTED]". A string without a
// backslash or a '%' has no deeper view and is only searched for runs:
// no allocation.
//
// Work: a constant number of views per string, each matched by the scan
// (linear, with its own budget) and by one rolling-hash pass per run
// value; a budget overrun in a view fails closed on that string.

// minRunValue is the shortest value matched by the run rule, and maxRun
// the longest run it asks for.
const (
	minRunValue = 10
	maxRun      = 12
)

// runValue is one value of the run rule: any n bytes in a row of v (hex:
// v is lower-case hex digits, and the text's hex digits are folded to
// lower case before they are compared).
//
// The search samples the text: every run of n bytes holds a q-gram (runQ
// bytes) that starts at a multiple of n-runQ+1, so only those q-grams are
// looked up in a filter of v's q-grams, and the windows around a q-gram
// that passes it are compared with v's runs (by a hash, then byte by
// byte). Each window is compared at most once: linear work, and about one
// lookup per n-runQ+1 bytes of text that holds no piece of v.
type runValue struct {
	v    string
	n    int
	hex  bool
	pow  uint64                // runBase^n
	at   map[uint64]int        // hash of v[i:i+n] -> i
	gram *[runBits / 64]uint64 // filter of v's q-grams
}

const (
	runBase = 1099511628211
	runBits = 1 << 14
	runQ    = 4
)

// runValues prepares the run rule for the credential's values.
func runValues(vals []string) []runValue {
	var rs []runValue
	add := func(v string, n int, hex bool) {
		if n < runQ || n > len(v) {
			return
		}
		for _, r := range rs {
			if r.v == v && r.n == n {
				return
			}
		}
		r := runValue{v: v, n: n, hex: hex, pow: 1, at: make(map[uint64]int, len(v)-n+1), gram: new([runBits / 64]uint64)}
		for range n {
			r.pow *= runBase
		}
		for i := 0; i+n <= len(v); i++ {
			h := r.hash([]byte(v[i : i+n]))
			if _, ok := r.at[h]; !ok {
				r.at[h] = i
			}
		}
		for i := 0; i+runQ <= len(v); i++ {
			g := gramBit(r.load([]byte(v[i : i+runQ])))
			r.gram[g/64] |= 1 << (g % 64)
		}
		rs = append(rs, r)
	}
	for _, v := range vals {
		n := len(v)
		if n >= minRunValue {
			n = min(maxRun, len(v)-2)
			add(v, n, false)
		}
		if len(v) >= minPartLen {
			add(hex.EncodeToString([]byte(v)), 2*n, true)
		}
	}
	return rs
}

// fold is the byte of a text compared with a run value.
func (r *runValue) fold(c byte) byte {
	if r.hex && c >= 'A' && c <= 'F' {
		return c | 0x20
	}
	return c
}

func (r *runValue) hash(w []byte) uint64 {
	var h uint64
	for _, c := range w {
		h = h*runBase + uint64(r.fold(c))
	}
	return h
}

// load is the q-gram at the start of w, folded.
func (r *runValue) load(w []byte) uint32 {
	return uint32(r.fold(w[0])) | uint32(r.fold(w[1]))<<8 | uint32(r.fold(w[2]))<<16 | uint32(r.fold(w[3]))<<24
}

func gramBit(g uint32) uint32 { return g * 2654435761 >> (32 - 14) }

// find calls span for every window of t that is a run of r, in order,
// until span returns false.
func (r *runValue) find(t []byte, span func(start, end int) bool) {
	n := r.n
	step := n - runQ + 1
	next := 0 // windows before next lie inside a span already found
	for i := step - 1; i+runQ <= len(t); i += step {
		if g := gramBit(r.load(t[i:])); r.gram[g/64]&(1<<(g%64)) == 0 {
			continue
		}
		var h uint64
		hashed := -2 // h is the hash of the window at hashed
		for st := max(next, i-(n-runQ)); st <= i && st+n <= len(t); st++ {
			if hashed == st-1 {
				h = h*runBase + uint64(r.fold(t[st+n-1])) - uint64(r.fold(t[st-1]))*r.pow
			} else {
				h = r.hash(t[st : st+n])
			}
			hashed = st
			off, ok := r.at[h]
			if !ok {
				continue
			}
			k := 0
			for k < n && r.fold(t[st+k]) == r.v[off+k] {
				k++
			}
			if k < n {
				continue
			}
			// Extend the match as far as v goes on: the windows inside
			// it need no look.
			for off+k < len(r.v) && st+k < len(t) && r.fold(t[st+k]) == r.v[off+k] {
				k++
			}
			if !span(st, st+k) {
				return
			}
			next = st + k - n + 1
			st = next - 1
		}
	}
}

// runSpans returns the merged spans of t that the run rule takes, sorted.
func (s *scrubSet) runSpans(t []byte) [][2]int {
	var spans [][2]int
	for i := range s.runs {
		from := len(spans)
		s.runs[i].find(t, func(a, b int) bool {
			// Windows come in order: one that overlaps the last extends it.
			if k := len(spans) - 1; k >= from && a <= spans[k][1] {
				spans[k][1] = max(spans[k][1], b)
			} else {
				spans = append(spans, [2]int{a, b})
			}
			return true
		})
	}
	if len(spans) == 0 {
		return nil
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		if last := &merged[len(merged)-1]; sp[0] <= last[1] {
			last[1] = max(last[1], sp[1])
		} else {
			merged = append(merged, sp)
		}
	}
	return merged
}

// hasRun reports whether the run rule matches in t.
func (s *scrubSet) hasRun(t []byte) bool {
	for i := range s.runs {
		found := false
		s.runs[i].find(t, func(int, int) bool { found = true; return false })
		if found {
			return true
		}
	}
	return false
}

// redactView returns t with every match (patterns and runs) replaced, and
// whether anything was; ok is false when the scan's budget ran out.
func (s *scrubSet) redactView(t []byte, patterns bool) (out []byte, changed, ok bool) {
	out = t
	if patterns {
		var o []byte
		if o, ok = s.scrub(t, false); !ok {
			return nil, true, false
		}
		out = o
	}
	changed = len(out) != len(t) || len(t) > 0 && &out[0] != &t[0]
	spans := s.runSpans(out)
	if spans == nil {
		return out, changed, true
	}
	b := make([]byte, 0, len(out))
	prev := 0
	for _, sp := range spans {
		b = append(append(b, out[prev:sp[0]]...), Redacted...)
		prev = sp[1]
	}
	return append(b, out[prev:]...), true, true
}

// matches reports whether a pattern or a run matches in t.
func (s *scrubSet) matches(t []byte) bool {
	_, changed, ok := s.redactView(t, true)
	return changed || !ok
}

// deeperMatch reports whether a deeper view of p (see above) matches:
// p JSON-unescaped levels more times, and each of those percent-decoded.
func (s *scrubSet) deeperMatch(p []byte, levels int, bufs *viewBufs) bool {
	var views [maxJSONDepth + 1][]byte
	views[0] = p
	nv := 1
	for v := p; levels > 0 && bytes.IndexByte(v, '\\') >= 0; levels-- {
		v = content.AppendUnescaped(bufs.get(nv), v)
		bufs.keep(nv, v)
		if s.matches(v) {
			return true
		}
		views[nv] = v
		nv++
	}
	for _, v := range views[:nv] {
		for k := range 2 {
			if bytes.IndexByte(v, '%') < 0 {
				break
			}
			d := percentDecode(bufs.get(maxJSONDepth+1+k), v)
			bufs.keep(maxJSONDepth+1+k, d)
			if len(d) == len(v) {
				break
			}
			if s.matches(d) {
				return true
			}
			v = d
		}
	}
	return false
}

// viewBufs are the buffers the views of one string are decoded into,
// reused from string to string and scrub to scrub.
// Between deepJSON and its Visit they also carry the walk: the set, the
// text, the output so far and the end of what was copied.
type viewBufs struct {
	b    [maxJSONDepth + 3][]byte
	set  *scrubSet
	t    []byte
	out  []byte
	prev int
}

var viewPool = sync.Pool{New: func() any { return new(viewBufs) }}

func (v *viewBufs) get(i int) []byte { return v.b[i][:0] }

// keep stores the buffer grown for view i, unless it grew past what is
// worth keeping.
func (v *viewBufs) keep(i int, b []byte) {
	if cap(b) <= 1<<20 {
		v.b[i] = b
	}
}

// deepString applies the decoded pass to a plain string t (already
// scanned): it returns t itself when nothing matches.
func (s *scrubSet) deepString(t []byte) []byte {
	if len(s.runs) == 0 && bytes.IndexByte(t, '\\') < 0 && bytes.IndexByte(t, '%') < 0 {
		return t
	}
	out, _, ok := s.redactView(t, false)
	bufs := viewPool.Get().(*viewBufs)
	defer viewPool.Put(bufs)
	if !ok || s.deeperMatch(out, maxJSONDepth, bufs) {
		return []byte(Redacted)
	}
	return out
}

// deepJSON applies the decoded pass to every string of a JSON text t
// (already scanned), keys included, as package scan's Walk decodes them: it returns
// t itself when nothing matches. A t that is not one JSON value (the scan
// keeps a valid document valid, so only an invalid answer is one) becomes
// the string "[REDACTED]": its strings cannot be told apart.
func (s *scrubSet) deepJSON(t []byte) []byte {
	bufs := viewPool.Get().(*viewBufs)
	defer viewPool.Put(bufs)
	bufs.set, bufs.t, bufs.out, bufs.prev = s, t, nil, 0
	err := content.WalkVisitor(t, bufs)
	out, prev := bufs.out, bufs.prev
	bufs.set, bufs.t, bufs.out = nil, nil, nil
	if err != nil {
		return []byte(`"` + Redacted + `"`)
	}
	if out == nil {
		return t
	}
	return append(out, t[prev:]...)
}

// Visit is deepJSON's visit of one string: its content is replaced in
// out when the decoded pass changes it.
func (v *viewBufs) Visit(str *content.String) error {
	if str.Number {
		return nil
	}
	if repl, changed := v.set.deepContent(str.Raw, str.Decoded, str.Escaped, v); changed {
		if v.out == nil {
			v.out = make([]byte, 0, len(v.t))
		}
		v.out = append(append(v.out, v.t[v.prev:str.Start]...), repl...)
		v.prev = str.End
	}
	return nil
}

// deepContent is the decoded pass on the content c of one JSON string,
// p decoded (esc: c holds an escape, p is then not c): the new content,
// and whether it changed.
func (s *scrubSet) deepContent(c, p []byte, esc bool, bufs *viewBufs) ([]byte, bool) {
	if !esc && bytes.IndexByte(c, '%') < 0 {
		if !s.hasRun(c) {
			return c, false // the common path: nothing decoded, no run
		}
	}
	out, changed, ok := s.redactView(p, esc)
	if !ok || s.deeperMatch(out, maxJSONDepth-1, bufs) {
		return []byte(Redacted), true
	}
	if !changed {
		return c, false
	}
	return content.AppendEscaped(nil, out), true
}

// percentDecode decodes every %XX of t (either case); other bytes stay.
func percentDecode(out, t []byte) []byte {
	for i := 0; i < len(t); i++ {
		if t[i] == '%' && i+2 < len(t) {
			if v, ok := unhex2(t[i+1], t[i+2]); ok {
				out = append(out, v)
				i += 2
				continue
			}
		}
		out = append(out, t[i])
	}
	return out
}
