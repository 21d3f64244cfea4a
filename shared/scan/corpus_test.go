package scan

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// sample is one labelled document of the corpus: a JSON text and the
// values in it that the scanner must find, by kind. A sample with no
// values is a hard negative: any finding in it is a false positive.
type sample struct {
	doc  string
	want []labelled
}

type labelled struct {
	kind  Kind
	value string
}

// corpusGen makes the labelled corpus from a fixed seed.
type corpusGen struct{ r *rand.Rand }

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upperD  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	b64url  = alnum + "-_"
	b64std  = alnum + "+/"
	digitsC = "0123456789"
	hexC    = "0123456789abcdef"
)

func (g *corpusGen) pick(set string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[g.r.IntN(len(set))]
	}
	return string(b)
}

// random is pick that retries until the value has a digit (generated
// keys without one are rare and look like words to the rules).
func (g *corpusGen) random(set string, n int) string {
	for {
		v := g.pick(set, n)
		if strings.ContainsAny(v, digitsC) && strings.ContainsAny(v, "abcdefghijklmnopqrstuvwxyz") {
			return v
		}
	}
}

func (g *corpusGen) one(xs ...string) string { return xs[g.r.IntN(len(xs))] }

// sentence puts v into text the way results carry it.
func (g *corpusGen) sentence(v string) string {
	return fmt.Sprintf(g.one("%s", "value: %s", "use %s, then deploy.", "export KEY=%s\nmake", "see https://api.example.com/cb?x=%s&y=1", "the record (%s) was updated", "%s is on file"), v)
}

func docOf(text string) string {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]string{"type": "text", "text": text}}})
	return string(b)
}

func (g *corpusGen) credential() (string, string) {
	switch g.r.IntN(17) {
	case 0:
		return "ghp_" + g.pick(alnum, 36), ""
	case 1:
		return g.one("gho_", "ghu_", "ghs_", "ghr_") + g.pick(alnum, 36), ""
	case 2:
		return "github_pat_" + g.pick(alnum, 22) + "_" + g.pick(alnum, 59), ""
	case 3:
		return "glpat-" + g.random(b64url, 20), ""
	case 4:
		return g.one("xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-") + g.pick(digitsC, 12) + "-" + g.pick(digitsC, 13) + "-" + g.random(alnum, 24), ""
	case 5:
		return g.one("sk_live_", "rk_live_") + g.random(alnum, 24+g.r.IntN(76)), ""
	case 6:
		return "sk-" + g.random(alnum, 20) + "T3BlbkFJ" + g.random(alnum, 20), ""
	case 7:
		return "sk-proj-" + g.random(b64url, 80+g.r.IntN(80)), ""
	case 8:
		return "sk-ant-api03-" + g.random(b64url, 93) + "AA", ""
	case 9:
		return "AIza" + g.random(b64url, 35), ""
	case 10:
		return "npm_" + g.random(alnum, 36), ""
	case 11:
		return "SG." + g.random(b64url, 22) + "." + g.random(b64url, 43), ""
	case 12:
		return g.one("AKIA", "ASIA") + g.pick(upperD, 16), ""
	case 13:
		return g.jwt(), ""
	case 14:
		return g.pem(), "pem"
	case 15:
		return g.secretValue(), "password"
	default:
		return g.random(b64url, 32), "bearer"
	}
}

func (g *corpusGen) jwt() string {
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(g.one(`{"alg":"HS256","typ":"JWT"}`, `{"alg":"RS256","kid":"`+g.pick(hexC, 8)+`"}`, `{"typ":"JWT","alg":"ES256"}`)))
	p := enc.EncodeToString([]byte(fmt.Sprintf(`{"sub":"%d","iat":%d,"name":"%s"}`, g.r.IntN(1e6), 1.7e9+g.r.IntN(1e8), g.pick("abcdefgh", 6))))
	return h + "." + p + "." + g.pick(b64url, []int{43, 86, 342}[g.r.IntN(3)])
}

func (g *corpusGen) pem() string {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(g.r.IntN(256))
	}
	der, _ := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(seed))
	return strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
}

// secretValue is a random password: three classes of characters.
func (g *corpusGen) secretValue() string {
	for {
		v := g.pick(alnum+"!#$%^*_-", 12+g.r.IntN(20))
		if randomValue(v) {
			return v
		}
	}
}

func luhnDigit(body string) byte {
	sum := 0
	for i := range len(body) {
		n := int(body[len(body)-1-i] - '0')
		if i%2 == 0 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return byte('0' + (10-sum%10)%10)
}

func (g *corpusGen) cardNumber() string {
	type iss struct {
		prefix string
		n      int
	}
	is := []iss{{"4", 16}, {"4", 13}, {"4", 19}, {"51", 16}, {"55", 16}, {"2221", 16}, {"2720", 16}, {"2500", 16},
		{"34", 15}, {"37", 15}, {"6011", 16}, {"65", 16}, {"644", 16}, {"3528", 16}, {"3589", 19},
		{"36", 14}, {"300", 14}, {"38", 16}, {"62", 16}, {"62", 19}}[g.r.IntN(20)]
	body := is.prefix + g.pick(digitsC, is.n-1-len(is.prefix))
	return body + string(luhnDigit(body))
}

func group(d string, sizes []int, sep string) string {
	var parts []string
	for _, n := range sizes {
		if n > len(d) {
			n = len(d)
		}
		parts = append(parts, d[:n])
		d = d[n:]
	}
	if d != "" {
		parts = append(parts, d)
	}
	parts = slices.DeleteFunc(parts, func(p string) bool { return p == "" })
	return strings.Join(parts, sep)
}

func (g *corpusGen) card() string {
	d := g.cardNumber()
	switch g.r.IntN(3) {
	case 0:
		return d
	}
	// The groupings printed on cards of each length.
	sizes := map[int][]int{13: {4, 4, 5}, 14: {4, 6, 4}, 15: {4, 6, 5}, 16: {4, 4, 4, 4}, 19: {4, 4, 4, 4, 3}}[len(d)]
	return group(d, sizes, g.one(" ", "-"))
}

func (g *corpusGen) ssnParts() (string, string, string) {
	for {
		a, b, c := fmt.Sprintf("%03d", 1+g.r.IntN(899)), fmt.Sprintf("%02d", 1+g.r.IntN(99)), fmt.Sprintf("%04d", 1+g.r.IntN(9999))
		if a != "666" {
			return a, b, c
		}
	}
}

var ibanCountries = map[string]int{"DE": 22, "GB": 22, "FR": 27, "NL": 18, "ES": 24, "IT": 27, "BE": 16, "CH": 21, "AT": 20, "PL": 28, "SE": 24, "NO": 15, "IE": 22, "PT": 25, "DK": 18}

func (g *corpusGen) iban() string {
	ccs := []string{"DE", "GB", "FR", "NL", "ES", "IT", "BE", "CH", "AT", "PL", "SE", "NO", "IE", "PT", "DK"}
	cc := ccs[g.r.IntN(len(ccs))]
	n := ibanCountries[cc]
	bban := g.pick(digitsC, n-4)
	if cc == "GB" || cc == "NL" || cc == "IE" {
		bban = g.pick("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 4) + g.pick(digitsC, n-8)
	}
	rem := 0
	for _, c := range bban + cc + "00" {
		if c >= 'A' {
			rem = (rem*100 + int(c-'A') + 10) % 97
		} else {
			rem = (rem*10 + int(c-'0')) % 97
		}
	}
	v := fmt.Sprintf("%s%02d%s", cc, 98-rem, bban)
	if g.r.IntN(2) == 0 {
		return group(v, []int{4, 4, 4, 4, 4, 4, 4, 4}, " ")
	}
	return v
}

func (g *corpusGen) email() string {
	local := g.one(g.pick("abcdefghijklmnopqrstuvwxyz", 3+g.r.IntN(8)),
		g.pick("abcdefghij", 4)+"."+g.pick("klmnopqrstu", 6),
		g.pick("abcdefgh", 5)+"+"+g.pick("xyz", 3),
		g.pick("abc", 2)+"_"+g.pick(digitsC, 3))
	dom := g.one("example.com", "mail.example.org", "corp.example.co.uk", g.pick("abcdefghijklmnop", 7)+".io", "sub-domain.example.net", "xn--bcher-kva.example")
	return local + "@" + dom
}

func (g *corpusGen) nxx() string { return string(rune('2'+g.r.IntN(8))) + g.pick(digitsC, 2) }

// phoneRegionsC are the regions the corpus writes phone numbers of: some
// of DefaultPhoneRegions, national and international.
var phoneRegionsC = []string{"US", "GB", "DE", "FR", "IN", "BR", "JP", "AU", "BE", "SE", "ES", "IT", "MX", "NG", "CN", "RU"}

// phone is a valid number: a region's example number from the library
// with its last four digits changed until the library takes it again,
// written in one of the formats people use.
func (g *corpusGen) phone() string {
	if g.r.IntN(4) == 0 {
		// North American shapes, as before.
		a, e, l := g.nxx(), g.nxx(), g.pick(digitsC, 4)
		for a[1:] == "11" || a[0] == '9' || e[1:] == "11" {
			a, e = g.nxx(), g.nxx()
		}
		v := []string{"(" + a + ") " + e + "-" + l, a + "-" + e + "-" + l, a + "." + e + "." + l, "+1 " + a + "-" + e + "-" + l, "+1" + a + e + l}[g.r.IntN(5)]
		if n, err := phonenumbers.Parse(v, "US"); err == nil && phonenumbers.IsValidNumber(n) {
			return v
		}
	}
	region := phoneRegionsC[g.r.IntN(len(phoneRegionsC))]
	typ := []phonenumbers.PhoneNumberType{phonenumbers.FIXED_LINE, phonenumbers.MOBILE}[g.r.IntN(2)]
	ex := phonenumbers.GetExampleNumberForType(region, typ)
	for try := 0; ; try++ {
		nsn := phonenumbers.GetNationalSignificantNumber(ex)
		if try < 50 {
			nsn = nsn[:len(nsn)-4] + g.pick(digitsC, 4)
		}
		n, err := phonenumbers.Parse("+"+strconv.Itoa(int(ex.GetCountryCode()))+nsn, "ZZ")
		if err != nil || !phonenumbers.IsValidNumberForRegion(n, region) {
			if try >= 50 {
				panic("example number of " + region + " not valid")
			}
			continue
		}
		switch g.r.IntN(4) {
		case 0:
			return phonenumbers.Format(n, phonenumbers.INTERNATIONAL)
		case 1:
			return phonenumbers.Format(n, phonenumbers.E164)
		case 2:
			return phonenumbers.Format(n, phonenumbers.INTERNATIONAL) + g.one(" x12", " ext. 345", "x7")
		}
		return phonenumbers.Format(n, phonenumbers.NATIONAL)
	}
}

func (g *corpusGen) date() string {
	y, m, d := 1930+g.r.IntN(80), 1+g.r.IntN(12), 1+g.r.IntN(28)
	switch g.r.IntN(3) {
	case 0:
		return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
	case 1:
		return fmt.Sprintf("%02d/%02d/%04d", m, d, y)
	}
	return fmt.Sprintf("%02d.%02d.%04d", d, m, y)
}

// positive makes a sample holding one value of kind k.
func (g *corpusGen) positive(k Kind) sample {
	var v string
	switch k {
	case KindCredential:
		val, how := g.credential()
		switch how {
		case "pem":
			// The finding is the base64 body, between the BEGIN and END lines.
			body := val[strings.IndexByte(val, '\n')+1 : strings.LastIndexByte(val, '\n')]
			return sample{docOf("key:\n" + val + "\nthen run deploy.sh"), []labelled{{k, body}}}
		case "bearer":
			return sample{docOf(g.sentence("Authorization: Bearer " + val)), []labelled{{k, val}}}
		case "password":
			name := g.one("password", "db_password", "client_secret", "api_key", "secret", "auth_token")
			if g.r.IntN(2) == 0 {
				b, _ := json.Marshal(map[string]string{name: val})
				return sample{string(b), []labelled{{k, val}}}
			}
			q := g.one("", "\"", "'")
			return sample{docOf(g.one("config: ", "set ", "") + name + g.one("=", ": ") + q + val + q + g.one("", " and restart", ", then reload")), []labelled{{k, val}}}
		}
		v = val
	case KindCard:
		v = g.card()
		if g.r.IntN(8) == 0 {
			d := g.cardNumber()
			return sample{`{"payment":{"number":` + d + `,"exp":"12/29"}}`, []labelled{{k, d}}}
		}
	case KindSSN:
		a, b, c := g.ssnParts()
		switch g.r.IntN(3) {
		case 0:
			v = a + "-" + b + "-" + c
		case 1:
			v = a + " " + b + " " + c
		default:
			v = a + b + c
			return sample{docOf(g.one("SSN: ", "social security number ", "ssn=") + v), []labelled{{k, v}}}
		}
	case KindIBAN:
		v = g.iban()
	case KindEmail:
		v = g.email()
	case KindPhone:
		v = g.phone()
	case KindDOB:
		v = g.date()
		if g.r.IntN(2) == 0 {
			b, _ := json.Marshal(map[string]string{g.one("dob", "date_of_birth", "birthDate"): v})
			return sample{string(b), []labelled{{k, v}}}
		}
		return sample{docOf(g.one("DOB: ", "born ", "Date of birth: ", "birthday on ") + v), []labelled{{k, v}}}
	}
	return sample{docOf(g.sentence(v)), []labelled{{k, v}}}
}

// negative makes a hard negative: text that looks like a finding and is
// none.
func (g *corpusGen) negative() string {
	switch g.r.IntN(26) {
	case 0: // UUID
		return g.pick(hexC, 8) + "-" + g.pick(hexC, 4) + "-4" + g.pick(hexC, 3) + "-a" + g.pick(hexC, 3) + "-" + g.pick(hexC, 12)
	case 1: // hashes
		return g.one("sha256:"+g.pick(hexC, 64), g.pick(hexC, 40), "commit "+g.pick(hexC, 40))
	case 2: // order numbers
		return g.one("ORD-", "INV-", "PO#") + fmt.Sprintf("%d-%06d", 2020+g.r.IntN(7), g.r.IntN(1e6))
	case 3: // ISBN-13
		return "ISBN 978-" + g.pick(digitsC, 1) + "-" + g.pick(digitsC, 3) + "-" + g.pick(digitsC, 5) + "-" + g.pick(digitsC, 1)
	case 4: // timestamps
		return g.one(fmt.Sprintf("2026-%02d-%02dT%02d:15:00Z", 1+g.r.IntN(12), 1+g.r.IntN(28), g.r.IntN(24)), fmt.Sprintf("%d", 1700000000000+g.r.IntN(1e11)), fmt.Sprintf("%d", 1700000000+g.r.IntN(1e8)))
	case 5: // versions and addresses
		return g.one(fmt.Sprintf("v%d.%d.%d", g.r.IntN(3), g.r.IntN(30), g.r.IntN(30)), fmt.Sprintf("10.%d.%d.%d:8080", g.r.IntN(255), g.r.IntN(255), g.r.IntN(255)), fmt.Sprintf("go1.%d.%d", g.r.IntN(27), g.r.IntN(9)))
	case 6: // Luhn-valid numbers outside the issuers' ranges
		for {
			body := g.one("11", "19", "7", "84", "89", "91", "0") + g.pick(digitsC, 13)
			return body + string(luhnDigit(body))
		}
	case 7: // Luhn-valid in range, wrong length
		body := "4" + g.pick(digitsC, 13)
		return body + string(luhnDigit(body))
	case 8: // SSN-shaped, invalid
		return g.one("000", "666", fmt.Sprintf("9%02d", g.r.IntN(100))) + "-" + fmt.Sprintf("%02d", 1+g.r.IntN(98)) + "-" + g.pick(digitsC, 4)
	case 9:
		return g.nxx() + "-00-" + g.pick(digitsC, 4) + " and " + g.nxx() + "-12-0000"
	case 10: // 9 digits without a context word
		return "id " + g.pick("12345678", 1) + g.pick(digitsC, 8)
	case 11: // base64 blobs
		return base64.StdEncoding.EncodeToString([]byte(g.pick(alnum+"\x00\x01\xff", 30+g.r.IntN(60))))
	case 12: // emails in code
		return g.one("user@example", "@Override", "@Autowired private Foo foo;", "icon@2x.png", "lodash@4.17.21", "npm i react@18.2.0", "@media (max-width: 600px)", "a@b", "git@github", "foo@bar.")
	case 13: // prefixes followed by words
		return g.one("sk-force-push-over-main", "ghp_not_a_token", "AKIA-prod-db", "xoxb-deploy-now", "glpat-short", "SG.hello.world", "npm_install_done", "eyJhbGci only")
	case 14: // phone-shaped numbers that are not
		return g.one("123-456-7890", "000-345-6789", "(123) 456-7890", "+0 123 456", "+999 123 456 7890", "1-800", "+12")
	case 15: // dates without a birth
		return "deployed on " + g.date()
	case 16: // prices and quantities
		return fmt.Sprintf("$%d,%03d.%02d for %d items", g.r.IntN(100), g.r.IntN(1000), g.r.IntN(100), g.r.IntN(50))
	case 17: // IBAN-shaped with a bad check
		v := g.iban()
		v = strings.ReplaceAll(v, " ", "")
		return v[:2] + fmt.Sprintf("%02d", (int(v[2]-'0')*10+int(v[3]-'0')+1+g.r.IntN(90))%100) + v[4:]
	case 18: // phone numbers in lists of numbers
		return fmt.Sprintf("%d %d %d %d %d %d", g.r.IntN(1000), g.r.IntN(1000), g.r.IntN(10000), g.r.IntN(100), g.r.IntN(1000), g.r.IntN(100))
	case 19: // words after a secret's name
		return g.one("password=hunter2", "password: changeme", "secret: ${DB_SECRET}", "api_key=<your key here>", "token: xxxxxxxxxxxx", "password=correct-horse-battery-staple", "the secret is out")
	case 20: // card numbers with mixed separators or in longer runs
		d := g.cardNumber()
		return d[:4] + " " + d[4:8] + "-" + d[8:12] + " " + d[12:] + " and x" + d + " and " + d + "123456"
	case 21: // coordinates and measurements
		return fmt.Sprintf("lat %d.%06d, lon -%d.%06d, 1920x1080", g.r.IntN(90), g.r.IntN(1e6), g.r.IntN(180), g.r.IntN(1e6))
	case 22: // paths and URLs
		return g.one("/var/lib/docker/overlay2/"+g.pick(hexC, 64)+"/diff", "https://example.com/u/"+g.pick(alnum, 20)+"/profile", "s3://bucket/2026/01/15/part-00001.parquet")
	case 23: // JWT-shaped, not a JWT
		return "eyJhbGci.eyJzdWIi." + g.pick(b64url, 40)
	case 24: // AWS-like upper-case ids of the wrong length
		return "AKIA" + g.pick(upperD, 12) + " and ARN arn:aws:iam::" + g.pick(digitsC, 12) + ":role/deploy"
	}
	return g.one("hello world", "ls -la /tmp && echo done", "Ünïcödé 日本語 🎉", "SELECT * FROM users WHERE id = 42")
}

// corpus is the labelled corpus: per kind positives, and hard negatives.
func corpus(seed uint64, perKind, negatives int) []sample {
	g := &corpusGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	var out []sample
	for k := range numPII {
		for range perKind {
			out = append(out, g.positive(k))
		}
	}
	for range negatives {
		out = append(out, sample{doc: docOf(g.negative())})
	}
	return out
}

// score is the precision and recall of one kind.
type score struct{ tp, fp, fn int }

func (s score) precision() float64 {
	if s.tp+s.fp == 0 {
		return 1
	}
	return float64(s.tp) / float64(s.tp+s.fp)
}

func (s score) recall() float64 {
	if s.tp+s.fn == 0 {
		return 1
	}
	return float64(s.tp) / float64(s.tp+s.fn)
}

// evaluate scans the corpus: a finding is a true positive when its kind
// is a labelled value's and its text is that value (decoded); any other
// finding is a false positive; a labelled value not found is a false
// negative. The first misses and false alarms per kind are returned as
// examples.
func evaluate(s *Scanner, samples []sample) ([numKinds]score, [numKinds][]string) {
	var sc [numKinds]score
	var ex [numKinds][]string
	note := func(k Kind, what string) {
		if len(ex[k]) < 5 {
			ex[k] = append(ex[k], what)
		}
	}
	for _, smp := range samples {
		fs, err := s.Scan([]byte(smp.doc), nil)
		if err != nil {
			panic(err)
		}
		texts := findingTexts([]byte(smp.doc), fs)
		matched := make([]bool, len(smp.want))
		for i, f := range fs {
			ok := false
			for j, w := range smp.want {
				if !matched[j] && w.kind == f.Kind && texts[i] == w.value {
					matched[j], ok = true, true
					break
				}
			}
			if ok {
				sc[f.Kind].tp++
			} else {
				sc[f.Kind].fp++
				note(f.Kind, fmt.Sprintf("false %s (%s) %q in %s", f.Kind, f.Rule, texts[i], smp.doc))
			}
		}
		for j, w := range smp.want {
			if !matched[j] {
				sc[w.kind].fn++
				note(w.kind, fmt.Sprintf("missed %s %q in %s", w.kind, w.value, smp.doc))
			}
		}
	}
	return sc, ex
}

// findingTexts returns the text of each finding (its decoded string or
// number's bytes at [Start, End)).
func findingTexts(doc []byte, fs []Finding) []string {
	texts := make([]string, len(fs))
	for i, f := range fs {
		texts[i] = textAt(doc, f)
	}
	return texts
}

// textAt is the decoded text of f in doc.
func textAt(doc []byte, f Finding) string {
	cur := doc
	paths := append([]string{f.Path}, f.Nested...)
	var got string
	for lvl, p := range paths {
		var hit []byte
		_ = Walk(cur, func(s *String) error {
			if string(s.Path) == p && s.Key == (f.Key && lvl == len(paths)-1) && hit == nil {
				hit = append([]byte(nil), s.Decoded...)
			}
			return nil
		})
		cur = hit
	}
	if f.End <= len(cur) {
		got = string(cur[f.Start:f.End])
	}
	return got
}

// corpusTargets are the floors TestCorpus holds the scanner to.
var corpusTargets = [numKinds]struct{ precision, recall float64 }{
	KindCredential: {0.99, 0.99},
	KindCard:       {0.99, 0.99},
	KindSSN:        {0.99, 0.99},
	KindIBAN:       {0.99, 0.99},
	KindEmail:      {0.95, 0.95},
	KindPhone:      {0.95, 0.95},
	KindDOB:        {0.95, 0.95},
}

// TestCorpus prints precision and recall per kind on the generated corpus
// (seed 1: 1,000 positives per kind, 10,000 hard negatives) and holds
// them to corpusTargets. Run with -v to see the table.
func TestCorpus(t *testing.T) {
	samples := corpus(1, 1000, 10000)
	sc, ex := evaluate(New(nil), samples)
	t.Logf("%-10s %6s %6s %6s %9s %7s", "kind", "tp", "fp", "fn", "precision", "recall")
	for k := range numPII {
		s := sc[k]
		t.Logf("%-10s %6d %6d %6d %9.4f %7.4f", k, s.tp, s.fp, s.fn, s.precision(), s.recall())
	}
	for k := range numPII {
		for _, e := range ex[k] {
			t.Logf("%s: %.200s", k, e)
		}
	}
	for k := range numPII {
		s, want := sc[k], corpusTargets[k]
		if s.precision() < want.precision || s.recall() < want.recall {
			t.Errorf("%s: precision %.4f recall %.4f, want at least %.2f and %.2f; e.g.\n  %s",
				k, s.precision(), s.recall(), want.precision, want.recall, strings.Join(ex[k], "\n  "))
		}
	}
}

// BenchmarkCorpus is the quality measure as a benchmark command: it scans
// the corpus of TestCorpus (the same seed) and reports, per kind, its
// precision and recall as metrics, besides the time per corpus; then the
// share of the phone library's example numbers found, by format, and how
// many of cleanTexts get a finding (0 held by TestCardsClean and
// TestPhoneFormats). The card brands' ranges and published test numbers
// are held whole by TestCardBrandRanges and TestPublishedTestCards.
//
//	go test -run '^$' -bench Corpus -benchtime 1x ./shared/scan
func BenchmarkCorpus(b *testing.B) {
	samples := corpus(1, 1000, 10000)
	s := New(nil)
	var sc [numKinds]score
	for b.Loop() {
		sc, _ = evaluate(s, samples)
	}
	for k := range numPII {
		b.ReportMetric(sc[k].precision(), k.String()+"-precision")
		b.ReportMetric(sc[k].recall(), k.String()+"-recall")
	}
	// The sets we did not write: the library's example phone numbers (the
	// share found, by format) and the texts that must stay unchanged.
	found, total, _ := phoneExampleScore(s)
	for _, f := range []string{"international", "e164", "national"} {
		b.ReportMetric(float64(found[f])/float64(total[f]), "phone-examples-"+f+"-recall")
	}
	changed := 0
	for _, c := range cleanTexts {
		if len(s.ScanString(c, nil)) > 0 {
			changed++
		}
	}
	b.ReportMetric(float64(changed), "clean-texts-changed")
}
