package wiring

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/seal"
)

// EnvPublicURL is the gateway's URL as a person's browser reaches it
// (https://gw.example.com): the links that make connections and the
// redirect URI registered at authorization servers
// (URL/t/TENANT/connect/callback) are built from it. Unset on Lambda,
// servers with auth: oauth cannot be called; `aegis serve` defaults to
// its listening address.
const EnvPublicURL = "AEGIS_PUBLIC_URL"

// EnvConnectionsKMSKey names the symmetric KMS key that seals
// connections' tokens on Lambda (envelope encryption, shared/seal).
const EnvConnectionsKMSKey = "AEGIS_CONNECTIONS_KMS_KEY_ID"

// localTokensPurpose is what the local key-encryption key is derived for
// from the audit key file (auditchain.Ed25519Signer.DeriveKey).
const localTokensPurpose = "connection tokens"

// LocalKeyring is `aegis serve`'s keyring for connection tokens: a key
// derived from its audit key file's seed.
func LocalKeyring(s *auditchain.Ed25519Signer) (seal.Keyring, error) {
	kek, err := s.DeriveKey(localTokensPurpose)
	if err != nil {
		return nil, err
	}
	defer clear(kek)
	return seal.NewLocal(kek)
}

// Connections builds the connection broker over b, sealing with kr, its
// client secrets resolved by secrets, calling out with hc. publicURL ""
// builds none (nil, nil).
func Connections(b backend.Backend, kr seal.Keyring, publicURL string, secrets connect.Secrets, hc *http.Client, local bool, log *slog.Logger) (*connect.Broker, error) {
	if publicURL == "" {
		log.Info("connections are off: no " + EnvPublicURL + "; servers with auth: oauth cannot be called")
		return nil, nil
	}
	return connect.New(connect.Options{Store: b, Keyring: kr, Registry: b, Secrets: secrets, PublicURL: publicURL, HTTP: hc, Local: local, Logger: log, Audit: b})
}

// lambdaKeyring is the KMS keyring of EnvConnectionsKMSKey, its client
// made on first use (the one the audit checkpoints' signer uses); nil
// when the variable is unset.
func lambdaKeyring(getenv func(string) string, a *lazyAWS) seal.Keyring {
	id := getenv(EnvConnectionsKMSKey)
	if id == "" {
		return nil
	}
	return seal.NewKMS(a.kms(), id)
}

func (l lazyKMS) GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	c, err := l.c()
	if err != nil {
		return nil, err
	}
	return c.GenerateDataKey(ctx, in, opts...)
}

func (l lazyKMS) Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	c, err := l.c()
	if err != nil {
		return nil, err
	}
	return c.Decrypt(ctx, in, opts...)
}

var _ seal.KMSAPI = lazyKMS{}
