package auditchain

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A checkpoint is a signed note in the C2SP signed-note layout: a text
// ending in a newline, a blank line, and one signature line
// "— <key name> <base64(key id (4 bytes) || signature)>". The text is
// ours (docs/design/audit.md, "Checkpoint"):
//
//	aegis.audit/v1 checkpoint
//	tenant <tenant>
//	writer <writer>
//	number <n>                 from 1, per writer
//	size <seq>                 the last record it covers
//	head <hex>                 that record's hash
//	from <RFC 3339>            the earliest record time in its span
//	time <RFC 3339>            when it was made
//	prev <n-1> <size> <head> <hex SHA-256 of the previous checkpoint's text>
//	lost <seq> <hash>          a record of the span whose write failed (0..MaxLost lines)
//	lost-more <count>          lost records past MaxLost (absent when 0)
//
// The span of checkpoint n is the records (prev size, size]. The first
// checkpoint's prev is "0 0 <Genesis> <Genesis>".

// Signature types of signed-note verifier keys.
const (
	sigEd25519 = 0x01 // Ed25519 over the text (local keys)
	sigECDSA   = 0x02 // ECDSA P-256 with SHA-256 over the text, ASN.1 signature (KMS keys)
)

// Signer signs checkpoint texts with a key it cannot hand out.
type Signer interface {
	// Verifier is the public verifier key: "<name>+<hex key id>+<base64(type || public key)>".
	Verifier(ctx context.Context) (string, error)
	// Sign signs msg (the note text).
	Sign(ctx context.Context, msg []byte) ([]byte, error)
}

const notePrefix = "aegis.audit/v1 checkpoint\n"

// MaxLost bounds the lost lines of one checkpoint, which keeps its text
// under KMS's message limit (MaxKMSMessage).
const MaxLost = 32

// body is a checkpoint's text, parsed.
type body struct {
	Tenant, Writer string
	Number, Size   uint64
	Head           string
	From, Time     time.Time
	PrevNumber     uint64
	PrevSize       uint64
	PrevHead       string
	PrevText       string // hex SHA-256 of the previous text
	Lost           []lost
	LostMore       uint64
}

type lost struct {
	Seq  uint64
	Hash string
}

func (b body) text() string {
	var s strings.Builder
	s.WriteString(notePrefix)
	fmt.Fprintf(&s, "tenant %s\nwriter %s\nnumber %d\nsize %d\nhead %s\n", b.Tenant, b.Writer, b.Number, b.Size, b.Head)
	fmt.Fprintf(&s, "from %s\ntime %s\n", b.From.UTC().Format(time.RFC3339Nano), b.Time.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(&s, "prev %d %d %s %s\n", b.PrevNumber, b.PrevSize, b.PrevHead, b.PrevText)
	for _, l := range b.Lost {
		fmt.Fprintf(&s, "lost %d %s\n", l.Seq, l.Hash)
	}
	if b.LostMore > 0 {
		fmt.Fprintf(&s, "lost-more %d\n", b.LostMore)
	}
	return s.String()
}

// textHash is the hex SHA-256 of a checkpoint text (the next one's prev).
func textHash(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:])
}

// parseBody reads a text written by body.text, strictly.
func parseBody(text string) (body, error) {
	var b body
	rest, ok := strings.CutPrefix(text, notePrefix)
	if !ok {
		return b, errors.New("not an aegis audit checkpoint")
	}
	lines := strings.Split(strings.TrimSuffix(rest, "\n"), "\n")
	want := []string{"tenant", "writer", "number", "size", "head", "from", "time", "prev"}
	if len(lines) < len(want) {
		return b, errors.New("checkpoint text is short")
	}
	var err error
	field := func(i int) []string {
		f := strings.Split(lines[i], " ")
		if f[0] != want[i] && err == nil {
			err = fmt.Errorf("line %d: want %q", i+2, want[i])
		}
		return f[1:]
	}
	one := func(i int) string {
		f := field(i)
		if len(f) != 1 && err == nil {
			err = fmt.Errorf("line %d: want one value", i+2)
			return ""
		}
		if len(f) == 0 {
			return ""
		}
		return f[0]
	}
	num := func(s string) uint64 {
		n, e := strconv.ParseUint(s, 10, 64)
		if e != nil && err == nil {
			err = fmt.Errorf("%q is not a number", s)
		}
		return n
	}
	tm := func(s string) time.Time {
		t, e := time.Parse(time.RFC3339Nano, s)
		if e != nil && err == nil {
			err = fmt.Errorf("%q is not a time", s)
		}
		return t
	}
	hash := func(s string) string {
		if _, e := parseHash(s); e != nil && err == nil {
			err = fmt.Errorf("%q is not a hash", s)
		}
		return s
	}
	b.Tenant, b.Writer = one(0), one(1)
	b.Number, b.Size = num(one(2)), num(one(3))
	b.Head = hash(one(4))
	b.From, b.Time = tm(one(5)), tm(one(6))
	if p := field(7); len(p) == 4 {
		b.PrevNumber, b.PrevSize, b.PrevHead, b.PrevText = num(p[0]), num(p[1]), hash(p[2]), hash(p[3])
	} else if err == nil {
		err = errors.New("prev: want number, size, head and text hash")
	}
	for _, l := range lines[len(want):] {
		f := strings.Split(l, " ")
		switch {
		case f[0] == "lost" && len(f) == 3 && len(b.Lost) < MaxLost:
			b.Lost = append(b.Lost, lost{num(f[1]), hash(f[2])})
		case f[0] == "lost-more" && len(f) == 2 && b.LostMore == 0:
			b.LostMore = num(f[1])
		default:
			if err == nil {
				err = fmt.Errorf("unexpected line %q", l)
			}
		}
	}
	if err == nil && (b.Number == 0 || b.PrevNumber != b.Number-1 || b.Size <= b.PrevSize || b.Tenant == "" || b.Writer == "") {
		err = errors.New("inconsistent numbers")
	}
	if err == nil && b.text() != text {
		err = errors.New("not in canonical form")
	}
	return b, err
}

// Verifier checks signatures of one key.
type Verifier struct {
	name string
	id   uint32
	ed   ed25519.PublicKey
	ec   *ecdsa.PublicKey
	text string
}

// String is the verifier key as ParseVerifier reads it.
func (v *Verifier) String() string { return v.text }

// Name is the key's name.
func (v *Verifier) Name() string { return v.name }

// keyID is the signed-note key id: the first 4 bytes of SHA-256 over the
// key name, a newline, the signature type and the public key bytes.
func keyID(name string, typ byte, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', typ})
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil)[:4])
}

// verifierKey is the text of a verifier key.
func verifierKey(name string, typ byte, key []byte) string {
	return fmt.Sprintf("%s+%08x+%s", name, keyID(name, typ, key), base64.StdEncoding.EncodeToString(append([]byte{typ}, key...)))
}

// validName: a key name is non-empty UTF-8 without spaces, '+' or
// control characters.
func validName(name string) bool {
	if name == "" || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == '+' || r == 0x7f {
			return false
		}
	}
	return true
}

// ParseVerifier reads a verifier key "<name>+<hex key id>+<base64(type ||
// public key)>": type 0x01 with a 32-byte Ed25519 key, or 0x02 with a
// P-256 key's DER SubjectPublicKeyInfo (what KMS GetPublicKey returns).
func ParseVerifier(s string) (*Verifier, error) {
	s = strings.TrimSpace(s)
	name, rest, ok1 := strings.Cut(s, "+")
	idHex, b64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !validName(name) || len(idHex) != 8 {
		return nil, errors.New("auditchain: a verifier key is <name>+<8 hex digits>+<base64 key>")
	}
	id, err := strconv.ParseUint(idHex, 16, 32)
	if err != nil {
		return nil, errors.New("auditchain: verifier key id is not hex")
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) < 2 {
		return nil, errors.New("auditchain: verifier key is not base64")
	}
	v := &Verifier{name: name, id: uint32(id), text: s}
	switch raw[0] {
	case sigEd25519:
		if len(raw) != 1+ed25519.PublicKeySize {
			return nil, errors.New("auditchain: Ed25519 verifier key has the wrong length")
		}
		v.ed = ed25519.PublicKey(raw[1:])
	case sigECDSA:
		pk, err := x509.ParsePKIXPublicKey(raw[1:])
		ec, ok := pk.(*ecdsa.PublicKey)
		if err != nil || !ok || ec.Curve.Params().Name != "P-256" {
			return nil, errors.New("auditchain: ECDSA verifier key is not a P-256 public key")
		}
		v.ec = ec
	default:
		return nil, fmt.Errorf("auditchain: verifier key type 0x%02x unknown (want 0x01 Ed25519 or 0x02 ECDSA P-256)", raw[0])
	}
	if keyID(name, raw[0], raw[1:]) != v.id {
		return nil, errors.New("auditchain: verifier key id does not match its key")
	}
	return v, nil
}

func (v *Verifier) verify(msg, sig []byte) bool {
	if v.ed != nil {
		return ed25519.Verify(v.ed, msg, sig)
	}
	d := sha256.Sum256(msg)
	return ecdsa.VerifyASN1(v.ec, d[:], sig)
}

const sigPrefix = "\u2014 "

// signNote signs text with s: text, a blank line, one signature line.
func signNote(ctx context.Context, text string, s Signer) (string, error) {
	vk, err := s.Verifier(ctx)
	if err != nil {
		return "", err
	}
	v, err := ParseVerifier(vk)
	if err != nil {
		return "", err
	}
	sig, err := s.Sign(ctx, []byte(text))
	if err != nil {
		return "", err
	}
	return SignedNote(text, v, sig), nil
}

// Note errors.
var (
	errUnknownKey   = errors.New("signed by no key given")
	errBadSignature = errors.New("signature does not verify")
)

// openNote returns the text of note if one of its signature lines is by
// a key of vs and verifies; errUnknownKey when none is by a known key.
func openNote(note string, vs []*Verifier) (string, error) {
	if !utf8.ValidString(note) || len(note) > 1<<16 {
		return "", errors.New("note is not valid UTF-8 or too long")
	}
	for _, c := range []byte(note) {
		if c < 0x20 && c != '\n' {
			return "", errors.New("note has a control character")
		}
	}
	i := strings.LastIndex(note, "\n\n")
	if i < 0 {
		return "", errors.New("note has no signature block")
	}
	text, sigs := note[:i+1], note[i+2:]
	if !strings.HasSuffix(sigs, "\n") {
		return "", errors.New("note's signature block does not end in a newline")
	}
	known := false
	for _, line := range strings.Split(strings.TrimSuffix(sigs, "\n"), "\n") {
		rest, ok := strings.CutPrefix(line, sigPrefix)
		name, b64, ok2 := strings.Cut(rest, " ")
		raw, err := base64.StdEncoding.DecodeString(b64)
		if !ok || !ok2 || err != nil || len(raw) < 5 {
			return "", fmt.Errorf("malformed signature line %q", line)
		}
		id := binary.BigEndian.Uint32(raw[:4])
		for _, v := range vs {
			if v.name != name || v.id != id {
				continue
			}
			known = true
			if v.verify([]byte(text), raw[4:]) {
				return text, nil
			}
		}
	}
	if known {
		return "", errBadSignature
	}
	return "", errUnknownKey
}

// Ed25519Signer signs with a local Ed25519 key (LoadOrCreateKey).
type Ed25519Signer struct {
	name string
	key  ed25519.PrivateKey
}

// NewEd25519Signer signs with key under the key name name.
func NewEd25519Signer(name string, key ed25519.PrivateKey) (*Ed25519Signer, error) {
	if !validName(name) {
		return nil, fmt.Errorf("auditchain: key name %q: want no spaces, '+' or control characters", name)
	}
	return &Ed25519Signer{name: name, key: key}, nil
}

// Verifier implements Signer.
func (s *Ed25519Signer) Verifier(context.Context) (string, error) {
	return verifierKey(s.name, sigEd25519, s.key.Public().(ed25519.PublicKey)), nil
}

// Sign implements Signer.
func (s *Ed25519Signer) Sign(_ context.Context, msg []byte) ([]byte, error) {
	return ed25519.Sign(s.key, msg), nil
}

var _ Signer = (*Ed25519Signer)(nil)

// ecdsaVerifier is the verifier key of a P-256 key given as DER
// SubjectPublicKeyInfo.
func ecdsaVerifier(name string, spki []byte) (string, error) {
	if !validName(name) {
		return "", fmt.Errorf("auditchain: key name %q: want no spaces, '+' or control characters", name)
	}
	v := verifierKey(name, sigECDSA, spki)
	if _, err := ParseVerifier(v); err != nil {
		return "", err
	}
	return v, nil
}

// SignedNote is text with one signature line by v's key: the form
// checkpoints take. (Writers sign through a Signer; tests use this to
// make notes signed by other keys.)
func SignedNote(text string, v *Verifier, sig []byte) string {
	var id [4]byte
	binary.BigEndian.PutUint32(id[:], v.id)
	return text + "\n" + sigPrefix + v.name + " " + base64.StdEncoding.EncodeToString(append(id[:], sig...)) + "\n"
}
