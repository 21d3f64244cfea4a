package upstream

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/textproto"
	"strings"
	"sync"
	"testing"
)

// escapeAll spells every byte of an ASCII s as a \uXXXX escape (upper
// hex digits when upper).
func escapeAll(s string, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		f := `\u%04x`
		if upper {
			f = `\u%04X`
		}
		fmt.Fprintf(&b, f, s[i])
	}
	return b.String()
}

// percentAll percent-encodes every byte of s, upper hex digits for even
// bytes and lower for odd ones.
func percentAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, "%%%02X", s[i])
		} else {
			fmt.Fprintf(&b, "%%%02x", s[i])
		}
	}
	return b.String()
}

// fullyDecoded returns every view of s an agent may decode it to: JSON
// unescaped up to maxJSONDepth times, then percent-decoded, then
// hex-decoded runs.
func fullyDecoded(s string) []string {
	views := []string{s}
	for u, i := s, 0; i < maxJSONDepth; i++ {
		u = unescapeJSON(u)
		views = append(views, u)
	}
	for _, v := range views[:len(views):len(views)] {
		views = append(views, unescapePercent(v, false), unescapePercent(unescapePercent(v, false), false))
	}
	for _, v := range views[:len(views):len(views)] {
		for _, r := range hexRuns(v) {
			for off := 0; off < 2 && off < len(r); off++ {
				h := r[off:]
				if d, err := hex.DecodeString(h[:len(h)-len(h)%2]); err == nil {
					views = append(views, string(d))
				}
			}
		}
	}
	return views
}

func hexRuns(s string) []string {
	var runs []string
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && isHex(s[j]) {
			j++
		}
		if j-i >= 16 {
			runs = append(runs, s[i:j])
		}
		i = max(j, i+1)
	}
	return runs
}

// TestScrubberDecodedSpellings: issue 16 item 1. Each spelling decodes to
// the credential (or to most of it); none may survive, in a JSON answer or
// in a plain string, and a JSON answer stays valid.
func TestScrubberDecodedSpellings(t *testing.T) {
	const tok = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	cred := "Bearer " + tok
	b64 := base64.StdEncoding.EncodeToString([]byte(tok))
	b64url := base64.URLEncoding.EncodeToString([]byte("\xfb\xff" + tok + "\xfe"))
	escOne := func(s string, i int) string { return s[:i] + fmt.Sprintf(`\u%04x`, s[i]) + s[i+1:] }
	tests := []struct {
		name    string
		secret  string
		content string // JSON string content, as it stands in the answer
		plain   string // the same for String, "" to skip
		protect []string
	}{
		{"every byte escaped", cred, escapeAll(cred, false), escapeAll(cred, true), []string{tok}},
		{"every letter escaped, upper hex", cred, escapeAll(cred, true), "", []string{tok}},
		{"one escaped letter", cred, escOne(cred, len(cred)-1), escOne(cred, len(cred)-1), []string{tok}},
		{"one escaped letter in the scheme", cred, escOne(cred, 0), "", []string{cred}},
		{"one escaped digit", cred, escOne(cred, 12), escOne(cred, 12), []string{tok}},
		{"every byte percent-encoded, mixed case", cred, percentAll(cred), percentAll(cred), []string{tok}},
		{"percent-encoded token in a URL", cred, "https://x/cb?t=" + percentAll(tok) + "&y=1", "https://x/cb?t=" + percentAll(tok), []string{tok}},
		{"all but its last two characters", cred, "prefix " + cred[:len(cred)-2] + " end", cred[:len(cred)-2], []string{tok[:len(tok)-2]}},
		{"token without its first two characters", cred, "x" + tok[2:] + "y", tok[2:], []string{tok[2:]}},
		{"hex, lower", cred, hex.EncodeToString([]byte(tok)), hex.EncodeToString([]byte(tok)), []string{tok}},
		{"hex, upper", cred, strings.ToUpper(hex.EncodeToString([]byte(cred))), strings.ToUpper(hex.EncodeToString([]byte(cred))), []string{tok}},
		{"hex, mixed case", cred, mixedCase(hex.EncodeToString([]byte(tok))), mixedCase(hex.EncodeToString([]byte(tok))), []string{tok}},
		{"percent-encoded, + for the space", cred, strings.Replace(percentAll(cred), "%20", "+", 1), strings.Replace(percentAll(cred), "%20", "+", 1), []string{tok}},
		{"hex of most of the token", cred, hex.EncodeToString([]byte(tok[:30])), "", []string{tok[:30]}},
		{"base64 with an escaped letter", cred, escOne(b64, 10), escOne(b64, 10), []string{tok}},
		{"URL-safe base64 with escaped letters", cred, escapeAll(b64url, false), "", []string{tok}},
		{"JSON in JSON, letters escaped", cred, goJSON(`{"auth":"` + escapeAll(cred, false) + `"}`), "", []string{tok}},
		{"JSON in JSON in JSON, letters escaped", cred, goJSON(goJSON(`{"a":"` + escOne(tok, 5) + `"}`)), "", []string{tok}},
		{"percent-encoded, then letters escaped", cred, escapeAll(percentAll(tok), false), "", []string{tok}},
		{"non-ASCII secret, letter escaped", "pässwörd-ünïcode-sécret", `p\u00e4\u0073sw\u00f6rd-\u00fcn\u00efcode-s\u00e9cret`, "", []string{"pässwörd-ünïcode-sécret"}},
		{"surrogate pair and escaped letters", "key-🔑-Zk3pQ9vX2mL8", `\u006bey-\ud83d\udd11-\u005ak3pQ9vX2mL8`, "", []string{"key-🔑-Zk3pQ9vX2mL8"}},
		{"short secret, letter escaped", "abcd1234", `\u0061bcd1234`, `\u0061bcd1234`, []string{"abcd1234"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScrubber(tc.secret)
			doc := `{"content":[{"type":"text","text":"before ` + tc.content + ` after"}],"n":1}`
			if !json.Valid([]byte(doc)) {
				t.Fatalf("test document invalid: %s", doc)
			}
			out := string(s.JSON(json.RawMessage(doc)))
			if !json.Valid([]byte(out)) {
				t.Fatalf("scrubbed JSON invalid: %s", out)
			}
			if l := decodedLeak(out, tc.protect...); l != "" {
				t.Errorf("JSON kept %s", l)
			}
			if !strings.Contains(out, `"n":1`) || !strings.Contains(out, Redacted) {
				t.Errorf("JSON = %s", out)
			}
			if tc.plain != "" {
				got := s.String("detail: " + tc.plain + " end")
				if l := decodedLeak(got, tc.protect...); l != "" {
					t.Errorf("String kept %s: %q", l, got)
				}
			}
		})
	}
}

// decodedLeak is leak, with hex and every \u escape decoded as well, and
// 12 bytes in a row of a value counted.
func decodedLeak(out string, vals ...string) string {
	if l := leak(out, vals...); l != "" {
		return l
	}
	for _, val := range vals {
		n := min(12, len(val))
		for i := 0; i+n <= len(val); i++ {
			for _, v := range fullyDecoded(out) {
				if strings.Contains(v, val[i:i+n]) {
					return fmt.Sprintf("%q (of %q) in %q", val[i:i+n], val, v)
				}
			}
		}
	}
	return ""
}

// TestScrubberSplitItems: a credential split over two content items is
// caught when each piece holds at least runLen bytes of a value.
func TestScrubberSplitItems(t *testing.T) {
	const tok = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	s := NewScrubber("Bearer " + tok)
	for _, cut := range []int{12, 20, 28} {
		doc := `{"content":[{"type":"text","text":"Bearer ` + tok[:cut] + `"},{"type":"text","text":"` + tok[cut:] + `"}]}`
		out := string(s.JSON(json.RawMessage(doc)))
		if !json.Valid([]byte(out)) {
			t.Fatalf("invalid: %s", out)
		}
		if l := decodedLeak(out, tok); l != "" {
			t.Errorf("cut %d: kept %s", cut, l)
		}
	}
}

// TestScrubberDecodedKeepsRest: a string holding an escaped credential is
// re-encoded with the credential replaced, its other text kept.
func TestScrubberDecodedKeepsRest(t *testing.T) {
	const tok = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	s := NewScrubber("Bearer " + tok)
	doc := `{"text":"line \"one\"\n` + escapeAll(tok, false) + ` <b>&amp; two","k":"v"}`
	out := s.JSON(json.RawMessage(doc))
	var v struct{ Text, K string }
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if want := "line \"one\"\n" + Redacted + " <b>&amp; two"; v.Text != want || v.K != "v" {
		t.Errorf("got %q, %q; want %q", v.Text, v.K, want)
	}
}

// TestScrubberDecodedLeavesOtherText: escapes, percent-escapes, hex and
// short pieces of the credential that do not decode to runLen bytes of it
// are left alone, without a copy; clean answers cost no allocation.
func TestScrubberDecodedLeavesOtherText(t *testing.T) {
	const tok = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	s := NewScrubber("Bearer " + tok)
	for _, doc := range []string{
		`{"text":"caf\u00e9 \u0041BC %41%42 \\u0067hp_ 50%","id":"6768705f3136433765"}`,
		`{"text":"` + tok[:11] + ` and ` + tok[20:31] + `","hex":"` + hex.EncodeToString([]byte(tok[:5])) + `"}`,
		`{"text":"` + escapeAll(tok[:11], false) + `"}`,
	} {
		in := json.RawMessage(doc)
		if out := s.JSON(in); &out[0] != &in[0] {
			t.Errorf("changed %s: %s", doc, out)
		}
	}
	if poolDrops() {
		return // the race detector empties sync.Pool at random
	}
	clean := benchAnswer()
	if n := testing.AllocsPerRun(20, func() { s.JSON(clean) }); n > 0 {
		t.Errorf("clean answer: %v allocations", n)
	}
}

// poolDrops reports whether a sync.Pool loses what is put in it (it does
// at random under the race detector).
func poolDrops() bool {
	var p sync.Pool
	for range 100 {
		x := new(int)
		p.Put(x)
		if p.Get() != x {
			return true
		}
	}
	return false
}

// FuzzScrubberDecoded: a valid document stays valid, and a credential
// written into a string with every byte as a \u escape, or
// percent-encoded, is gone once decoded.
func FuzzScrubberDecoded(f *testing.F) {
	f.Add("ghp_16C7e42F292c6912E7710c838347Ae178B4a", `{"a":"x","b":[1,"y"]}`)
	f.Add("Bearer abcdefghijkl", `{"a":"\u0042earer abcdefghijkl","b":"%41"}`)
	f.Add(`we"ird\va/lue+&<>=`, `["\\\\u0077"]`)
	f.Fuzz(func(t *testing.T, secret, doc string) {
		s := NewScrubber(secret)
		if json.Valid([]byte(doc)) {
			if out := s.JSON(json.RawMessage(doc)); !json.Valid(out) {
				t.Fatalf("JSON(%s) = %s: invalid", doc, out)
			}
		}
		v := textproto.TrimString(secret)
		if len(v) < minScrubLen || len(v) > 200 || strings.ContainsAny(v, " \t\r\n") {
			return
		}
		for _, form := range []string{escapeAll(v, false), percentAll(v)} {
			in := `{"a":"x` + form + `y"}`
			out := s.JSON(json.RawMessage(in))
			var got struct{ A string }
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("JSON(%s) = %s: %v", in, out, err)
			}
			if strings.Contains(got.A, v) || strings.Contains(unescapePercent(got.A, false), v) {
				t.Fatalf("JSON(%s) = %s: kept %q", in, out, v)
			}
		}
	})
}

// mixedCase upper-cases every other letter of s.
func mixedCase(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); i += 2 {
		if b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

// BenchmarkScrubDecoded runs the decoded pass on 8 MB answers made to cost
// it the most: every byte escaped, pieces of the credential and of its hex
// over and over, tiny strings with escapes. ns/op over the size stays flat
// from 1 MB to 8 MB (linear work).
func BenchmarkScrubDecoded(b *testing.B) {
	const tok = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	s := NewScrubber("Bearer " + tok)
	const n = 8 << 20
	for _, tc := range []struct{ name, doc string }{
		{"escaped letters", `{"t":"` + strings.Repeat(`\u0067`, n/6) + `"}`},
		{"run over and over", `{"t":"` + strings.Repeat(tok[:30], n/30) + `"}`},
		{"hex over and over", `{"t":"` + strings.Repeat(hex.EncodeToString([]byte(tok[:12])), n/24) + `"}`},
		{"percent signs", `{"t":"` + strings.Repeat(`%25`, n/3) + `"}`},
		{"tiny strings", `[` + strings.Repeat(`"\u0041%41",`, n/12) + `1]`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			doc := json.RawMessage(tc.doc)
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				s.JSON(doc)
			}
		})
	}
}
