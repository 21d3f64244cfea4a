// Package credentials resolves brokered credential references to their
// values: "env:NAME" and "file:/path" for `aegis serve`, and
// "secretsmanager:ID" (a secret's name or ARN) and "ssm:/parameter/name"
// (decrypted) on AWS. Values are cached in process for a short time, so a
// rotated secret is picked up within CacheTTL and a warm Lambda does not
// call AWS on every request. A Resolver implements upstream.Credentials.
package credentials

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/aegis-gw/aegis/shared/upstream"
)

// DefaultCacheTTL is how long a resolved value is reused.
const DefaultCacheTTL = 5 * time.Minute

// SecretsManagerAPI is the one Secrets Manager call the resolver makes.
type SecretsManagerAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SSMAPI is the one SSM call the resolver makes.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// Options configure a Resolver. Every field is optional.
type Options struct {
	// AWS is the configuration for the AWS kinds. Without it (and without
	// SecretsManager/SSM), "secretsmanager:" and "ssm:" references fail.
	AWS *aws.Config
	// SecretsManager and SSM override the clients built from AWS (tests).
	SecretsManager SecretsManagerAPI
	SSM            SSMAPI
	// Local allows the local kinds "env:" and "file:". `aegis serve` sets
	// it; on Lambda a credential must come from Secrets Manager or SSM.
	Local bool
	// Getenv and ReadFile default to os.Getenv and os.ReadFile.
	Getenv   func(string) string
	ReadFile func(string) ([]byte, error)
	CacheTTL time.Duration    // 0: DefaultCacheTTL
	Now      func() time.Time // nil: time.Now
}

// Resolver resolves references. It is safe for concurrent use.
type Resolver struct {
	o  Options
	mu sync.Mutex
	c  map[string]cached
}

type cached struct {
	value   string
	expires time.Time
}

// New returns a Resolver; o is copied and defaults filled.
func New(o Options) *Resolver {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.ReadFile == nil {
		o.ReadFile = os.ReadFile
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AWS != nil {
		if o.SecretsManager == nil {
			o.SecretsManager = secretsmanager.NewFromConfig(*o.AWS)
		}
		if o.SSM == nil {
			o.SSM = ssm.NewFromConfig(*o.AWS)
		}
	}
	return &Resolver{o: o, c: map[string]cached{}}
}

// Validate checks the form of a reference (at registration). It does not
// resolve it.
func Validate(ref string, local bool) error {
	kind, name, ok := strings.Cut(ref, ":")
	if !ok || name == "" {
		return fmt.Errorf("credential reference %q: want env:NAME, file:/path, secretsmanager:ID or ssm:/name", ref)
	}
	switch kind {
	case "env", "file":
		if !local {
			return fmt.Errorf("credential reference kind %q is allowed only with aegis serve (use secretsmanager or ssm)", kind)
		}
		if kind == "file" && !strings.HasPrefix(name, "/") {
			return fmt.Errorf("credential reference %q: file path must be absolute", ref)
		}
	case "secretsmanager":
	case "ssm":
		if !strings.HasPrefix(name, "/") && strings.Contains(name, "/") {
			return fmt.Errorf("credential reference %q: a hierarchical SSM name starts with /", ref)
		}
	default:
		return fmt.Errorf("credential reference kind %q: want env, file, secretsmanager or ssm", kind)
	}
	return nil
}

// ErrNotFound is returned (wrapped) when a reference names nothing.
var ErrNotFound = errors.New("credential not found")

// Resolve implements upstream.Credentials. Errors name the reference's kind
// and name but never a value.
func (r *Resolver) Resolve(ctx context.Context, ref string) (string, error) {
	now := r.o.Now()
	r.mu.Lock()
	if c, ok := r.c[ref]; ok && now.Before(c.expires) {
		r.mu.Unlock()
		return c.value, nil
	}
	r.mu.Unlock()
	v, err := r.fetch(ctx, ref)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	r.c[ref] = cached{value: v, expires: now.Add(r.o.CacheTTL)}
	r.mu.Unlock()
	return v, nil
}

func (r *Resolver) fetch(ctx context.Context, ref string) (string, error) {
	if err := Validate(ref, r.o.Local); err != nil {
		return "", err
	}
	kind, name, _ := strings.Cut(ref, ":")
	switch kind {
	case "env":
		v := r.o.Getenv(name)
		if v == "" {
			return "", fmt.Errorf("%w: environment variable %s is empty", ErrNotFound, name)
		}
		return v, nil
	case "file":
		b, err := r.o.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrNotFound, name, err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" {
			return "", fmt.Errorf("%w: %s is empty", ErrNotFound, name)
		}
		return v, nil
	case "secretsmanager":
		if r.o.SecretsManager == nil {
			return "", errors.New("secretsmanager: no AWS configuration")
		}
		out, err := r.o.SecretsManager.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
		if err != nil {
			return "", fmt.Errorf("secretsmanager %s: %w", name, err)
		}
		if out.SecretString == nil || *out.SecretString == "" {
			return "", fmt.Errorf("%w: secret %s has no string value", ErrNotFound, name)
		}
		return *out.SecretString, nil
	default: // ssm
		if r.o.SSM == nil {
			return "", errors.New("ssm: no AWS configuration")
		}
		out, err := r.o.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
		if err != nil {
			return "", fmt.Errorf("ssm %s: %w", name, err)
		}
		if out.Parameter == nil || out.Parameter.Value == nil || *out.Parameter.Value == "" {
			return "", fmt.Errorf("%w: parameter %s has no value", ErrNotFound, name)
		}
		return *out.Parameter.Value, nil
	}
}

var _ upstream.Credentials = (*Resolver)(nil)
