package credentials

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/aegis-gw/aegis/internal/testtools"
)

func TestLocalKinds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	if err := os.WriteFile(path, []byte("file-secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"UP_TOKEN": "env-secret-value"}
	r := New(Options{Local: true, Getenv: func(k string) string { return env[k] }})
	ctx := context.Background()
	tests := []struct {
		ref, want string
		err       bool
	}{
		{ref: "env:UP_TOKEN", want: "env-secret-value"},
		{ref: "file:" + path, want: "file-secret-value"},
		{ref: "env:MISSING", err: true},
		{ref: "file:" + filepath.Join(dir, "absent"), err: true},
		{ref: "file:relative/path", err: true},
		{ref: "vault:x", err: true},
		{ref: "env:", err: true},
	}
	for _, tc := range tests {
		got, err := r.Resolve(ctx, tc.ref)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q, error %v", tc.ref, got, err, tc.want, tc.err)
		}
	}
}

func TestLocalKindsRefusedOnAWS(t *testing.T) {
	r := New(Options{Getenv: func(string) string { return "v" }})
	if _, err := r.Resolve(context.Background(), "env:X"); err == nil {
		t.Fatal("env: resolved outside local mode")
	}
	if err := Validate("env:X", false); err == nil {
		t.Fatal("Validate accepted env: outside local mode")
	}
	for _, ok := range []string{"secretsmanager:prod/upstream", "secretsmanager:arn:aws:secretsmanager:us-east-1:123:secret:x", "ssm:/aegis/token", "ssm:token"} {
		if err := Validate(ok, false); err != nil {
			t.Errorf("Validate(%q) = %v", ok, err)
		}
	}
}

func TestCacheTTL(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	val := "first-value"
	r := New(Options{Local: true, Getenv: func(string) string { return val }, CacheTTL: time.Minute, Now: func() time.Time { return now }})
	ctx := context.Background()
	if v, _ := r.Resolve(ctx, "env:T"); v != "first-value" {
		t.Fatalf("got %q", v)
	}
	val = "rotated-value"
	now = now.Add(59 * time.Second)
	if v, _ := r.Resolve(ctx, "env:T"); v != "first-value" {
		t.Fatalf("within TTL got %q; want the cached value", v)
	}
	now = now.Add(2 * time.Second)
	if v, _ := r.Resolve(ctx, "env:T"); v != "rotated-value" {
		t.Fatalf("after TTL got %q; want the rotated value", v)
	}
}

// TestAWSKinds resolves secretsmanager: and ssm: references against
// moto_server on a loopback port.
func TestAWSKinds(t *testing.T) {
	endpoint := startMoto(t)
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  awscreds.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
	}
	ctx := context.Background()
	sm := secretsmanager.NewFromConfig(cfg)
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("tenant-a/github"), SecretString: aws.String("sm-secret-value")}); err != nil {
		t.Fatal(err)
	}
	sp := ssm.NewFromConfig(cfg)
	if _, err := sp.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/aegis/tenant-a/jira"), Value: aws.String("ssm-secret-value"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	r := New(Options{SecretsManager: countingSM{sm, &calls}, SSM: sp})
	for range 3 {
		if v, err := r.Resolve(ctx, "secretsmanager:tenant-a/github"); err != nil || v != "sm-secret-value" {
			t.Fatalf("secretsmanager = %q, %v", v, err)
		}
	}
	if calls != 1 {
		t.Errorf("Secrets Manager called %d times for 3 resolutions; want 1 (cache)", calls)
	}
	if v, err := r.Resolve(ctx, "ssm:/aegis/tenant-a/jira"); err != nil || v != "ssm-secret-value" {
		t.Fatalf("ssm = %q, %v", v, err)
	}
	if _, err := r.Resolve(ctx, "ssm:/aegis/absent"); err == nil {
		t.Fatal("absent parameter resolved")
	}
	if _, err := r.Resolve(ctx, "secretsmanager:absent"); err == nil {
		t.Fatal("absent secret resolved")
	}
}

// TestAWSKindsWithoutMotoFails runs TestAWSKinds with no moto_server on
// PATH and CI unset: it must fail naming moto_server, not skip.
func TestAWSKindsWithoutMotoFails(t *testing.T) {
	testtools.ExpectMissing(t, "^TestAWSKinds$", "moto_server")
}

type countingSM struct {
	SecretsManagerAPI
	n *int
}

func (c countingSM) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, o ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	*c.n++
	return c.SecretsManagerAPI.GetSecretValue(ctx, in, o...)
}

func startMoto(t *testing.T) string {
	t.Helper()
	bin := testtools.Path(t, "moto_server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return url
		}
		if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "refused") {
			t.Logf("waiting for moto_server: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("moto_server did not start")
	return ""
}
