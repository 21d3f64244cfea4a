package approval

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"
)

// Masked replaces the whole value of a member whose name is sensitive
// (password, token, api_key, ...). Nothing else is ever masked whole.
const Masked = "[masked]"

// Markers replace the part of a string a pattern matched; the text around
// the match is left as it is, so an approver always sees what a string says
// apart from the secret itself.
const (
	MaskedCard  = "[masked:card]"  // a Luhn-valid payment card number
	MaskedSSN   = "[masked:ssn]"   // a US social security number
	MaskedToken = "[masked:token]" // a credential in a well-known format
	MaskedPEM   = "[masked:pem]"   // a PEM block (private key, certificate)
)

// unreadable is what Mask returns for args it cannot show.
const unreadable = `"[unreadable]"`

// maxDepth bounds the nesting of the args Mask walks. It is encoding/json's
// own limit, so args that the gateway could parse can always be shown.
const maxDepth = 10000

// sensitiveKeys are object member names whose values are never shown
// (compared lower-case, with '-', '_' and ' ' removed).
var sensitiveKeys = []string{
	"password", "passwd", "pwd", "secret", "token", "apikey", "accesskey",
	"authorization", "auth", "credential", "credentials", "privatekey",
	"clientsecret", "cookie", "session", "ssn", "cardnumber", "cvv", "cvc", "pin",
}

var keyFolder = strings.NewReplacer("-", "", "_", "", " ", "")

// Mask returns the JSON args as an approver is shown them:
//
//   - the value of a member with a sensitive name (password, token,
//     api_key, authorization, ...) becomes "[masked]", whatever its type;
//   - inside every other string (object keys included), only the part that
//     matched a pattern is replaced, by a marker naming what it was:
//     MaskedCard, MaskedSSN, MaskedToken or MaskedPEM. The rest of the
//     string comes through, so a secret-looking fragment cannot hide the
//     text around it;
//   - invisible format characters (Unicode category Cf: bidi overrides,
//     zero-width characters, tag characters) are written as "[U+XXXX]", so
//     they cannot reorder or hide what the approver reads.
//
// Members keep the order (and any duplicates) of the input, numbers are
// written as they came, and the output is deterministic valid JSON. Args
// that are not a single JSON value, or nest deeper than encoding/json
// allows, come back as the JSON string "[unreadable]"; absent args as nil.
// Mask is safe for concurrent use.
func Mask(args json.RawMessage) []byte {
	if len(args) == 0 {
		return nil
	}
	m := masker{d: json.NewDecoder(bytes.NewReader(args))}
	m.d.UseNumber()
	m.enc = json.NewEncoder(&m.out)
	m.enc.SetEscapeHTML(false)
	if err := m.value(0); err != nil {
		return []byte(unreadable)
	}
	if _, err := m.d.Token(); err != io.EOF {
		return []byte(unreadable) // trailing data
	}
	return m.out.Bytes()
}

// masker copies one JSON value token by token, masking as it goes.
type masker struct {
	d   *json.Decoder
	out bytes.Buffer
	enc *json.Encoder // writes strings into out
}

var errTooDeep = errors.New("approval: args nest too deep to show")

func (m *masker) value(depth int) error {
	if depth >= maxDepth {
		return errTooDeep
	}
	tok, err := m.d.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m.out.WriteByte('{')
			for i := 0; m.d.More(); i++ {
				if i > 0 {
					m.out.WriteByte(',')
				}
				kt, err := m.d.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				if err := m.str(maskText(k)); err != nil {
					return err
				}
				m.out.WriteByte(':')
				if sensitiveName(k) {
					var skip json.RawMessage
					if err := m.d.Decode(&skip); err != nil {
						return err
					}
					if err := m.str(Masked); err != nil {
						return err
					}
					continue
				}
				if err := m.value(depth + 1); err != nil {
					return err
				}
			}
			m.out.WriteByte('}')
		case '[':
			m.out.WriteByte('[')
			for i := 0; m.d.More(); i++ {
				if i > 0 {
					m.out.WriteByte(',')
				}
				if err := m.value(depth + 1); err != nil {
					return err
				}
			}
			m.out.WriteByte(']')
		default:
			return fmt.Errorf("approval: unexpected %v in args", t)
		}
		_, err := m.d.Token() // the closing delimiter
		return err
	case string:
		return m.str(maskText(t))
	case json.Number:
		m.out.WriteString(t.String())
	case bool:
		if t {
			m.out.WriteString("true")
		} else {
			m.out.WriteString("false")
		}
	case nil:
		m.out.WriteString("null")
	}
	return nil
}

// str writes s as a JSON string, HTML characters as they are.
func (m *masker) str(s string) error {
	if err := m.enc.Encode(s); err != nil {
		return err
	}
	m.out.Truncate(m.out.Len() - 1) // Encode's newline
	return nil
}

func sensitiveName(k string) bool {
	n := strings.ToLower(keyFolder.Replace(k))
	for _, s := range sensitiveKeys {
		if n == s || strings.HasSuffix(n, s) && s != "pin" && s != "auth" && s != "session" {
			return true
		}
	}
	return false
}

// span is a part s[start:end] of a string to show as marker.
type span struct {
	start, end int
	marker     string
}

// maskText returns s with every pattern match replaced by its marker and
// every invisible format character spelled out. It returns s itself when
// there is nothing to change.
func maskText(s string) string {
	spans := tokenSpans(s, nil)
	spans = cardSpans(s, spans)
	spans = ssnSpans(s, spans)
	if len(spans) == 0 && !hasFormatChar(s) {
		return s
	}
	// Overlapping matches are joined, so that no part of either shows.
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	var b strings.Builder
	pos := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		for i++; i < len(spans) && spans[i].start < cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		writeVisible(&b, s[pos:cur.start])
		b.WriteString(cur.marker)
		pos = cur.end
	}
	writeVisible(&b, s[pos:])
	return b.String()
}

// hasFormatChar reports whether s holds an invisible format character.
func hasFormatChar(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			return true
		}
	}
	return false
}

// writeVisible writes s with each invisible format character as [U+XXXX].
func writeVisible(b *strings.Builder, s string) {
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			fmt.Fprintf(b, "[U+%04X]", r)
			continue
		}
		b.WriteRune(r)
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// tokenRule is a well-known credential format: a prefix, then a body whose
// length body returns (0: no credential here). keep bytes of the prefix (a
// scheme word such as "Bearer ") stay visible.
type tokenRule struct {
	prefix string
	keep   int
	body   func(s string) int
	marker string
}

var tokenRules = func() []tokenRule {
	var rules []tokenRule
	for _, p := range []string{
		"aegis_", "sk-", "sk_live_", "sk_test_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_", "github_pat_",
		"xoxb-", "xoxp-", "xoxa-", "AKIA", "ASIA", "AIza", "glpat-",
	} {
		rules = append(rules, tokenRule{prefix: p, body: keyBody, marker: MaskedToken})
	}
	return append(rules,
		tokenRule{prefix: "eyJ", body: jwtBody, marker: MaskedToken},
		tokenRule{prefix: "Bearer ", keep: len("Bearer "), body: bearerBody, marker: MaskedToken},
		tokenRule{prefix: "Basic ", keep: len("Basic "), body: basicBody, marker: MaskedToken},
		tokenRule{prefix: "-----BEGIN ", body: pemBody, marker: MaskedPEM},
	)
}()

// minTokenBody is the shortest body after a prefix taken for a credential.
const minTokenBody = 8

// tokenSpans appends the credentials found in s: a rule's prefix at the
// start of a word, followed by a body in the rule's format. The match ends
// where the format's characters end, so a token cannot swallow the words,
// paths or commands after it.
func tokenSpans(s string, spans []span) []span {
	for i := 0; i < len(s); i++ {
		if i > 0 && (isAlnum(s[i-1]) || s[i-1] == '_') {
			continue
		}
		for _, r := range tokenRules {
			if !strings.HasPrefix(s[i:], r.prefix) {
				continue
			}
			n := r.body(s[i+len(r.prefix):])
			if n == 0 {
				continue
			}
			end := i + len(r.prefix) + n
			spans = append(spans, span{i + r.keep, end, r.marker})
			i = end - 1
			break
		}
	}
	return spans
}

// run returns the length of the longest prefix of s made of bytes in ok.
func run(s string, ok func(byte) bool) int {
	n := 0
	for n < len(s) && ok(s[n]) {
		n++
	}
	return n
}

func isKeyByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

// keyBody: an API key's body, [A-Za-z0-9_-]{8,}.
func keyBody(s string) int {
	if n := run(s, isKeyByte); n >= minTokenBody {
		return n
	}
	return 0
}

// jwtBody: the rest of a JWT after "eyJ": base64url segments joined by at
// most two dots.
func jwtBody(s string) int {
	n, dots := 0, 0
	for ; n < len(s); n++ {
		if c := s[n]; c == '.' && dots < 2 {
			dots++
		} else if !isKeyByte(c) {
			break
		}
	}
	for n > 0 && s[n-1] == '.' { // a sentence's full stop
		n--
	}
	if n < minTokenBody {
		return 0
	}
	return n
}

// bearerBody: an RFC 6750 b64token with a digit in it (so that "Bearer
// bonds" stays English).
func bearerBody(s string) int {
	n := run(s, func(c byte) bool { return isKeyByte(c) || strings.IndexByte("._~+/", c) >= 0 })
	n += run(s[n:], func(c byte) bool { return c == '=' })
	if n < minTokenBody || !strings.ContainsAny(s[:n], "0123456789") {
		return 0
	}
	return n
}

// basicBody: base64 of "user:password".
func basicBody(s string) int {
	n := run(s, func(c byte) bool { return isAlnum(c) || c == '+' || c == '/' })
	n += run(s[n:], func(c byte) bool { return c == '=' })
	if n < minTokenBody {
		return 0
	}
	dec, err := base64.StdEncoding.DecodeString(s[:n])
	if err != nil || bytes.IndexByte(dec, ':') < 0 {
		return 0
	}
	return n
}

// pemBody: the rest of a PEM block after "-----BEGIN ": its label and
// dashes, the base64 lines, and the END line if it follows them.
func pemBody(s string) int {
	label := run(s, func(c byte) bool { return c >= 'A' && c <= 'Z' || isDigit(c) || c == ' ' })
	if label == 0 || !strings.HasPrefix(s[label:], "-----") {
		return 0
	}
	n := label + len("-----")
	n += run(s[n:], func(c byte) bool { return isAlnum(c) || c == '+' || c == '/' || c == '=' || c == '\r' || c == '\n' })
	if end := "-----END " + s[:label] + "-----"; strings.HasPrefix(s[n:], end) {
		n += len(end)
	}
	return n
}

// cardSpans appends the payment card numbers in s: 13 to 19 digits, in
// groups separated by single spaces or dashes, passing the Luhn check, with
// a first digit of 2 to 6 (the card networks' major industry identifiers),
// and not touching a letter or another digit. Only the digits and the
// separators between them are masked.
func cardSpans(s string, spans []span) []span {
	type group struct{ start, end int }
	var groups []group
	digits := make([]byte, 0, 19)
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			i++
			continue
		}
		// A run of digit groups starts at i.
		groups = groups[:0]
		j := i
		for {
			k := j + run(s[j:], isDigit)
			groups = append(groups, group{j, k})
			if k+1 < len(s) && (s[k] == ' ' || s[k] == '-') && isDigit(s[k+1]) {
				j = k + 1
				continue
			}
			i = k
			break
		}
		for a := 0; a < len(groups); {
			best := -1
			digits = digits[:0]
			for b := a; b < len(groups); b++ {
				digits = append(digits, s[groups[b].start:groups[b].end]...)
				if len(digits) > 19 {
					break
				}
				start, end := groups[a].start, groups[b].end
				if len(digits) >= 13 && digits[0] >= '2' && digits[0] <= '6' &&
					(start == 0 || !isAlnum(s[start-1])) && (end == len(s) || !isAlnum(s[end])) &&
					luhn(digits) {
					best = b
				}
			}
			if best < 0 {
				a++
				continue
			}
			spans = append(spans, span{groups[a].start, groups[best].end, MaskedCard})
			a = best + 1
		}
	}
	return spans
}

func luhn(d []byte) bool {
	sum := 0
	for i := range d {
		n := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return sum%10 == 0
}

// ssnSpans appends the US social security numbers in s: NNN-NN-NNNN not
// inside a longer run of digits, with an area other than 000, 666 and
// 9xx, a group other than 00 and a serial other than 0000.
func ssnSpans(s string, spans []span) []span {
	isD := func(i int) bool { return i >= 0 && i < len(s) && isDigit(s[i]) }
	for i := 0; i+11 <= len(s); i++ {
		if isD(i-1) || isD(i+11) {
			continue
		}
		ok := true
		for j := 0; j < 11 && ok; j++ {
			if j == 3 || j == 6 {
				ok = s[i+j] == '-'
			} else {
				ok = isD(i + j)
			}
		}
		if ok && s[i:i+3] != "000" && s[i:i+3] != "666" && s[i] != '9' && s[i+4:i+6] != "00" && s[i+7:i+11] != "0000" {
			spans = append(spans, span{i, i + 11, MaskedSSN})
			i += 10
		}
	}
	return spans
}
