package wiring

import (
	"context"
	"log/slog"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/backend"
)

// EnvAuditKMSKey names the asymmetric KMS key (ECC_NIST_P256,
// SIGN_VERIFY) the Lambda functions sign audit checkpoints with;
// template.yaml sets it to the stack's AuditSigningKey. Unset, records are
// still chained and no checkpoint is made (logged at ERROR on every cold
// start): nothing would then show a changed record.
const EnvAuditKMSKey = "AEGIS_AUDIT_KMS_KEY_ID"

// AuditChain returns b with its audit records chained by a new writer of
// kind that signs checkpoints with signer (nil: none, logged at ERROR),
// stored in b, and the writer (Close it at shutdown).
func AuditChain(b backend.Backend, kind string, signer auditchain.Signer, log *slog.Logger) (backend.Backend, *auditchain.Writer, error) {
	if signer == nil {
		log.Error("audit checkpoints are off: no signing key (" + EnvAuditKMSKey + "); records are chained and nothing signs them, so `aegis audit verify` reports them all unsigned")
	}
	w, err := auditchain.New(b, auditchain.Options{Kind: kind, Signer: signer, Checkpoints: b, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return auditchain.Backend(b, w), w, nil
}

// lambdaAuditChain is AuditChain for a Lambda function: the KMS key of
// EnvAuditKMSKey, its client made on the first checkpoint.
func lambdaAuditChain(getenv func(string) string, b backend.Backend, kind string, log *slog.Logger) (backend.Backend, *auditchain.Writer, error) {
	var signer auditchain.Signer
	if id := getenv(EnvAuditKMSKey); id != "" {
		signer = auditchain.NewKMSSigner(newLazyAWS().kms(), id)
	}
	return AuditChain(b, kind, signer, log)
}

type lazyKMS struct {
	c func() (*kms.Client, error)
}

func (a *lazyAWS) kms() lazyKMS {
	return lazyKMS{c: sync.OnceValues(func() (*kms.Client, error) {
		cfg, err := a.cfg()
		if err != nil {
			return nil, err
		}
		return kms.NewFromConfig(cfg), nil
	})}
}

func (l lazyKMS) Sign(ctx context.Context, in *kms.SignInput, opts ...func(*kms.Options)) (*kms.SignOutput, error) {
	c, err := l.c()
	if err != nil {
		return nil, err
	}
	return c.Sign(ctx, in, opts...)
}

func (l lazyKMS) GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, opts ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error) {
	c, err := l.c()
	if err != nil {
		return nil, err
	}
	return c.GetPublicKey(ctx, in, opts...)
}

// KMSVerifier is the verifier key of the KMS key keyID (`aegis audit key
// --kms`), through a client from the standard AWS configuration chain.
func KMSVerifier(ctx context.Context, keyID string) (string, error) {
	return auditchain.KMSVerifier(ctx, newLazyAWS().kms(), keyID)
}
