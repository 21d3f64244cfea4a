package scan

import (
	"bytes"
	"encoding/base64"
	"strings"
)

// pemKind says how the decoded body of a PEM private key starts.
type pemKind int

const (
	pemDER     pemKind = iota // one DER SEQUENCE, its length the body's
	pemOpenSSH                // "openssh-key-v1\0"
	pemPGP                    // an OpenPGP secret-key packet
)

// pemLabels are the PEM types of private keys. Certificates, public keys
// and certificate requests are not secrets, and are not found.
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

// pemBlock: a PEM private key, found from the first to the last character
// of its base64 body. The BEGIN and END lines and any headers (Proc-Type,
// DEK-Info, OpenPGP armor headers) are outside the finding. The block must have a
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
	var decBuf [18]byte
	dec := decBuf[:]
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
// contents are at least size bytes long.
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
	// A body shorter than its SEQUENCE says is a truncated key: still key
	// material. One longer is not one DER value.
	return hdr+n >= size
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
