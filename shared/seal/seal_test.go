package seal_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/seal"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// localKeyring is the keyring `aegis serve` uses: derived from a fresh
// audit key file.
func localKeyring(t *testing.T) *seal.Local {
	t.Helper()
	s, err := auditchain.LoadOrCreateKey(filepath.Join(t.TempDir(), "audit.key"))
	if err != nil {
		t.Fatal(err)
	}
	kek, err := s.DeriveKey("connection tokens")
	if err != nil {
		t.Fatal(err)
	}
	kr, err := seal.NewLocal(kek)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

func kmsKeyring(t *testing.T) seal.Keyring {
	t.Helper()
	c := kms.New(kms.Options{Region: "us-east-1", BaseEndpoint: aws.String(dynamotest.Endpoint(t)),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	key, err := c.CreateKey(context.Background(), &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	return seal.NewKMS(c, aws.ToString(key.KeyMetadata.Arn))
}

// TestSealOpen: each keyring opens what it sealed for the same owner,
// and nothing else: another owner's binding, another key, a flipped bit.
func TestSealOpen(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kr, other func(*testing.T) seal.Keyring
	}{
		{"local", func(t *testing.T) seal.Keyring { return localKeyring(t) }, func(t *testing.T) seal.Keyring { return localKeyring(t) }},
		{"kms", kmsKeyring, kmsKeyring},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			kr := tc.kr(t)
			secret := []byte(`{"access_token":"at-secret-1","refresh_token":"rt-secret-1"}`)
			own := seal.Bind{"tenant": "acme", "caller": "alice", "server": "docs"}
			sealed, err := seal.Seal(ctx, kr, secret, own)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(sealed, []byte("secret")) {
				t.Fatal("the sealed value shows its plaintext")
			}
			got, err := seal.Open(ctx, kr, sealed, seal.Bind{"server": "docs", "caller": "alice", "tenant": "acme"})
			if err != nil || !bytes.Equal(got, secret) {
				t.Fatalf("Open = %q, %v", got, err)
			}
			again, _ := seal.Seal(ctx, kr, secret, own)
			if bytes.Equal(again, sealed) {
				t.Fatal("two seals of one value are equal: no fresh data key or nonce")
			}
			for name, b := range map[string]seal.Bind{
				"another caller": {"tenant": "acme", "caller": "bob", "server": "docs"},
				"another tenant": {"tenant": "evil", "caller": "alice", "server": "docs"},
				"another server": {"tenant": "acme", "caller": "alice", "server": "mail"},
			} {
				if _, err := seal.Open(ctx, kr, sealed, b); !errors.Is(err, seal.ErrOpen) {
					t.Errorf("Open for %s = %v; want ErrOpen", name, err)
				}
			}
			if _, err := seal.Open(ctx, tc.other(t), sealed, own); err == nil {
				t.Error("another key opened the value")
			}
			flipped := bytes.Clone(sealed)
			flipped[len(flipped)-1] ^= 1
			if _, err := seal.Open(ctx, kr, flipped, own); !errors.Is(err, seal.ErrOpen) {
				t.Errorf("Open(flipped) = %v; want ErrOpen", err)
			}
			for _, bad := range [][]byte{nil, {2, 0, 0}, {1, 0xff, 0xff, 1}} {
				if _, err := seal.Open(ctx, kr, bad, own); !errors.Is(err, seal.ErrOpen) {
					t.Errorf("Open(%x) = %v; want ErrOpen", bad, err)
				}
			}
		})
	}
}
