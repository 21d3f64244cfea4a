package approval

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Masked replaces a sensitive value in the params an approver sees.
const Masked = "[masked]"

// sensitiveKeys are object member names whose values are never shown
// (compared lower-case, with '-' and '_' removed).
var sensitiveKeys = []string{
	"password", "passwd", "pwd", "secret", "token", "apikey", "accesskey",
	"authorization", "auth", "credential", "credentials", "privatekey",
	"clientsecret", "cookie", "session", "ssn", "cardnumber", "cvv", "cvc", "pin",
}

// secretPrefixes start well-known credential formats.
var secretPrefixes = []string{
	"aegis_", "sk-", "sk_live_", "sk_test_", "rk_live_", "ghp_", "gho_", "ghu_", "ghs_", "github_pat_",
	"xoxb-", "xoxp-", "xoxa-", "AKIA", "ASIA", "AIza", "glpat-", "Bearer ", "Basic ", "eyJ",
	"-----BEGIN",
}

// Mask returns the JSON args with sensitive values replaced by Masked:
// values of members with sensitive names (password, token, api_key, ...),
// strings in well-known credential formats, and strings holding a
// Luhn-valid card number or an SSN. Keys come out sorted. Args that are not
// JSON come back as the JSON string "[unreadable]"; absent args as nil.
func Mask(args json.RawMessage) []byte {
	if len(args) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return []byte(`"[unreadable]"`)
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(mask(v)); err != nil {
		return []byte(`"[unreadable]"`)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

func mask(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if sensitiveName(k) {
				t[k] = Masked
				continue
			}
			t[k] = mask(val)
		}
		return t
	case []any:
		for i := range t {
			t[i] = mask(t[i])
		}
		return t
	case string:
		if sensitiveString(t) {
			return Masked
		}
	}
	return v
}

func sensitiveName(k string) bool {
	n := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(k))
	for _, s := range sensitiveKeys {
		if n == s || strings.HasSuffix(n, s) && s != "pin" && s != "auth" && s != "session" {
			return true
		}
	}
	return false
}

func sensitiveString(s string) bool {
	for _, p := range secretPrefixes {
		if strings.HasPrefix(s, p) && len(s) >= len(p)+8 {
			return true
		}
	}
	return hasCardNumber(s) || hasSSN(s)
}

// hasCardNumber finds 13 to 19 digits (spaces or dashes between them
// allowed) passing the Luhn check.
func hasCardNumber(s string) bool {
	digits := make([]byte, 0, 19)
	flush := func() bool {
		ok := len(digits) >= 13 && len(digits) <= 19 && luhn(digits)
		digits = digits[:0]
		return ok
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits = append(digits, c)
			if len(digits) > 19 {
				digits = digits[:0]
			}
		case (c == ' ' || c == '-') && len(digits) > 0:
		default:
			if flush() {
				return true
			}
		}
	}
	return flush()
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

// hasSSN finds NNN-NN-NNNN not inside a longer run of digits.
func hasSSN(s string) bool {
	isD := func(i int) bool { return i >= 0 && i < len(s) && s[i] >= '0' && s[i] <= '9' }
	for i := 0; i+11 <= len(s); i++ {
		if isD(i-1) || isD(i+11) {
			continue
		}
		ok := true
		for j := 0; j < 11; j++ {
			if j == 3 || j == 6 {
				ok = ok && s[i+j] == '-'
			} else {
				ok = ok && isD(i+j)
			}
		}
		if ok && s[i:i+3] != "000" && s[i:i+3] != "666" && s[i] != '9' {
			return true
		}
	}
	return false
}
