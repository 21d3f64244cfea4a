// Package seal encrypts small secrets at rest with envelope encryption:
// each sealed value has its own random 256-bit data key (AES-256-GCM),
// and the data key is stored wrapped by a key-encryption key that never
// leaves its keyring: AWS KMS on Lambda (GenerateDataKey / Decrypt), a
// local key under `aegis serve` (derived from the audit key file,
// shared/auditchain). Every sealed value is bound to its owner (Bind):
// the binding is the AES-GCM additional data and, with KMS, the
// encryption context, so a value copied to another owner's record does
// not open. Errors never carry a secret.
package seal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// Bind names the owner a sealed value belongs to (tenant, caller, ...).
// Keys and values are plain strings; the same Bind opens what it sealed.
type Bind map[string]string

// text is b in one canonical form: sorted "k=v" lines.
func (b Bind) text() []byte {
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var s strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&s, "%q=%q\n", k, b[k])
	}
	return []byte(s.String())
}

// Keyring makes and unwraps data keys. Implementations: Local, KMS.
type Keyring interface {
	// NewDataKey returns a fresh 32-byte data key and its wrapped form,
	// bound to b.
	NewDataKey(ctx context.Context, b Bind) (plain, wrapped []byte, err error)
	// Unwrap returns the data key wrapped (by NewDataKey with the same b).
	Unwrap(ctx context.Context, wrapped []byte, b Bind) ([]byte, error)
}

// ErrOpen is returned (wrapped) when a sealed value does not open: it is
// damaged, bound to another owner, or sealed under another key.
var ErrOpen = errors.New("seal: value does not open")

// version is the first byte of a sealed value.
const version = 1

// maxWrapped bounds a wrapped data key (a KMS ciphertext blob is under
// 256 bytes).
const maxWrapped = 1024

// Seal encrypts plain for the owner b under a fresh data key from kr:
// version, the wrapped key's length and bytes, the nonce, the ciphertext.
func Seal(ctx context.Context, kr Keyring, plain []byte, b Bind) ([]byte, error) {
	key, wrapped, err := kr.NewDataKey(ctx, b)
	if err != nil {
		return nil, err
	}
	if len(wrapped) > maxWrapped {
		return nil, fmt.Errorf("seal: a wrapped data key of %d bytes", len(wrapped))
	}
	aead, err := gcm(key)
	clear(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 3+len(wrapped)+aead.NonceSize()+len(plain)+aead.Overhead())
	out = append(out, version)
	out = binary.BigEndian.AppendUint16(out, uint16(len(wrapped)))
	out = append(out, wrapped...)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plain, b.text()), nil
}

// Open decrypts what Seal made for the owner b.
func Open(ctx context.Context, kr Keyring, sealed []byte, b Bind) ([]byte, error) {
	if len(sealed) < 3 || sealed[0] != version {
		return nil, fmt.Errorf("%w: unknown format", ErrOpen)
	}
	n := int(binary.BigEndian.Uint16(sealed[1:3]))
	rest := sealed[3:]
	if n > len(rest) {
		return nil, fmt.Errorf("%w: truncated", ErrOpen)
	}
	key, err := kr.Unwrap(ctx, rest[:n], b)
	if err != nil {
		return nil, err
	}
	aead, err := gcm(key)
	clear(key)
	if err != nil {
		return nil, err
	}
	rest = rest[n:]
	if len(rest) < aead.NonceSize() {
		return nil, fmt.Errorf("%w: truncated", ErrOpen)
	}
	plain, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], b.text())
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

func gcm(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("seal: a %d-byte key; want 32", len(key))
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(blk)
}

// Local wraps data keys with a local 256-bit key-encryption key
// (AES-256-GCM, the binding as additional data): `aegis serve`'s keyring.
type Local struct{ kek cipher.AEAD }

// NewLocal returns the keyring of the 32-byte key kek.
func NewLocal(kek []byte) (*Local, error) {
	a, err := gcm(kek)
	if err != nil {
		return nil, err
	}
	return &Local{kek: a}, nil
}

// NewDataKey implements Keyring.
func (l *Local) NewDataKey(_ context.Context, b Bind) ([]byte, []byte, error) {
	key := make([]byte, 32)
	nonce := make([]byte, l.kek.NonceSize())
	if _, err := rand.Read(key); err != nil {
		return nil, nil, err
	}
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, err
	}
	return key, l.kek.Seal(nonce, nonce, key, b.text()), nil
}

// Unwrap implements Keyring.
func (l *Local) Unwrap(_ context.Context, wrapped []byte, b Bind) ([]byte, error) {
	ns := l.kek.NonceSize()
	if len(wrapped) < ns {
		return nil, fmt.Errorf("%w: truncated key", ErrOpen)
	}
	key, err := l.kek.Open(nil, wrapped[:ns], wrapped[ns:], b.text())
	if err != nil {
		return nil, ErrOpen
	}
	return key, nil
}

// KMSAPI is the part of the KMS client the KMS keyring uses.
type KMSAPI interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, optFns ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, optFns ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// KMS wraps data keys with a symmetric AWS KMS key: GenerateDataKey
// (AES_256) to seal, Decrypt to open, the binding as the encryption
// context (so CloudTrail shows whose value was opened, and a key policy
// may condition on it).
type KMS struct {
	c     KMSAPI
	keyID string
}

// NewKMS returns the keyring of the KMS key keyID (an id, ARN or alias).
func NewKMS(c KMSAPI, keyID string) *KMS { return &KMS{c: c, keyID: keyID} }

// NewDataKey implements Keyring.
func (k *KMS) NewDataKey(ctx context.Context, b Bind) ([]byte, []byte, error) {
	out, err := k.c.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: aws.String(k.keyID), KeySpec: types.DataKeySpecAes256, EncryptionContext: b})
	if err != nil {
		return nil, nil, fmt.Errorf("seal: KMS GenerateDataKey: %w", err)
	}
	return out.Plaintext, out.CiphertextBlob, nil
}

// Unwrap implements Keyring.
func (k *KMS) Unwrap(ctx context.Context, wrapped []byte, b Bind) ([]byte, error) {
	out, err := k.c.Decrypt(ctx, &kms.DecryptInput{KeyId: aws.String(k.keyID), CiphertextBlob: wrapped, EncryptionContext: b})
	if err != nil {
		var inv *types.InvalidCiphertextException
		if errors.As(err, &inv) {
			return nil, ErrOpen
		}
		return nil, fmt.Errorf("seal: KMS Decrypt: %w", err)
	}
	return out.Plaintext, nil
}

var (
	_ Keyring = (*Local)(nil)
	_ Keyring = (*KMS)(nil)
)
