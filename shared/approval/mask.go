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
	"unicode/utf8"

	"github.com/aegis-gw/aegis/shared/display"
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
	MaskedPEM   = "[masked:pem]"   // the base64 body of a PEM private key
)

// unreadable is what Mask returns for args it cannot show.
const unreadable = `"[unreadable]"`

// maxDepth bounds the nesting of the args Mask walks. It is encoding/json's
// own limit, so args that the gateway could parse can always be shown.
const maxDepth = 10000

// sensitiveKeys are object member names whose values are never shown
// (compared lower-case, with '-', '_' and ' ' removed). "pwd" is not one:
// it is far more often a command's working directory than a password, and
// hiding where "rm -rf *" runs is worse than showing a password sent under
// that name (whose value is still scanned like any other string).
var sensitiveKeys = []string{
	"password", "passwd", "secret", "token", "apikey", "accesskey",
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
//     MaskedCard, MaskedSSN, MaskedToken or MaskedPEM. The patterns are
//     real credential formats, each ending where its format ends, and none
//     applies to the host of a URL, so a secret-looking fragment cannot
//     hide a command, a path or a host; when unsure, a value is shown;
//   - invisible characters (controls other than line feed and tab, format
//     characters such as bidi overrides and zero-width characters,
//     default-ignorable characters such as fillers and variation
//     selectors) are written as "[U+XXXX]", so they cannot reorder or
//     hide what the approver reads.
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
// every invisible character spelled out. It returns s itself when there is
// nothing to change.
func maskText(s string) string {
	spans := tokenSpans(s, nil)
	spans = cardSpans(s, spans)
	spans = ssnSpans(s, spans)
	if len(spans) == 0 && !hasInvisible(s) {
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

// invisible reports whether r is spelled out as [U+XXXX]: the characters
// display.Hidden lists (controls, format characters such as bidi overrides,
// zero-width characters and tags, default-ignorable characters, the line
// and paragraph separators, the blank braille pattern), except line feed
// and tab, which the JSON an approver reads shows as \n and \t.
func invisible(r rune) bool {
	return r != '\n' && r != '\t' && display.Hidden(r)
}

// hasInvisible reports whether s holds a character to spell out.
func hasInvisible(s string) bool {
	for _, r := range s {
		if invisible(r) {
			return true
		}
	}
	return false
}

// writeVisible writes s with each invisible character as [U+XXXX].
func writeVisible(b *strings.Builder, s string) {
	for _, r := range s {
		if invisible(r) {
			fmt.Fprintf(b, "[U+%04X]", r)
			continue
		}
		b.WriteRune(r)
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isAlnum(c byte) bool { return isDigit(c) || isLetter(c) }

// isWordByte reports whether c continues a word: an ASCII letter or digit,
// '_', or a byte of a non-ASCII character.
func isWordByte(c byte) bool { return isAlnum(c) || c == '_' || c >= 0x80 }

// isKeyByte: the base64url alphabet, which most API keys are written in.
func isKeyByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

func isB64(c byte) bool { return isAlnum(c) || c == '+' || c == '/' }

// startsWord reports whether a credential may start at s[i]: not inside a
// word, a hyphenated word or a dotted name.
func startsWord(s string, i int) bool {
	if i == 0 {
		return true
	}
	c := s[i-1]
	return !isWordByte(c) && c != '-' && !(c == '.' && i >= 2 && isWordByte(s[i-2]))
}

// endsWord reports whether a credential may end just before s[i]: at a
// word's end, and not where a dotted or hyphenated name (a host, a branch)
// goes on.
func endsWord(s string, i int) bool {
	if i == len(s) {
		return true
	}
	c := s[i]
	return !isWordByte(c) && !((c == '.' || c == '-') && i+1 < len(s) && isWordByte(s[i+1]))
}

// run returns the length of the longest prefix of s made of bytes in ok.
func run(s string, ok func(byte) bool) int {
	n := 0
	for n < len(s) && ok(s[n]) {
		n++
	}
	return n
}

// runMax is run stopped at limit bytes, so that rules with a bounded
// length cost a bounded time wherever they are tried.
func runMax(s string, ok func(byte) bool, limit int) int {
	return run(s[:min(len(s), limit)], ok)
}

// tokenRule is a credential format. A rule is tried where its prefix
// starts a word; match is given the text from the prefix on and returns
// the part [from, to) of it to mask, to == 0 when there is no credential
// of this format there. Every rule ends its match at the end of a word
// (endsWord), so a credential never takes the text after it.
type tokenRule struct {
	prefix string
	match  func(s string) (from, to int)
	marker string
}

// key is the rule for a credential made of prefix and a body of minLen to
// maxLen bytes that ok accepts, for which valid holds.
func key(prefix string, minLen, maxLen int, ok func(byte) bool, valid func(body string) bool) tokenRule {
	return tokenRule{prefix: prefix, marker: MaskedToken, match: func(s string) (int, int) {
		p := len(prefix)
		n := runMax(s[p:], ok, maxLen+1)
		if n < minLen || n > maxLen || !endsWord(s, p+n) || !valid(s[p:p+n]) {
			return 0, 0
		}
		return 0, p + n
	}}
}

// tokenRules are the credential formats masked inside strings. Formats of
// a fixed length need only that length and alphabet; formats whose length
// varies must also look generated (looksRandom), so that a prefix followed
// by words ("sk-force-push-over-main") is shown.
var tokenRules = func() []tokenRule {
	anyBody := func(string) bool { return true }
	rules := []tokenRule{{prefix: "aegis_", match: aegisKey, marker: MaskedToken}}
	for _, p := range []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"} {
		rules = append(rules, key(p, 36, 36, isAlnum, anyBody)) // GitHub
	}
	rules = append(rules,
		key("github_pat_", 82, 82, func(c byte) bool { return isAlnum(c) || c == '_' }, anyBody),
		key("AKIA", 16, 16, func(c byte) bool { return isDigit(c) || c >= 'A' && c <= 'Z' }, anyBody), // AWS access key id
		key("ASIA", 16, 16, func(c byte) bool { return isDigit(c) || c >= 'A' && c <= 'Z' }, anyBody),
		key("AIza", 35, 35, isKeyByte, fewWords), // Google API key
		key("glpat-", 20, 20, isKeyByte, fewWords),
		key("glpat-", 21, 256, isKeyByte, looksRandom),
		key("sk-", 20, 256, isKeyByte, skBody), // OpenAI, Anthropic and others
	)
	for _, p := range []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_"} {
		rules = append(rules, key(p, 20, 247, isAlnum, mixedOrRandom)) // Stripe
	}
	for _, p := range []string{"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-", "xoxe.xoxp-", "xoxe.xoxb-", "xapp-"} {
		rules = append(rules, key(p, 16, 255, func(c byte) bool { return isAlnum(c) || c == '-' }, slackBody))
	}
	return append(rules,
		tokenRule{prefix: "eyJ", match: jwt, marker: MaskedToken},
		tokenRule{prefix: "Bearer ", match: bearer, marker: MaskedToken},
		tokenRule{prefix: "Basic ", match: basic, marker: MaskedToken},
		tokenRule{prefix: "-----BEGIN ", match: pemBlock, marker: MaskedPEM},
	)
}()

// ruleStart marks the bytes that start some rule's prefix.
var ruleStart = func() (t [256]bool) {
	for _, r := range tokenRules {
		t[r.prefix[0]] = true
	}
	return t
}()

// tokenSpans appends the credentials found in s. The host name and port
// of a URL (after "scheme://" and any "user:password@") are never masked,
// whatever they look like: an approver must see where a call goes.
func tokenSpans(s string, spans []span) []span {
	var hosts [][2]int
	if strings.Contains(s, "://") {
		hosts = hostRanges(s)
	}
	h := 0
	for i := 0; i < len(s); i++ {
		for h < len(hosts) && hosts[h][1] <= i {
			h++
		}
		if h < len(hosts) && hosts[h][0] <= i {
			i = hosts[h][1] - 1
			continue
		}
		if !ruleStart[s[i]] || !startsWord(s, i) {
			continue
		}
		for _, r := range tokenRules {
			if !strings.HasPrefix(s[i:], r.prefix) {
				continue
			}
			from, to := r.match(s[i:])
			if to == 0 || h < len(hosts) && hosts[h][0] < i+to {
				continue
			}
			spans = append(spans, span{i + from, i + to, r.marker})
			i += to - 1
			break
		}
	}
	return spans
}

// hostRanges returns where the hosts of the URLs in s are: from after
// "://" and the last '@' of the authority, to its end ('/', '?', '#', a
// backslash, white space or a quote).
func hostRanges(s string) [][2]int {
	var hosts [][2]int
	for off := 0; ; {
		k := strings.Index(s[off:], "://")
		if k < 0 {
			return hosts
		}
		start := off + k + 3
		end := start + run(s[start:], func(c byte) bool {
			return c > ' ' && c != 0x7F && strings.IndexByte(`/?#\"'<>`+"`", c) < 0
		})
		host := start
		if at := strings.LastIndexByte(s[start:end], '@'); at >= 0 {
			host = start + at + 1
		}
		if host < end {
			hosts = append(hosts, [2]int{host, end})
		}
		off = max(end, start)
	}
}

// fewWords reports whether fewer than three of the parts of b, split at
// any byte other than a letter or a digit, are shaped like words: three
// letters or more, in lower case, capitalized or in upper case.
// "force-push-over-main" is words, not a key; the short parts of a random
// key ("Xq-bC_d") rarely are, as their letters mix cases.
func fewWords(b string) bool {
	words := 0
	for i := 0; i < len(b); {
		n := run(b[i:], isAlnum)
		if isWord(b[i : i+n]) {
			words++
		}
		i += n + 1
	}
	return words < 3
}

// isWord reports whether w is three letters or more, in lower case,
// capitalized or in upper case.
func isWord(w string) bool {
	if len(w) < 3 || run(w, isLetter) != len(w) {
		return false
	}
	isLower := func(c byte) bool { return c >= 'a' && c <= 'z' }
	isUpper := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	return run(w[1:], isLower) == len(w)-1 || run(w, isUpper) == len(w)
}

// looksRandom reports whether b, the body of a credential whose format
// does not fix its length, looks generated rather than written: it has
// both letters and digits, and few words (fewWords).
func looksRandom(b string) bool {
	return strings.ContainsFunc(b, func(r rune) bool { return r < 0x80 && isLetter(byte(r)) }) &&
		strings.ContainsAny(b, "0123456789") && fewWords(b)
}

// mixedOrRandom reports whether b looks random, or has few words and
// letters whose case is mixed in place of digits (caseMixed).
func mixedOrRandom(b string) bool {
	return looksRandom(b) || caseMixed(b) && fewWords(b)
}

// skBody: the body of an "sk-" key, which looks random once the label
// that some providers put first ("proj-", "ant-api03-") is set aside.
func skBody(b string) bool {
	for _, label := range []string{"proj-", "svcacct-", "admin-", "ant-"} {
		if rest, ok := strings.CutPrefix(b, label); ok {
			return len(rest) >= 20 && looksRandom(rest)
		}
	}
	return looksRandom(b)
}

// caseMixed reports whether b changes between lower and upper case
// letters at least four times, as random base64 without digits does and
// written words do not.
func caseMixed(b string) bool {
	changes := 0
	for i := 1; i < len(b); i++ {
		if isLetter(b[i-1]) && isLetter(b[i]) && (b[i-1] < 'a') != (b[i] < 'a') {
			changes++
		}
	}
	return changes >= 4
}

// aegisKey: an aegis API key, "aegis_" + id + "_" + secret (see package
// auth). A key made by aegis has a 16-character id and a 40-character
// secret in lower-case base32; a key chosen by an operator must look
// random.
func aegisKey(s string) (int, int) {
	p := len("aegis_")
	id := runMax(s[p:], isAlnum, 65)
	if id < 4 || id > 64 || p+id == len(s) || s[p+id] != '_' {
		return 0, 0
	}
	q := p + id + 1
	n := runMax(s[q:], isKeyByte, 257)
	if n < 20 || n > 256 || !endsWord(s, q+n) {
		return 0, 0
	}
	b32 := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '2' && c <= '7' }
	generated := id == 16 && n == 40 && run(s[p:], b32) == id && run(s[q:], b32) == n
	if !generated && !looksRandom(s[q:q+n]) {
		return 0, 0
	}
	return 0, q + n
}

// slackBody: a Slack token's body after "xoxb-" and the like starts with
// a numeric id and a dash.
func slackBody(b string) bool {
	n := run(b, isDigit)
	return n > 0 && n < len(b) && b[n] == '-' && looksRandom(b)
}

// minJWTSignature is the shortest signature segment of a JWT taken for
// one: an HS256 signature has 43 characters, and no top-level domain has
// more than 24, so a host name made of JWT-shaped labels
// ("eyJhIjoxfQ.eyJhIjoxfQ.com") is never masked.
const minJWTSignature = 32

// jwt: a JSON Web Token, three base64url segments joined by dots, the
// first two being JSON objects (so each starts "eyJ"), the third a
// signature (at least minJWTSignature characters, not words). A JWT
// followed by ".name" is part of a host name and is not one.
func jwt(s string) (int, int) {
	isSeg := func(c byte) bool { return isKeyByte(c) }
	n1 := run(s, isSeg)
	if n1 == len(s) || s[n1] != '.' || !jsonObject(s[:n1]) {
		return 0, 0
	}
	p := n1 + 1
	n2 := run(s[p:], isSeg)
	if p+n2 == len(s) || s[p+n2] != '.' || !strings.HasPrefix(s[p:], "eyJ") || !jsonObject(s[p:p+n2]) {
		return 0, 0
	}
	q := p + n2 + 1
	n3 := run(s[q:], isSeg)
	if n3 < minJWTSignature || n3%4 == 1 || !endsWord(s, q+n3) || !fewWords(s[q:q+n3]) {
		return 0, 0
	}
	return 0, q + n3
}

// jsonObject reports whether seg is unpadded base64url of a JSON object.
func jsonObject(seg string) bool {
	if len(seg)%4 == 1 {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(seg)
	return err == nil && len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// bearer: the credential after "Bearer ". It is a JWT, or an RFC 6750
// token at least 16 characters long that looks generated (looksRandom,
// or with its letters' case mixed in place of digits) and is not shaped
// like a path ("..", "/." or "./" in it, or a lower-case word between
// slashes). A full stop after it is not part of it.
func bearer(s string) (int, int) {
	p := len("Bearer ")
	n := run(s[p:], func(c byte) bool { return isKeyByte(c) || strings.IndexByte("._~+/", c) >= 0 })
	if pad := runMax(s[p+n:], func(c byte) bool { return c == '=' }, 3); pad > 0 {
		n += pad
	} else {
		for n > 0 && s[p+n-1] == '.' {
			n--
		}
	}
	tok := s[p : p+n]
	if !endsWord(s, p+n) {
		return 0, 0
	}
	if strings.HasPrefix(tok, "eyJ") {
		if _, to := jwt(tok); to == len(tok) {
			return p, p + n
		}
	}
	if n < 16 || strings.Contains(tok, "..") || strings.Contains(tok, "/.") || strings.Contains(tok, "./") ||
		pathLike(tok) || !mixedOrRandom(tok) {
		return 0, 0
	}
	return p, p + n
}

// pathLike reports whether a slash in tok is followed by a lower-case
// word of three letters or more that ends at a slash or at the end of
// tok, as in "1234/etc/shadow".
func pathLike(tok string) bool {
	for i := 0; i < len(tok); i++ {
		if tok[i] != '/' {
			continue
		}
		n := run(tok[i+1:], func(c byte) bool { return c >= 'a' && c <= 'z' })
		if e := i + 1 + n; n >= 3 && (e == len(tok) || tok[e] == '/') {
			return true
		}
	}
	return false
}

// basic: the credential after "Basic ", base64 of "user:password" in
// printable text.
func basic(s string) (int, int) {
	p := len("Basic ")
	n := run(s[p:], isB64)
	n += runMax(s[p+n:], func(c byte) bool { return c == '=' }, 3)
	if n < 8 || !endsWord(s, p+n) {
		return 0, 0
	}
	dec, err := base64.StdEncoding.DecodeString(s[p : p+n])
	if err != nil || bytes.IndexByte(dec, ':') < 0 || !utf8.Valid(dec) ||
		bytes.ContainsFunc(dec, unicode.IsControl) {
		return 0, 0
	}
	return p, p + n
}

// pemKind says how the decoded body of a PEM private key starts.
type pemKind int

const (
	pemDER     pemKind = iota // one DER SEQUENCE, its length the body's
	pemOpenSSH                // "openssh-key-v1\0"
	pemPGP                    // an OpenPGP secret-key packet
)

// pemLabels are the PEM types of private keys. Certificates, public keys
// and certificate requests are not secrets, and are shown.
var pemLabels = []struct {
	label string
	kind  pemKind
}{
	{"PRIVATE KEY", pemDER},
	{"RSA PRIVATE KEY", pemDER},
	{"EC PRIVATE KEY", pemDER},
	{"DSA PRIVATE KEY", pemDER},
	{"ENCRYPTED PRIVATE KEY", pemDER},
	{"OPENSSH PRIVATE KEY", pemOpenSSH},
	{"PGP PRIVATE KEY BLOCK", pemPGP},
}

const (
	maxPEMHeaders   = 8   // header lines read after a BEGIN line
	maxPEMHeaderLen = 128 // bytes of a header's value
	minPEMLine      = 40  // the shortest full line of a PEM body
)

// pemBlock: a PEM private key, masked from the first to the last character
// of its base64 body. The BEGIN and END lines and any headers (Proc-Type,
// DEK-Info, OpenPGP armor headers) are shown. The block must have a
// private key's label, the matching END line, and a body that is base64
// in lines of one length (the last may be shorter), whose decoded bytes
// start as that kind of key does. Lines may be split by "\n", "\r\n" or
// those written as escapes (a key pasted into JSON or an env file), by
// spaces (a key on one line) and indented.
func pemBlock(s string) (int, int) {
	p := len("-----BEGIN ")
	label, kind := "", pemDER
	for _, l := range pemLabels {
		if strings.HasPrefix(s[p:], l.label+"-----") {
			label, kind = l.label, l.kind
			break
		}
	}
	if label == "" {
		return 0, 0
	}
	p += len(label) + len("-----")
	p, headers := pemHeaders(s, p)
	sp, _ := pemSpace(s, p, 2)
	p += sp
	from, to := p, 0
	var (
		lines, first, prev, chars, pads int
		head                            [24]byte
		hn                              int
	)
	for {
		if kind == pemPGP && lines > 0 && pads == 0 && strings.HasPrefix(s[p:], "=") &&
			runMax(s[p+1:], isB64, 5) == 4 {
			// The armor's checksum line.
			p += 5
			to = p
			sp, _ := pemSpace(s, p, 1)
			p += sp
			break
		}
		n := run(s[p:], isB64)
		e := runMax(s[p+n:], func(c byte) bool { return c == '=' }, 3)
		if n+e == 0 {
			break
		}
		if pads > 0 || e > 2 || lines > 1 && prev != first {
			return 0, 0 // a line after the padding, or a short line before the last
		}
		for _, c := range []byte(s[p : p+n+e]) {
			if hn == len(head) {
				break
			}
			head[hn] = c
			hn++
		}
		if lines == 0 {
			first = n + e
		}
		lines, prev, chars, pads = lines+1, n+e, chars+n+e, e
		p += n + e
		to = p
		sp, _ := pemSpace(s, p, 1)
		if sp == 0 {
			break
		}
		p += sp
	}
	if lines == 0 || chars%4 != 0 || lines > 1 && (first < minPEMLine || prev > first) ||
		!strings.HasPrefix(s[p:], "-----END "+label+"-----") {
		return 0, 0
	}
	size := chars/4*3 - pads
	dec := make([]byte, 18)
	dn, err := base64.StdEncoding.Decode(dec, head[:hn])
	if err != nil {
		return 0, 0
	}
	dec = dec[:dn]
	switch {
	case kind == pemDER && headers:
		// Encrypted the RFC 1421 way: cipher blocks, not DER.
		if size%8 != 0 {
			return 0, 0
		}
	case kind == pemDER:
		if !derSequence(dec, size) {
			return 0, 0
		}
	case kind == pemOpenSSH:
		if !bytes.HasPrefix(dec, []byte("openssh-key-v1\x00")) {
			return 0, 0
		}
	case kind == pemPGP:
		if !pgpSecretKey(dec) {
			return 0, 0
		}
	}
	return from, to
}

// pemHeaders returns where the "Name: value" header lines after a BEGIN
// line at s[:p] end, before the blank line that must follow them, and
// whether there were any.
func pemHeaders(s string, p int) (int, bool) {
	q, n := p, 0
	for ; n < maxPEMHeaders; n++ {
		sp, breaks := pemSpace(s, q, 1)
		if breaks != 1 {
			break
		}
		h := q + sp
		name := runMax(s[h:], func(c byte) bool { return isAlnum(c) || c == '-' }, 33)
		if name == 0 || name > 32 || !strings.HasPrefix(s[h+name:], ": ") {
			break
		}
		v := h + name + 2
		vn := runMax(s[v:], func(c byte) bool { return c >= ' ' && c != 0x7F && c != '\\' }, maxPEMHeaderLen+1)
		if vn > maxPEMHeaderLen {
			return p, false
		}
		q = v + vn
	}
	if n == 0 {
		return p, false
	}
	if _, breaks := pemSpace(s, q, 2); breaks != 2 {
		return p, false
	}
	return q, true
}

// pemSpace returns the length of the spaces, tabs and up to max line
// breaks at s[p:], and how many line breaks it holds.
func pemSpace(s string, p, max int) (n, breaks int) {
	q := p
	for q < len(s) {
		if s[q] == ' ' || s[q] == '\t' {
			q++
			continue
		}
		b := 0
		for _, lb := range []string{"\r\n", "\n", `\r\n`, `\n`} {
			if strings.HasPrefix(s[q:], lb) {
				b = len(lb)
				break
			}
		}
		if b == 0 || breaks == max {
			break
		}
		q += b
		breaks++
	}
	return q - p, breaks
}

// derSequence reports whether h starts a DER SEQUENCE whose header and
// contents are size bytes long.
func derSequence(h []byte, size int) bool {
	if len(h) < 2 || h[0] != 0x30 {
		return false
	}
	n, hdr := int(h[1]), 2
	if n >= 0x80 {
		k := n & 0x7F
		if k == 0 || k > 3 || len(h) < 2+k {
			return false
		}
		n = 0
		for _, b := range h[2 : 2+k] {
			n = n<<8 | int(b)
		}
		hdr += k
	}
	return hdr+n == size
}

// pgpSecretKey reports whether h starts with an OpenPGP packet header
// whose tag is 5, a secret key.
func pgpSecretKey(h []byte) bool {
	if len(h) == 0 || h[0]&0x80 == 0 {
		return false
	}
	if h[0]&0x40 != 0 {
		return h[0]&0x3F == 5 // new format
	}
	return h[0]>>2&0x0F == 5 // old format
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
