package upstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
)

// Redacted replaces a brokered credential wherever it is found in what comes
// back from an upstream.
const Redacted = "[REDACTED]"

// minScrubLen is the shortest credential value scrubbed. Shorter values
// would redact ordinary text; a credential that short is refused nowhere,
// but it is not a secret worth the name either.
const minScrubLen = 4

// Scrubber removes one credential value from upstream answers in every form
// it may take there: raw, JSON-escaped, URL-encoded (query and path
// escaping) and base64 (standard and URL alphabets, padded or not). The zero
// value removes nothing. A Scrubber is immutable and safe for concurrent use.
type Scrubber struct {
	forms  [][]byte // longest first, so a longer form is replaced before its substrings
	secret string
}

// NewScrubber returns a Scrubber for secret ("" or very short: a no-op).
func NewScrubber(secret string) Scrubber {
	if len(secret) < minScrubLen {
		return Scrubber{}
	}
	seen := map[string]bool{}
	var forms [][]byte
	add := func(s string) {
		if s == "" || seen[s] {
			return
		}
		seen[s] = true
		forms = append(forms, []byte(s))
	}
	esc, _ := json.Marshal(secret)
	jsonForm := string(esc[1 : len(esc)-1])
	add(jsonForm)
	// The raw form is removed from JSON text only when it needs no escaping
	// there (otherwise it cannot appear raw inside a valid JSON string, and
	// replacing it could break the document's structure); error strings are
	// scrubbed with ScrubString, which takes every form.
	if jsonForm == secret {
		add(secret)
	}
	add(url.QueryEscape(secret))
	add(url.PathEscape(secret))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		add(enc.EncodeToString([]byte(secret)))
	}
	// JSON escaping of the URL and base64 forms ('/' and '+' need none,
	// but '<', '>' and '&' do under HTML-safe encoders).
	for _, f := range append([][]byte(nil), forms...) {
		b, _ := json.Marshal(string(f))
		add(string(b[1 : len(b)-1]))
	}
	// Longest first.
	for i := 1; i < len(forms); i++ {
		for j := i; j > 0 && len(forms[j]) > len(forms[j-1]); j-- {
			forms[j], forms[j-1] = forms[j-1], forms[j]
		}
	}
	return Scrubber{forms: forms, secret: secret}
}

// Active reports whether s removes anything.
func (s Scrubber) Active() bool { return len(s.forms) > 0 }

// JSON returns raw with every form of the secret replaced by Redacted. raw
// is not modified; when nothing matches, raw itself is returned (no copy on
// the common path).
func (s Scrubber) JSON(raw json.RawMessage) json.RawMessage {
	if len(s.forms) == 0 || len(raw) == 0 {
		return raw
	}
	out := []byte(raw)
	copied := false
	for _, f := range s.forms {
		if !bytes.Contains(out, f) {
			continue
		}
		if !copied {
			out = bytes.Clone(out)
			copied = true
		}
		out = bytes.ReplaceAll(out, f, []byte(Redacted))
	}
	return out
}

// String removes every form of the secret, the raw one included, from a
// plain string (an error detail).
func (s Scrubber) String(v string) string {
	if len(s.forms) == 0 {
		return v
	}
	v = strings.ReplaceAll(v, s.secret, Redacted)
	for _, f := range s.forms {
		v = strings.ReplaceAll(v, string(f), Redacted)
	}
	return v
}
