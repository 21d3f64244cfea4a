// Package wiring assembles the gateway and the admin API from the
// environment, once, for every host: the Lambda functions
// (functions/gateway, functions/admin) and the CLI (`aegis serve`, which
// shares OpenDynamo, Credentials and Notifier). The mains stay one call and
// lambda.Start.
//
// What runs at a cold start is kept small: settings are parsed and
// validated, the DynamoDB client is built (the one AWS configuration load on
// the init path), telemetry is set up from the environment. The clients for
// Secrets Manager, SSM and SNS load their AWS configuration on first use.
package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/credentials"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/telemetry"
)

// RegistryCacheTTL is how long a process reuses registry reads (keys,
// tenants, servers) from DynamoDB.
const RegistryCacheTTL = 10 * time.Second

// OpenDynamo opens the DynamoDB store: the client from the standard SDK
// chain (AWS_REGION, credentials, AWS_ENDPOINT_URL_DYNAMODB), the tables
// from AEGIS_STATE_TABLE / AEGIS_AUDIT_TABLE, audit retention and session
// item lifetime from s. opTimeout is each operation's deadline, and half
// of it each attempt's wait for an answer (the defaults' ratio, 1 s of
// 2 s); 0 is the product's, dynamo.DefaultOpTimeout and
// dynamo.ResponseHeaderTimeout. Only `aegis serve --store-timeout` sets
// it. A non-nil tracer adds one span per DynamoDB call; extra middleware
// (`aegis serve`'s store metrics) is added after it.
func OpenDynamo(ctx context.Context, s config.Settings, opTimeout time.Duration, tr *telemetry.Tracer, extra ...func(*middleware.Stack) error) (*dynamo.Store, error) {
	o := dynamo.Options{AuditRetention: s.AuditRetention, SessionTTL: s.SessionLifetime, OpTimeout: opTimeout}
	var optFns []func(*dynamodb.Options)
	if opTimeout > 0 {
		optFns = append(optFns, func(o *dynamodb.Options) {
			o.HTTPClient = dynamo.NewHTTPClient().WithTransportOptions(func(t *http.Transport) { t.ResponseHeaderTimeout = opTimeout / 2 })
		})
	}
	var mw []func(*middleware.Stack) error
	if tr != nil {
		mw = append(mw, tr.AddAWSMiddleware)
	}
	mw = append(mw, extra...)
	if len(mw) > 0 {
		optFns = append(optFns, dynamo.WithMiddleware(mw...))
	}
	return dynamo.Open(ctx, o, optFns...)
}

// Notifier tells approvers of held calls: tenant webhooks (secrets resolved
// through secrets), plus SNS when AEGIS_APPROVAL_TOPIC_ARN is set. The SNS
// client loads its AWS configuration on the first publish.
func Notifier(getenv func(string) string, secrets approval.Resolver, log *slog.Logger) *approval.Async {
	return approval.FromEnv(getenv, secrets, func() approval.Publisher { return newLazyAWS().sns() }, log)
}

// Credentials resolves brokered credentials: env: and file: references
// only when local (`aegis serve`); secretsmanager: and ssm: through clients
// that load their AWS configuration on first use.
func Credentials(local bool) *credentials.Resolver {
	a := newLazyAWS()
	return credentials.New(credentials.Options{Local: local, SecretsManager: a.secretsManager(), SSM: a.ssm()})
}

// LambdaGateway builds the GatewayFunction's handler from the environment
// (getenv: os.Getenv): settings with the timeout rule (FUNCTION_TIMEOUT_SECS
// required), quota tiers, telemetry, the DynamoDB store, brokered
// credentials from Secrets Manager / SSM, and the approval notifier. Every
// error names the setting at fault.
//
// shutdown is for the runtime's SIGTERM (lambda.WithEnableSIGTERM): it
// finishes what outlives an invocation, within ShutdownBudget. Lambda runs
// one invocation at a time per execution environment and shuts one down
// only between invocations, so no call is in flight then: its audit record
// and lease release were written before its response. What can remain is
// approval notifications (sent in the background, possibly frozen with the
// environment after the response): shutdown waits for them, then shuts the
// tracer provider down (spans are exported as they end and EMF lines are
// written synchronously, so there is nothing else to flush).
func LambdaGateway(ctx context.Context, getenv func(string) string, version string) (h http.Handler, shutdown func(), err error) {
	s, err := config.FromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	if err := s.ValidateFunction(); err != nil {
		return nil, nil, err
	}
	tiers, err := quota.TiersFromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	tel, stopTelemetry, err := telemetry.FromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	loopback, err := allowLoopback(getenv, tel.Logger)
	if err != nil {
		return nil, nil, err
	}
	st, err := OpenDynamo(ctx, s, 0, tel.Tracer)
	if err != nil {
		return nil, nil, err
	}
	creds := Credentials(false)
	notify := Notifier(getenv, creds, tel.Logger)
	o := &gateway.Options{
		Settings: s, Tiers: tiers, RegistryCacheTTL: RegistryCacheTTL, Tracer: tel.Tracer,
		Logger: tel.Logger, Credentials: creds, Notifier: notify, Version: version,
	}
	if tel.Metrics != nil { // a nil *EMF in the interface would not be "off"
		o.Metrics = tel.Metrics
	}
	o.HTTP = gateway.NewHTTPClient(loopback)
	b, chain, err := lambdaAuditChain(getenv, st, "lambda", tel.Logger)
	if err != nil {
		return nil, nil, err
	}
	// Connections (docs/connections.md): a public URL for the links, and
	// the KMS key that seals the tokens, or neither.
	switch kr, pub := lambdaKeyring(getenv, newLazyAWS()), getenv(EnvPublicURL); {
	case kr != nil && pub != "":
		if o.Connections, err = Connections(b, kr, pub, creds, o.HTTP, false, tel.Logger); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", EnvPublicURL, err)
		}
	case pub != "":
		return nil, nil, fmt.Errorf("%s is set without %s: connection tokens need a KMS key to be sealed with", EnvPublicURL, EnvConnectionsKMSKey)
	default:
		tel.Logger.Info("connections are off: no " + EnvPublicURL + "; servers with auth: oauth cannot be called")
	}
	gw, err := gateway.New(b, o)
	if err != nil {
		return nil, nil, err
	}
	return gw, func() { shutdownGateway(notify, chain, stopTelemetry, tel.Logger, ShutdownBudget) }, nil
}

// ShutdownBudget is what the GatewayFunction's SIGTERM hook may spend.
// Lambda sends SIGTERM only to a runtime that registered an extension
// (lambda.WithEnableSIGTERM registers an internal one) and kills the
// process 500 ms later; the rest is margin.
const ShutdownBudget = 400 * time.Millisecond

// shutdownGateway waits up to budget for the notifications in flight, then
// stops telemetry, and logs what it could not finish.
func shutdownGateway(notify *approval.Async, chain *auditchain.Writer, stopTelemetry func(context.Context) error, log *slog.Logger, budget time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	// The records since the last audit checkpoint are signed beside the
	// notifications, within the same budget; if not, they stay an
	// unsigned tail that verify reports (docs/design/audit.md).
	signed := make(chan error, 1)
	if chain != nil {
		go func() { signed <- chain.Close(ctx) }()
	} else {
		signed <- nil
	}
	sent := make(chan struct{})
	go func() { notify.Wait(); close(sent) }()
	select {
	case <-sent:
	case <-ctx.Done():
		log.Warn("shutdown: approval notifications still being sent are dropped; the approvals stay listed in GET /admin/v1/approvals", "budget", budget.String())
	}
	if err := <-signed; err != nil {
		log.Warn("shutdown: the last audit checkpoint was not written; its records stay an unsigned tail", "err", err)
	}
	if err := stopTelemetry(ctx); err != nil {
		log.Warn("shutdown: telemetry not stopped cleanly", "err", err)
	}
	log.Info("shutdown: gateway function stopped")
}

// LambdaAdmin builds the AdminFunction's handler from the environment. Its
// only authentication is trust in API Gateway's IAM authorization: the
// caller passes the accessor (apigw.IAMPrincipal), and a request without an
// IAM principal is refused.
func LambdaAdmin(ctx context.Context, getenv func(string) string, principal admin.IAMPrincipal) (http.Handler, error) {
	if principal == nil {
		return nil, errors.New("admin: no IAM principal accessor")
	}
	s, err := config.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	tel, _, err := telemetry.FromEnv(getenv)
	if err != nil {
		return nil, err
	}
	st, err := OpenDynamo(ctx, s, 0, tel.Tracer)
	if err != nil {
		return nil, err
	}
	// The admin function writes records too (decisions on approvals,
	// stops, pins): its own chains. Lambda runs it without a SIGTERM
	// hook, so its last records stay an unsigned tail until the next
	// invocation's checkpoint, or for good when the environment ends.
	b, _, err := lambdaAuditChain(getenv, st, "admin", tel.Logger)
	if err != nil {
		return nil, err
	}
	ao := &admin.Options{TrustIAM: principal, Logger: tel.Logger, KillSwitchRefresh: s.KillSwitchRefresh}
	// Revoking a connection opens its tokens (the KMS key) to revoke them
	// at the provider: the same two settings as the gateway function's.
	if kr, pub := lambdaKeyring(getenv, newLazyAWS()), getenv(EnvPublicURL); kr != nil && pub != "" {
		br, err := Connections(b, kr, pub, Credentials(false), gateway.NewHTTPClient(false), false, tel.Logger)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvPublicURL, err)
		}
		ao.Connections = br
	}
	return admin.New(b, ao)
}

// EnvAllowLoopback is the test-only escape of the Lambda harness
// (functions/*/main_test.go): with the value 1, the gateway function's
// upstream dialer accepts loopback addresses, so a bootstrap under
// aws-lambda-rie can reach a test upstream on 127.0.0.1. Nothing else
// changes: link-local and metadata addresses stay refused, and the
// registry is seeded by the test (upstream URLs are checked when they are
// registered through the admin API, which still refuses loopback).
// template.yaml never sets it (infra tests check), any other value stops
// the function, it is refused where AWS_SESSION_TOKEN is set (every real
// Lambda has role credentials there), and it is logged at ERROR on every
// cold start. docs/design/lambda.md records the choice.
const EnvAllowLoopback = "AEGIS_ALLOW_LOOPBACK_UPSTREAMS"

func allowLoopback(getenv func(string) string, log *slog.Logger) (bool, error) {
	switch v := getenv(EnvAllowLoopback); v {
	case "":
		return false, nil
	case "1":
	default:
		return false, fmt.Errorf("%s=%q: unset it; it is a test-harness switch whose only value is 1", EnvAllowLoopback, v)
	}
	if getenv("AWS_SESSION_TOKEN") != "" {
		return false, fmt.Errorf("%s=1 refused: this process has role credentials (AWS_SESSION_TOKEN), as on AWS Lambda; the loopback escape is for the local aws-lambda-rie harness only", EnvAllowLoopback)
	}
	log.Error("!!! " + EnvAllowLoopback + "=1: upstream calls may reach loopback addresses. TEST HARNESS ONLY; never set this on a deployed function")
	return true, nil
}
