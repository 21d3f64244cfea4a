package approval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/aegis-gw/aegis/shared/display"
	"github.com/aegis-gw/aegis/shared/scan"
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
//     package scan found (a credential, a card number, an SSN: the kinds
//     that block) is replaced, by a marker naming what it was:
//     MaskedCard, MaskedSSN, MaskedToken or MaskedPEM. The scanner's
//     rules are real formats, each ending where its format ends, and no
//     credential is masked in the host of a URL, so a secret-looking
//     fragment cannot hide a command, a path or a host; when unsure, a
//     value is shown;
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

// detector finds what Mask hides inside strings: the kinds that block a
// message (credentials, cards, SSNs), in the string's own text (Mask
// walks the JSON itself, so one level).
var detector = scan.New(&scan.Options{
	Kinds:    []scan.Kind{scan.KindCredential, scan.KindCard, scan.KindSSN},
	MaxDepth: 1,
})

// marker is the text an approver sees in place of f.
func marker(f scan.Finding) string {
	switch {
	case f.Kind == scan.KindCard:
		return MaskedCard
	case f.Kind == scan.KindSSN:
		return MaskedSSN
	case f.Rule == "pem-private-key":
		return MaskedPEM
	}
	return MaskedToken
}

// maskText returns s with every finding of the scanner replaced by its
// marker and every invisible character spelled out. A credential found
// in the host name or port of a URL (after "scheme://" and any
// "user:password@") is shown, whatever it looks like: an approver must
// see where a call goes. It returns s itself when there is nothing to
// change.
func maskText(s string) string {
	found := detector.ScanString(s, nil)
	var spans []span
	var hosts [][2]int
	if len(found) > 0 && strings.Contains(s, "://") {
		hosts = hostRanges(s)
	}
	for _, f := range found {
		if f.Kind == scan.KindCredential && inHost(hosts, f.Start, f.End) {
			continue
		}
		spans = append(spans, span{f.Start, f.End, marker(f)})
	}
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

// inHost reports whether s[start:end] overlaps one of hosts.
func inHost(hosts [][2]int, start, end int) bool {
	for _, h := range hosts {
		if start < h[1] && h[0] < end {
			return true
		}
	}
	return false
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
		end := start
		for end < len(s) && s[end] > ' ' && s[end] != 0x7F && strings.IndexByte(`/?#\"'<>`+"`", s[end]) < 0 {
			end++
		}
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
