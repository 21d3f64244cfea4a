package auditchain

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// LocalKeyName is the key name of local Ed25519 keys in checkpoints.
const LocalKeyName = "aegis-local"

// keyFilePrefix starts the one line of a local key file.
const keyFilePrefix = "AEGIS-AUDIT-ED25519-KEY+"

// EnvKeyFile names the local key file of `aegis serve` and `aegis wrap`
// (default: DefaultKeyFile).
const EnvKeyFile = "AEGIS_AUDIT_KEY_FILE"

// KeyFile is the local key file in force: EnvKeyFile's value, else
// DefaultKeyFile.
func KeyFile(getenv func(string) string) (string, error) {
	if p := getenv(EnvKeyFile); p != "" {
		return p, nil
	}
	return DefaultKeyFile()
}

// DefaultKeyFile is where `aegis serve` and `aegis wrap` keep their
// checkpoint signing key unless told otherwise: aegis/audit-ed25519.key
// under the user's configuration directory ($XDG_CONFIG_HOME or
// ~/.config on Linux).
func DefaultKeyFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("auditchain: no configuration directory for the audit key (%w); pass its file", err)
	}
	return filepath.Join(dir, "aegis", "audit-ed25519.key"), nil
}

// LoadOrCreateKey returns the signer of the Ed25519 key in path, creating
// the key when the file does not exist: the directory with mode 0700, the
// file with 0600 (written once, never overwritten), and beside it
// path+".pub" with the verifier key (0644), which is all `aegis audit
// verify` needs. A key file that its group or others may read or write is
// refused.
func LoadOrCreateKey(path string) (*Ed25519Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("auditchain: audit key: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("auditchain: audit key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("auditchain: audit key %s has mode %04o: others may read it; chmod 600 it (or make a new key and keep the old .pub for verifying)", path, fi.Mode().Perm())
	}
	return parseKeyFile(path, string(b))
}

func parseKeyFile(path, s string) (*Ed25519Signer, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), keyFilePrefix)
	name, b64, ok2 := strings.Cut(rest, "+")
	seed, err := base64.StdEncoding.DecodeString(b64)
	if !ok || !ok2 || err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("auditchain: %s is not an aegis audit key file", path)
	}
	return NewEd25519Signer(name, ed25519.NewKeyFromSeed(seed))
}

func createKey(path string) (*Ed25519Signer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("auditchain: audit key directory: %w", err)
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	s, err := NewEd25519Signer(LocalKeyName, ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return nil, err
	}
	// Written whole to a temporary file, then linked into place: a
	// process that finds the key file never reads a half-written one, and
	// of two processes creating it at once, one key wins.
	f, err := os.CreateTemp(filepath.Dir(path), ".audit-key-*")
	if err != nil {
		return nil, fmt.Errorf("auditchain: audit key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.WriteString(keyFilePrefix + LocalKeyName + "+" + base64.StdEncoding.EncodeToString(seed) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("auditchain: audit key: %w", err)
	}
	vk, _ := s.Verifier(context.Background())
	if err := os.WriteFile(path+".pub", []byte(vk+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("auditchain: audit key's .pub: %w", err)
	}
	return s, nil
}

// KMSAPI is the part of the KMS client the KMS signer uses.
type KMSAPI interface {
	Sign(ctx context.Context, in *kms.SignInput, optFns ...func(*kms.Options)) (*kms.SignOutput, error)
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, optFns ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
}

// KMSSigner signs with an asymmetric AWS KMS key (ECC_NIST_P256,
// SIGN_VERIFY): the private key never leaves KMS. It asks KMS for the
// public key once, on first use (kms:GetPublicKey), and signs each text
// (kms:Sign, ECDSA_SHA_256).
type KMSSigner struct {
	c     KMSAPI
	keyID string
	mu    sync.Mutex
	vk    string
}

// NewKMSSigner signs with keyID (an id, ARN or alias) through c.
func NewKMSSigner(c KMSAPI, keyID string) *KMSSigner { return &KMSSigner{c: c, keyID: keyID} }

// KMSKeyName is the key name of a KMS key's checkpoints: "aegis-kms-"
// and the key's id (the last part of its ARN).
func KMSKeyName(keyARN string) string {
	id := keyARN[strings.LastIndexAny(keyARN, ":/")+1:]
	var b strings.Builder
	b.WriteString("aegis-kms-")
	for _, r := range id {
		if r <= ' ' || r == '+' || r >= 0x7f {
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Verifier implements Signer.
func (s *KMSSigner) Verifier(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.vk != "" {
		return s.vk, nil
	}
	vk, err := KMSVerifier(ctx, s.c, s.keyID)
	if err != nil {
		return "", err
	}
	s.vk = vk
	return vk, nil
}

// KMSVerifier asks KMS for keyID's public key and returns its verifier
// key (`aegis audit key --kms`).
func KMSVerifier(ctx context.Context, c KMSAPI, keyID string) (string, error) {
	out, err := c.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: aws.String(keyID)})
	if err != nil {
		return "", fmt.Errorf("auditchain: KMS GetPublicKey: %w", err)
	}
	// The key's spec is read from its public key (ecdsaVerifier accepts
	// only P-256): not every KMS API answers KeySpec (moto sets only the
	// older CustomerMasterKeySpec).
	if out.KeyUsage != types.KeyUsageTypeSignVerify {
		return "", fmt.Errorf("auditchain: KMS key %s is for %q; want an ECC_NIST_P256 key for SIGN_VERIFY", keyID, out.KeyUsage)
	}
	arn := aws.ToString(out.KeyId)
	if arn == "" {
		arn = keyID
	}
	return ecdsaVerifier(KMSKeyName(arn), out.PublicKey)
}

// MaxKMSMessage is KMS Sign's limit on a RAW message; a checkpoint text
// stays under it (MaxLost bounds its longest part).
const MaxKMSMessage = 4096

// Sign implements Signer. The text goes to KMS as it is (MessageType
// RAW; KMS hashes it with SHA-256), which is what a verifier checks.
func (s *KMSSigner) Sign(ctx context.Context, msg []byte) ([]byte, error) {
	if len(msg) > MaxKMSMessage {
		return nil, fmt.Errorf("auditchain: a %d-byte checkpoint is over KMS's %d-byte message limit", len(msg), MaxKMSMessage)
	}
	out, err := s.c.Sign(ctx, &kms.SignInput{
		KeyId: aws.String(s.keyID), Message: msg, MessageType: types.MessageTypeRaw,
		SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256,
	})
	if err != nil {
		return nil, fmt.Errorf("auditchain: KMS Sign: %w", err)
	}
	return out.Signature, nil
}

var _ Signer = (*KMSSigner)(nil)

// DeriveKey returns a 32-byte key for purpose, derived from the signer's
// Ed25519 seed with HKDF-SHA256 (info "aegis " + purpose): another local
// secret (the connection tokens' key-encryption key, shared/seal) kept in
// the same key file, with the file's rules, and unrelated to the signing
// key for anyone without the seed.
func (s *Ed25519Signer) DeriveKey(purpose string) ([]byte, error) {
	return hkdf.Key(sha256.New, s.key.Seed(), nil, "aegis "+purpose, 32)
}
