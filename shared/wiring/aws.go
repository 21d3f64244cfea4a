package wiring

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/credentials"
)

// lazyAWS loads the AWS configuration once, on the first call that needs
// it, so that a cold start does not pay for clients a request may never use
// (most requests resolve no credential and hold no call for approval). The
// load uses a background context: a cancelled request must not leave a
// failed load cached.
type lazyAWS struct {
	cfg func() (aws.Config, error)
}

func newLazyAWS() *lazyAWS {
	return &lazyAWS{cfg: sync.OnceValues(func() (aws.Config, error) {
		return awsconfig.LoadDefaultConfig(context.Background())
	})}
}

type lazySecrets struct {
	c func() (*secretsmanager.Client, error)
}

func (a *lazyAWS) secretsManager() credentials.SecretsManagerAPI {
	return lazySecrets{c: sync.OnceValues(func() (*secretsmanager.Client, error) {
		cfg, err := a.cfg()
		if err != nil {
			return nil, err
		}
		return secretsmanager.NewFromConfig(cfg), nil
	})}
}

func (l lazySecrets) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c, err := l.c()
	if err != nil {
		return nil, err
	}
	return c.GetSecretValue(ctx, in, opts...)
}

type lazySSM struct {
	c func() (*ssm.Client, error)
}

func (a *lazyAWS) ssm() credentials.SSMAPI {
	return lazySSM{c: sync.OnceValues(func() (*ssm.Client, error) {
		cfg, err := a.cfg()
		if err != nil {
			return nil, err
		}
		return ssm.NewFromConfig(cfg), nil
	})}
}

func (l lazySSM) GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	c, err := l.c()
	if err != nil {
		return nil, err
	}
	return c.GetParameter(ctx, in, opts...)
}

type lazySNS struct {
	c func() (*sns.Client, error)
}

func (a *lazyAWS) sns() approval.Publisher {
	return lazySNS{c: sync.OnceValues(func() (*sns.Client, error) {
		cfg, err := a.cfg()
		if err != nil {
			return nil, err
		}
		return sns.NewFromConfig(cfg), nil
	})}
}

func (l lazySNS) Publish(ctx context.Context, in *sns.PublishInput, opts ...func(*sns.Options)) (*sns.PublishOutput, error) {
	c, err := l.c()
	if err != nil {
		return nil, err
	}
	return c.Publish(ctx, in, opts...)
}
