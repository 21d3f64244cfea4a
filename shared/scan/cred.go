package scan

import (
	"bytes"
	"encoding/base64"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// credRule is a credential format. A rule is tried where its prefix starts
// a word; match is given the text from the prefix on and returns the part
// [from, to) of it that is the credential, to == 0 when there is none of
// this format there. Every rule ends its match at the end of a word
// (endsWord), so a credential never takes the text after it.
type credRule struct {
	prefix string
	id     string
	match  func(s string) (from, to int)
}

// key is the rule for a credential made of prefix and a body of minLen to
// maxLen bytes that ok accepts, for which valid holds.
func key(id, prefix string, minLen, maxLen int, ok func(byte) bool, valid func(body string) bool) credRule {
	return credRule{prefix: prefix, id: id, match: func(s string) (int, int) {
		p := len(prefix)
		n := runMax(s[p:], ok, maxLen+1)
		if n < minLen || n > maxLen || !endsWord(s, p+n) || !varied(s[p:p+n]) || !valid(s[p:p+n]) {
			return 0, 0
		}
		return 0, p + n
	}}
}

// varied reports whether body holds at least four distinct bytes: a
// placeholder ("ghp_xxxx...", "AKIAXXXXXXXXXXXXXXXX", "glpat-XXXX-XXXX")
// does not, and a generated key of 16 bytes or more always does.
func varied(body string) bool {
	var seen [4]uint64
	distinct := 0
	for i := 0; i < len(body); i++ {
		c := body[i]
		if seen[c>>6]&(1<<(c&63)) == 0 {
			seen[c>>6] |= 1 << (c & 63)
			if distinct++; distinct == 4 {
				return true
			}
		}
	}
	return false
}

// gitlabRoutable: GitLab's routable personal access token, "glpat-", a
// base64url payload of 27 bytes or more, ".", then two and seven
// characters of [0-9a-z] (its version and check).
func gitlabRoutable(s string) (int, int) {
	p := len("glpat-")
	n := runMax(s[p:], isKeyByte, 301)
	if n < 27 || n > 300 || p+n == len(s) || s[p+n] != '.' || !varied(s[p:p+n]) {
		return 0, 0
	}
	q := p + n + 1
	m := runMax(s[q:], func(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'z' }, 10)
	if m != 9 || !endsWord(s, q+m) {
		return 0, 0
	}
	return 0, q + m
}

func anyBody(string) bool { return true }

func isUpperDigit(c byte) bool { return isDigit(c) || isUpper(c) }

// credRules are the credential formats, longest prefix first where two
// share a start. Formats of a fixed length need only that length and
// alphabet; formats whose length varies must also look generated
// (looksRandom), so that a prefix followed by words
// ("sk-force-push-over-main") is not taken.
var credRules = func() []credRule {
	rules := []credRule{{prefix: "aegis_", id: "aegis-api-key", match: aegisKey}}
	for _, r := range []struct{ prefix, id string }{
		{"ghp_", "github-pat"}, {"gho_", "github-oauth"}, {"ghu_", "github-app-token"},
		{"ghs_", "github-app-token"}, {"ghr_", "github-refresh-token"},
	} {
		rules = append(rules, key(r.id, r.prefix, 36, 36, isAlnum, anyBody))
	}
	rules = append(rules,
		key("github-fine-grained-pat", "github_pat_", 82, 82, func(c byte) bool { return isAlnum(c) || c == '_' }, anyBody),
		key("google-api-key", "AIza", 35, 35, isKeyByte, fewWords),
		credRule{prefix: "glpat-", id: "gitlab-pat", match: gitlabRoutable},
		key("gitlab-pat", "glpat-", 20, 20, isKeyByte, fewWords),
		key("gitlab-pat", "glpat-", 21, 256, isKeyByte, looksRandom),
		key("npm-token", "npm_", 36, 36, isAlnum, looksRandom),
		credRule{prefix: "sk-ant-", id: "anthropic-api-key", match: skKey("sk-ant-")},
		credRule{prefix: "sk-proj-", id: "openai-project-key", match: skKey("sk-proj-")},
		credRule{prefix: "sk-svcacct-", id: "openai-service-key", match: skKey("sk-svcacct-")},
		credRule{prefix: "sk-admin-", id: "openai-admin-key", match: skKey("sk-admin-")},
		credRule{prefix: "sk-", id: "openai-api-key", match: skKey("sk-")},
		credRule{prefix: "SG.", id: "sendgrid-api-key", match: sendgrid},
	)
	// AWS key ids: the four-letter prefixes of the resource types that
	// carry credentials, then 16 upper-case letters and digits.
	for _, p := range []string{"AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA", "APKA", "AROA", "ASCA"} {
		rules = append(rules, key("aws-access-key-id", p, 16, 16, isUpperDigit, anyBody))
	}
	for _, p := range []string{"sk_live_", "sk_test_"} {
		rules = append(rules, key("stripe-secret-key", p, 20, 247, isAlnum, mixedOrRandom))
	}
	for _, p := range []string{"rk_live_", "rk_test_"} {
		rules = append(rules, key("stripe-restricted-key", p, 20, 247, isAlnum, mixedOrRandom))
	}
	for _, p := range []string{"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-", "xoxe.xoxp-", "xoxe.xoxb-"} {
		rules = append(rules, key("slack-token", p, 16, 255, func(c byte) bool { return isAlnum(c) || c == '-' }, slackBody))
	}
	return append(rules,
		key("slack-app-token", "xapp-", 16, 255, func(c byte) bool { return isAlnum(c) || c == '-' }, slackBody),
		credRule{prefix: "eyJ", id: "jwt", match: jwt},
		credRule{prefix: "Bearer ", id: "bearer-token", match: bearer},
		credRule{prefix: "Basic ", id: "basic-auth", match: basic},
		credRule{prefix: "-----BEGIN ", id: "pem-private-key", match: pemBlock},
	)
}()

// credByFirst lists, for each byte, the credential rules whose prefix
// starts with it, in credRules' order.
var credByFirst = func() (t [256][]uint8) {
	for k, r := range credRules {
		t[r.prefix[0]] = append(t[r.prefix[0]], uint8(k))
	}
	return t
}()

// credSecond marks, for each first byte of a prefix, the bytes that
// follow it in some prefix (a bit set per first byte): most words that
// start like a prefix ("s", "g", "x") are dropped at their second byte.
var credSecond = func() (t [256][4]uint64) {
	for _, r := range credRules {
		if len(r.prefix) < 2 {
			t[r.prefix[0]] = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
			continue
		}
		c := r.prefix[1]
		t[r.prefix[0]][c>>6] |= 1 << (c & 63)
	}
	return t
}()

// credential tries the credential rules at t[i], a word start.
func credential(t string, i int) hit {
	if i+1 >= len(t) {
		return noHit
	}
	if c := t[i+1]; credSecond[t[i]][c>>6]&(1<<(c&63)) == 0 {
		return noHit
	}
	for _, k := range credByFirst[t[i]] {
		r := &credRules[k]
		if !strings.HasPrefix(t[i:], r.prefix) {
			continue
		}
		if from, to := r.match(t[i:]); to > 0 {
			return hit{kind: KindCredential, rule: r.id, start: i + from, end: i + to}
		}
	}
	return noHit
}

// skKey: an "sk-" key (OpenAI, Anthropic, DeepSeek and others): a body of
// at least 20 base64url characters that looks generated once the label
// (prefix minus "sk-") is set aside.
func skKey(prefix string) func(s string) (int, int) {
	return func(s string) (int, int) {
		p := len(prefix)
		n := runMax(s[p:], isKeyByte, 257)
		if n < 20 || n > 256 || !endsWord(s, p+n) || !looksRandom(s[p:p+n]) {
			return 0, 0
		}
		return 0, p + n
	}
}

// sendgrid: "SG." + 22 + "." + 43 base64url characters.
func sendgrid(s string) (int, int) {
	p := len("SG.")
	n := runMax(s[p:], isKeyByte, 23)
	if n != 22 || p+n >= len(s) || s[p+n] != '.' {
		return 0, 0
	}
	q := p + n + 1
	m := runMax(s[q:], isKeyByte, 44)
	if m != 43 || !endsWord(s, q+m) || !mixedOrRandom(s[q:q+m]) {
		return 0, 0
	}
	return 0, q + m
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
// ("eyJhIjoxfQ.eyJhIjoxfQ.com") is never taken.
const minJWTSignature = 32

// jwt: a JSON Web Token, three base64url segments joined by dots: a
// header that decodes to a JSON object with an "alg" member, a payload
// that decodes to a JSON object, and a signature (at least
// minJWTSignature characters, not words). A JWT followed by ".name" is
// part of a host name and is not one.
func jwt(s string) (int, int) {
	n1 := run(s, isKeyByte)
	if n1 == len(s) || s[n1] != '.' || !jsonObject(s[:n1], true) {
		return 0, 0
	}
	p := n1 + 1
	n2 := run(s[p:], isKeyByte)
	if p+n2 == len(s) || s[p+n2] != '.' || !strings.HasPrefix(s[p:], "eyJ") || !jsonObject(s[p:p+n2], false) {
		return 0, 0
	}
	q := p + n2 + 1
	n3 := run(s[q:], isKeyByte)
	if n3 < minJWTSignature || n3%4 == 1 || !endsWord(s, q+n3) || !sparseWords(s[q:q+n3]) {
		return 0, 0
	}
	return 0, q + n3
}

// sparseWords reports whether b, a signature, holds few word-shaped
// parts for its length: fewer than three, or one per 32 bytes (random
// base64url of RS256's 342 characters holds a few by chance).
func sparseWords(b string) bool {
	words := 0
	for i := 0; i < len(b); {
		n := run(b[i:], isAlnum)
		if isWord(b[i : i+n]) {
			words++
		}
		i += n + 1
	}
	return words < 3 || words*32 < len(b)
}

// maxJWTHeader bounds the JOSE header decoded on the stack.
const maxJWTHeader = 1024

// jsonObject reports whether seg is unpadded base64url of a JSON object
// (with an "alg" member when alg is set). Payloads longer than
// maxJWTHeader bytes are taken on their first bytes.
func jsonObject(seg string, alg bool) bool {
	if len(seg)%4 == 1 {
		return false
	}
	var buf [maxJWTHeader]byte
	if base64.RawURLEncoding.DecodedLen(len(seg)) > len(buf) {
		if alg {
			return false
		}
		n, err := base64.RawURLEncoding.Decode(buf[:], []byte(seg[:len(buf)/3*4]))
		return err == nil && n > 0 && buf[0] == '{'
	}
	n, err := base64.RawURLEncoding.Decode(buf[:], []byte(seg))
	if err != nil || n == 0 || buf[0] != '{' {
		return false
	}
	b := buf[:n]
	if !validJSON(b) {
		return false
	}
	return !alg || bytes.Contains(b, []byte(`"alg"`))
}

// validJSON reports whether b is one JSON value (a small one: a JOSE
// header), without allocating.
func validJSON(b []byte) bool {
	w := walker{doc: b, v: nopVisitor{}}
	return w.run() == nil
}

type nopVisitor struct{}

func (nopVisitor) Visit(*String) error { return nil }

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
		n := run(tok[i+1:], isLower)
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
	n := runMax(s[p:], isB64, 1024)
	n += runMax(s[p+n:], func(c byte) bool { return c == '=' }, 3)
	if n < 8 || !endsWord(s, p+n) {
		return 0, 0
	}
	var buf [768]byte
	dn, err := base64.StdEncoding.Decode(buf[:], []byte(s[p:p+n]))
	dec := buf[:dn]
	if err != nil || bytes.IndexByte(dec, ':') < 0 || !utf8.Valid(dec) ||
		bytes.ContainsFunc(dec, unicode.IsControl) {
		return 0, 0
	}
	return p, p + n
}

// awsSecretWords are the names an AWS secret access key is written under.
var awsSecretWords = []string{"secretaccesskey", "awssecret", "secretkey"}

// awsSecretAfter finds an AWS secret access key (40 characters of
// base64) within 64 bytes after an access key id that ends at t[from].
func awsSecretAfter(t string, from int) hit {
	end := min(len(t), from+64)
	for i := from; i < end; i++ {
		if !isB64(t[i]) || i > 0 && isB64(t[i-1]) {
			continue
		}
		if n := runMax(t[i:], isB64, 41); n == 40 && awsSecret(t[i:i+40]) && (i+40 == len(t) || !isB64(t[i+40]) && t[i+40] != '=') {
			return hit{kind: KindCredential, rule: "aws-secret-access-key", start: i, end: i + 40}
		}
	}
	return noHit
}

// awsSecret reports whether v, 40 base64 characters, looks like a
// generated AWS secret key: letters of both cases and a digit or a symbol.
func awsSecret(v string) bool {
	var lo, up, other bool
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case isLower(c):
			lo = true
		case isUpper(c):
			up = true
		default:
			other = true
		}
	}
	return lo && up && other && entropy(v) >= 4
}

// secretWords are the names (folded: lower case, letters only) after
// which a value that looks random is a secret ("password=...",
// "client_secret: ...", {"api_key": "..."}).
var secretWords = []string{
	"password", "passwd", "passphrase", "secret", "apikey", "accesskey", "privatekey",
	"token", "credential", "authkey",
}

// secretKeys and awsSecretKeys are secretWords and awsSecretWords looked
// for in a member's key.
var (
	secretKeys    = newKeyWords(secretWords...)
	awsSecretKeys = newKeyWords(awsSecretWords...)
)

// minSecretName is the length of the shortest of secretWords and
// awsSecretWords; secretLast marks their last letters. assignment drops a
// name shorter, or ending in another letter, at once.
var (
	minSecretName = minLen(secretWords, awsSecretWords)
	secretLast    = lastLetters(secretWords, awsSecretWords)
)

func minLen(lists ...[]string) int {
	n := math.MaxInt
	for _, l := range lists {
		for _, w := range l {
			n = min(n, len(w))
		}
	}
	return n
}

func lastLetters(lists ...[]string) *[256]bool {
	var t [256]bool
	for _, l := range lists {
		for _, w := range l {
			t[w[len(w)-1]] = true
		}
	}
	return &t
}

// maxSecretName is how far back from its '=' or ':' a secret's name is
// read.
const maxSecretName = 48

// isNameByte reports whether c may be part of a secret's name: a letter,
// a digit, '_', '-' or '.'.
func isNameByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' }

// nameMay reports whether the name that ends just before t[j] (isNameByte,
// up to maxSecretName bytes back) may be a secret's (assignment): it has
// minSecretName letters or more, and its last letter is the last of one
// of secretWords or awsSecretWords. Most names are not: "T09" in a time,
// "https" in a URL.
func nameMay(t string, j int) bool {
	letters, last := 0, byte(0)
	for k := j; k > 0 && j-k < maxSecretName && isNameByte(t[k-1]); k-- {
		if c := t[k-1]; isLetter(c) {
			if letters == 0 {
				last = c | 0x20
			}
			letters++
		}
	}
	return letters >= minSecretName && secretLast[last]
}

// assignment: at t[i], a '=' or ':' after a secret's name (password=,
// secret:, "api_key": ...), the value when it is a known credential or
// looks random (randomValue).
func assignment(t string, i int) hit {
	// The name: letters, digits, '_', '-', '.' before the sign, perhaps
	// closed by a quote.
	j := i
	if j > 0 && (t[j-1] == '"' || t[j-1] == '\'') {
		j--
	}
	if !nameMay(t, j) {
		return noHit
	}
	k := j
	for k > 0 && j-k < maxSecretName && isNameByte(t[k-1]) {
		k--
	}
	if k > 0 && isAlnum(t[k-1]) {
		return noHit
	}
	var buf [maxSecretName]byte
	n := 0
	for _, c := range []byte(t[k:j]) {
		if isLetter(c) {
			buf[n] = c | 0x20
			n++
		}
	}
	name := unsafe.String(&buf[0], n) // read only, during this call
	aws := false
	for _, w := range awsSecretWords {
		aws = aws || strings.HasSuffix(name, w)
	}
	sensitive := aws
	for _, w := range secretWords {
		sensitive = sensitive || strings.HasSuffix(name, w)
	}
	if !sensitive {
		return noHit
	}
	// The value: after spaces and a quote, up to a space, a quote or a
	// separator.
	v := i + 1
	for v < len(t) && (t[v] == ' ' || t[v] == '\t') && v-i < 8 {
		v++
	}
	quote := byte(0)
	if v < len(t) && (t[v] == '"' || t[v] == '\'') {
		quote = t[v]
		v++
	}
	if v >= len(t) {
		return noHit
	}
	if f := credential(t, v); f.start >= 0 {
		return f
	}
	e := v
	for e < len(t) && e-v <= 256 && valueByte(t[e], quote) {
		e++
	}
	for e > v && (t[e-1] == '.' || t[e-1] == ',') {
		e-- // the end of a sentence
	}
	val := t[v:e]
	if aws && len(val) == 40 && run(val, isB64) == 40 && awsSecret(val) {
		return hit{kind: KindCredential, rule: "aws-secret-access-key", start: v, end: e}
	}
	if !randomValue(val) {
		return noHit
	}
	return hit{kind: KindCredential, rule: "secret-assignment", start: v, end: e}
}

// valueByte reports whether c continues an assigned value (in quotes:
// up to the quote).
func valueByte(c, quote byte) bool {
	if quote != 0 {
		return c != quote && c >= ' ' && c != '\\'
	}
	return c > ' ' && c < 0x7f && strings.IndexByte(`"'`+"`,;&@<>()[]{}\\", c) < 0
}

// protocolToken is the member of MCP's requests and progress
// notifications that names a request's progress (params.progressToken,
// params._meta.progressToken): an opaque id the client picks.
const protocolToken = "progressToken"

// secretMember: the value t of a member named like a secret, when it
// looks random, is one whole.
func secretMember(t string, member []byte) hit {
	// The member's name first: it is short, and rarely a secret's. Every
	// AWS secret's name holds "secret" (TestAWSSecretWordsHoldSecret): a
	// member without one of secretWords has neither.
	if !secretKeys.inKey(member) {
		return noHit
	}
	if string(member) == protocolToken {
		// MCP's own opaque id, which SDKs mint at random: its name is
		// not a secret's. Its value is still scanned by every other rule.
		return noHit
	}
	v := strings.TrimSpace(t)
	if len(v) < 8 || len(v) > 256 || strings.IndexByte(v, ' ') >= 0 {
		return noHit
	}
	start := strings.Index(t, v)
	if awsSecretKeys.inKey(member) && len(v) == 40 && run(v, isB64) == 40 && awsSecret(v) {
		return hit{kind: KindCredential, rule: "aws-secret-access-key", start: start, end: start + len(v)}
	}
	if strings.ContainsAny(v, " \t\n") || !randomValue(v) {
		return noHit
	}
	return hit{kind: KindCredential, rule: "secret-assignment", start: start, end: start + len(v)}
}

// placeholders are values written in place of a secret.
var placeholders = []string{"${", "{{", "<", "***", "xxx", "changeme", "example", "your", "redacted", "placeholder", "dummy", "sample"}

// randomValue reports whether v, an assigned value, looks generated: 8
// to 256 bytes, not a placeholder, not words, and either three classes of
// characters (lower, upper, digits, symbols) with 3 bits of entropy per
// byte, or two classes including digits, 16 bytes or more and 3.5 bits.
func randomValue(v string) bool {
	if len(v) < 8 || len(v) > 256 {
		return false
	}
	for _, p := range placeholders {
		if containsFold(v, p) {
			return false
		}
	}
	var lo, up, dg, sy bool
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case isLower(c):
			lo = true
		case isUpper(c):
			up = true
		case isDigit(c):
			dg = true
		default:
			sy = true
		}
	}
	classes := 0
	for _, b := range []bool{lo, up, dg, sy} {
		if b {
			classes++
		}
	}
	if !fewWords(v) {
		return false
	}
	h := entropy(v)
	return classes >= 3 && h >= 3 || classes == 2 && dg && len(v) >= 16 && h >= 3.5
}

// containsFold reports whether s holds sub (lower case ASCII), ignoring
// case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}
