package auditchain_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/aegis-gw/aegis/internal/auditchaintest"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/memstore"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestKMSSigner signs checkpoints with an asymmetric key in moto_server's
// KMS (ECC_NIST_P256, Sign with MessageType DIGEST) and verifies them
// with the public key KMS hands out; a checkpoint edited after signing is
// named forged.
func TestKMSSigner(t *testing.T) {
	ctx := context.Background()
	c := kms.New(kms.Options{Region: "us-east-1", BaseEndpoint: aws.String(dynamotest.Endpoint(t)),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	key, err := c.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpecEccNistP256, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(key.KeyMetadata.Arn)
	vk, err := auditchain.KMSVerifier(ctx, c, arn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(vk, auditchain.KMSKeyName(arn)+"+") {
		t.Fatalf("verifier key %q; want it named %s", vk, auditchain.KMSKeyName(arn))
	}
	v, err := auditchain.ParseVerifier(vk)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	auditchaintest.Trail(t, st, auditchain.NewKMSSigner(c, arn))
	d, err := auditchain.Collect(ctx, st, auditchaintest.Tenant, auditchaintest.T0.Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	rep := auditchain.Verify(d, []*auditchain.Verifier{v})
	if !rep.OK() || rep.Checkpoints != 3 || rep.Writers[0].Signed != 12 {
		t.Fatalf("report %+v; want no fault and 3 checkpoints signing through seq 12", rep)
	}
	// A KMS key that did not sign them: every checkpoint is forged.
	other, err := c.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpecEccNistP256, KeyUsage: types.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	ovk, err := auditchain.KMSVerifier(ctx, c, aws.ToString(other.KeyMetadata.Arn))
	if err != nil {
		t.Fatal(err)
	}
	ov, _ := auditchain.ParseVerifier(ovk)
	if rep := auditchain.Verify(d, []*auditchain.Verifier{ov}); len(rep.Faults) != 3 || rep.Faults[0].Kind != auditchain.CheckpointForged {
		t.Fatalf("with another key: %+v; want 3 forged checkpoints", rep.Faults)
	}
	// The text of checkpoint 2 edited: its signature no longer holds.
	for i, cp := range d.Checkpoints {
		if cp.Number == 2 {
			d.Checkpoints[i].Note = strings.Replace(cp.Note, "\nsize 8\n", "\nsize 7\n", 1)
		}
	}
	rep = auditchain.Verify(d, []*auditchain.Verifier{v})
	if len(rep.Faults) != 1 || rep.Faults[0].Kind != auditchain.CheckpointForged || rep.Faults[0].Checkpoint != 2 {
		t.Fatalf("edited checkpoint: %+v; want checkpoint 2 forged", rep.Faults)
	}
	// A key of the wrong kind is refused before any checkpoint is made.
	sym, err := c.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auditchain.KMSVerifier(ctx, c, aws.ToString(sym.KeyMetadata.KeyId)); err == nil {
		t.Fatal("a symmetric key was accepted")
	}
}
