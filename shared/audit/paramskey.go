package audit

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ParamsKeySize is the length of a params key's secret: 32 bytes from
// crypto/rand, the HMAC-SHA-256 block's worth of entropy and more.
const ParamsKeySize = 32

// ParamsHashPrefix starts every params_hash: the algorithm, then the key
// id, then the hex HMAC: "hmac-sha256:<id>:<64 hex>" (docs/design/params-hash.md).
const ParamsHashPrefix = "hmac-sha256:"

// paramsKeyIDLen is the length of a key id: 16 lower-case hex digits.
const paramsKeyIDLen = 16

// ParamsKey is the deployment secret params hashes are keyed with, so
// that an audit record's params_hash cannot be used to guess low-entropy
// arguments (issue 16, item 11). Its id is derived from the secret (the
// first 8 bytes of HMAC-SHA-256(secret, "aegis params key id"), in hex), so
// a boundary that holds only the secret (aegis wrap's key file) names it
// as the store does.
//
// The secret is never printed: String, GoString, LogValue and MarshalJSON
// show only the id, so a key that reaches a log line, an error or a
// record by mistake shows nothing secret. Secret hands the bytes to a
// store. The zero ParamsKey is not a key (IsZero); Hash on it returns "",
// which no record accepts (Validate). A ParamsKey is immutable and safe
// for concurrent use.
type ParamsKey struct {
	id     string
	secret string // string: immutable, copied by value safely
}

// NewParamsKey returns the key whose secret is secret (ParamsKeySize
// bytes). The error never holds the secret.
func NewParamsKey(secret []byte) (ParamsKey, error) {
	if len(secret) != ParamsKeySize {
		return ParamsKey{}, fmt.Errorf("audit: a params key is %d bytes, not %d", ParamsKeySize, len(secret))
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("aegis params key id"))
	return ParamsKey{id: hex.EncodeToString(m.Sum(nil)[:paramsKeyIDLen/2]), secret: string(secret)}, nil
}

// GenerateParamsKey returns a new key with a secret from crypto/rand.
func GenerateParamsKey() (ParamsKey, error) {
	b := make([]byte, ParamsKeySize)
	if _, err := rand.Read(b); err != nil {
		return ParamsKey{}, fmt.Errorf("audit: no randomness for a params key: %w", err)
	}
	return NewParamsKey(b)
}

// ParseParamsKey reads a secret written by FormatSecret (64 hex digits,
// surrounding white space ignored).
func ParseParamsKey(text string) (ParamsKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != ParamsKeySize {
		return ParamsKey{}, fmt.Errorf("audit: a params key is written as %d hex digits", 2*ParamsKeySize)
	}
	return NewParamsKey(b)
}

// ID is the key's id, 16 lower-case hex digits ("" for the zero key).
func (k ParamsKey) ID() string { return k.id }

// IsZero reports whether k is the zero ParamsKey, which is no key.
func (k ParamsKey) IsZero() bool { return k.secret == "" }

// Secret returns a copy of the secret, for a store or a key file only.
func (k ParamsKey) Secret() []byte { return []byte(k.secret) }

// FormatSecret is the secret as a key file holds it: 64 hex digits.
func (k ParamsKey) FormatSecret() string { return hex.EncodeToString([]byte(k.secret)) }

// Hash is a record's params_hash for raw, the arguments member of a
// tools/call's params (nil when absent, hashed as null):
// "hmac-sha256:<id>:<hex HMAC-SHA-256 of the canonical form of raw>". Both
// boundaries pass it the same bytes, so with the same key one call has one
// params_hash whichever boundary recorded it, however the client spaced
// or ordered it. raw that is not JSON (a line wrap could not parse) is
// hashed byte for byte; no canonical form equals such bytes. The zero key
// hashes nothing: "".
func (k ParamsKey) Hash(raw json.RawMessage) string {
	if k.IsZero() {
		return ""
	}
	c, err := Canonical(raw)
	if err != nil {
		c = raw
	}
	m, pool := k.mac()
	m.Write(c)
	var sum [sha256.Size]byte
	m.Sum(sum[:0])
	if pool != nil {
		m.Reset()
		pool.Put(m)
	}
	var buf [len(ParamsHashPrefix) + paramsKeyIDLen + 1 + 2*sha256.Size]byte
	b := append(buf[:0], ParamsHashPrefix...)
	b = append(b, k.id...)
	b = append(b, ':')
	b = hex.AppendEncode(b, sum[:])
	return string(b)
}

// Keyed HMAC states, per secret: keying one (hmac.New: two SHA-256
// blocks and its allocations) cost about 2% of the gateway's CPU per call
// (docs/performance.md). A process holds one key, two while it rotates;
// past maxMacPools secrets a key is keyed for each hash again.
var (
	macPools sync.Map // secret → *sync.Pool of keyed states
	macCount atomic.Int32
)

const maxMacPools = 8

// mac is an HMAC-SHA-256 state keyed with k's secret, and the pool to
// give it back to after a Reset (nil: none, drop it).
func (k ParamsKey) mac() (hash.Hash, *sync.Pool) {
	p, ok := macPools.Load(k.secret)
	if !ok {
		if macCount.Load() >= maxMacPools {
			return hmac.New(sha256.New, []byte(k.secret)), nil
		}
		secret := []byte(k.secret)
		var loaded bool
		p, loaded = macPools.LoadOrStore(k.secret, &sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }})
		if !loaded {
			macCount.Add(1)
		}
	}
	pool := p.(*sync.Pool)
	return pool.Get().(hash.Hash), pool
}

// String implements fmt.Stringer without the secret.
func (k ParamsKey) String() string { return "params key " + or(k.id, "(none)") }

// GoString implements fmt.GoStringer without the secret.
func (k ParamsKey) GoString() string { return k.String() }

// LogValue implements slog.LogValuer without the secret.
func (k ParamsKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON writes the key's id only.
func (k ParamsKey) MarshalJSON() ([]byte, error) { return json.Marshal(map[string]string{"id": k.id}) }

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// IsParamsHash reports whether s is in the params_hash format:
// "hmac-sha256:", a key id of 16 lower-case hex digits, ":", and 64
// lower-case hex digits.
func IsParamsHash(s string) bool {
	rest, ok := strings.CutPrefix(s, ParamsHashPrefix)
	if !ok || len(rest) != paramsKeyIDLen+1+2*sha256.Size || rest[paramsKeyIDLen] != ':' {
		return false
	}
	return lowerHex(rest[:paramsKeyIDLen]) && lowerHex(rest[paramsKeyIDLen+1:])
}

// ParamsHashKeyID returns the key id of a params_hash, "" when s is not
// one.
func ParamsHashKeyID(s string) string {
	if !IsParamsHash(s) {
		return ""
	}
	return s[len(ParamsHashPrefix) : len(ParamsHashPrefix)+paramsKeyIDLen]
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// StoredKey is a params key as the store keeps it: the key, when it was
// made, and when it stopped being current (zero while current).
type StoredKey struct {
	Key     ParamsKey
	Created time.Time
	Retired time.Time
}

// KeyInfo is what operators see of a stored key: never the secret.
type KeyInfo struct {
	ID      string    `json:"id"`
	Current bool      `json:"current"`
	Created time.Time `json:"created"`
	Retired time.Time `json:"retired,omitzero"`
}

// Info is k without its secret.
func (k StoredKey) Info() KeyInfo {
	return KeyInfo{ID: k.Key.ID(), Current: k.Retired.IsZero(), Created: k.Created, Retired: k.Retired}
}

// KeyStore keeps the deployment's params keys: one current key and the
// retired ones (kept so that a verifier can check a record written before
// a rotation; records name their key by id). Both stores implement it
// (shared/backend); shared/storetest holds the contract.
type KeyStore interface {
	// ParamsKeys returns every stored key, the current one first, then
	// the retired ones, newest first; none is not an error.
	ParamsKeys(ctx context.Context) ([]StoredKey, error)
	// InitParamsKey stores k as the current key if there is no key yet,
	// and returns the current key: k, or the one another instance stored
	// first (one write decides; no two instances start with two keys).
	InitParamsKey(ctx context.Context, k StoredKey) (StoredKey, error)
	// RotateParamsKey makes next the current key and retires the current
	// one, whose id must be prev (store.ErrConflict otherwise: another
	// operator rotated first; store.ErrNotFound when there is none).
	RotateParamsKey(ctx context.Context, prev string, next StoredKey, now time.Time) error
}

// ErrNoParamsKey is LoadParamsKey's answer for a store that holds no key
// and may not make one.
var ErrNoParamsKey = errors.New("audit: no params key in the store")

// LoadParamsKey returns the store's current params key, generating and
// storing one (InitParamsKey) when it has none: what every gateway does
// at start. now stamps a new key.
func LoadParamsKey(ctx context.Context, st KeyStore, now time.Time) (ParamsKey, error) {
	keys, err := st.ParamsKeys(ctx)
	if err != nil {
		return ParamsKey{}, err
	}
	if len(keys) > 0 && keys[0].Retired.IsZero() {
		return keys[0].Key, nil
	}
	k, err := GenerateParamsKey()
	if err != nil {
		return ParamsKey{}, err
	}
	cur, err := st.InitParamsKey(ctx, StoredKey{Key: k, Created: now.UTC()})
	if err != nil {
		return ParamsKey{}, err
	}
	return cur.Key, nil
}
