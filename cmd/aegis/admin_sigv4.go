package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// On AWS the admin routes use IAM authorization (template.yaml): API
// Gateway wants a SigV4 signature for the service execute-api, and there is
// no admin key. The CLI signs with the standard AWS credential chain
// (environment, shared config and profiles, SSO, instance or container
// role) when --sigv4 is given or the URL is an execute-api host.

// sigv4Service is the signing name of API Gateway's invoke endpoint.
const sigv4Service = "execute-api"

// executeAPIRegion returns the region of an API Gateway default endpoint
// (ID.execute-api.REGION.amazonaws.com[.cn]), and false for any other host.
func executeAPIRegion(u *url.URL) (string, bool) {
	host := strings.ToLower(u.Hostname())
	parts := strings.Split(host, ".")
	if len(parts) < 5 || parts[1] != sigv4Service || parts[3] != "amazonaws" {
		return "", false
	}
	if rest := strings.Join(parts[4:], "."); rest != "com" && rest != "com.cn" {
		return "", false
	}
	return parts[2], true
}

// signer signs admin requests; nil means bearer-key mode.
type signer struct {
	region string
	creds  aws.CredentialsProvider
	now    func() time.Time
}

// newSigner decides between the bearer key and SigV4 for base, and loads
// the region and credentials when signing. region may be empty: the URL's
// host, then the SDK's own settings (AWS_REGION, the profile) supply it.
func newSigner(ctx context.Context, base string, force bool, region string) (*signer, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	hostRegion, isAPI := executeAPIRegion(u)
	if !force && !isAPI {
		return nil, nil
	}
	if region == "" {
		region = hostRegion
	}
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("sigv4: loading AWS settings: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("sigv4: no region: pass --region or set AWS_REGION")
	}
	if cfg.Credentials == nil {
		return nil, errors.New("sigv4: no AWS credentials found (environment, profile, SSO or role)")
	}
	return &signer{region: cfg.Region, creds: cfg.Credentials, now: time.Now}, nil
}

// sign adds the SigV4 headers for req, whose body is body.
func (s *signer) sign(ctx context.Context, req *http.Request, body []byte) error {
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		// The SDK's message names the provider that failed, never a secret.
		return fmt.Errorf("sigv4: AWS credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	return v4.NewSigner().SignHTTP(ctx, creds, req, hash, sigv4Service, s.region, s.now().UTC())
}
