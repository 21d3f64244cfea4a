package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/connecttest"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/lambdatest"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// withKey is an http.RoundTripper that sends an API key.
type withKey struct {
	key  string
	base http.RoundTripper
}

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.base.RoundTrip(r)
}

// TestConnectionsUnderLambda: the connected call path through the real
// gateway bootstrap under aws-lambda-rie, behind the API Gateway stand-in
// (apiGateway, over https: a deployed function's links are https), with
// DynamoDB, KMS (the template's ConnectionsKey: a symmetric key sealing
// the tokens) and SSM (the client secret's reference) on moto_server, the
// npm oidc-provider as the server's authorization server and a Go SDK
// server behind the SDK's bearer-token middleware as the server, both on
// https. A Go SDK client at MCP 2026-07-28 that declares elicitation.url
// calls a tool of the server: it is answered with an input-required
// result carrying the link, its handler follows the link through the
// function's /connect/start, the provider's login and consent, and the
// function's /connect/callback, and its retry of the identical call
// reaches the server with the caller's own token, sealed in DynamoDB
// under KMS. Another caller is asked for their own connection (-32065 on
// /v1/invoke), and no token is in an answer or the function's log.
func TestConnectionsUnderLambda(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bin := lambdatest.Build(t, "./functions/gateway")
	cert := connecttest.NewCert(t)
	db := dynamotest.Start(t)
	st := db.Store(t, dynamo.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	front := "https://" + ln.Addr().String()

	var issuer string
	up := connecttest.StartUpstream(t, func() string { return issuer }, cert)
	secret := "docs-client-secret-" + rand.Text()
	issuer = connecttest.StartProvider(t, connecttest.Provider{Resource: up.URL, Redirect: front + "/t/acme/connect/callback", Secret: secret, TLS: cert})

	// The template's ConnectionsKey and the client secret's parameter, on moto.
	cfg := aws.Config{Region: "us-east-1", Credentials: awscreds.NewStaticCredentialsProvider("test", "test", "")}
	kc := kms.NewFromConfig(cfg, func(o *kms.Options) { o.BaseEndpoint = aws.String(db.Endpoint) })
	key, err := kc.CreateKey(ctx, &kms.CreateKeyInput{})
	must(err)
	sc := ssm.NewFromConfig(cfg, func(o *ssm.Options) { o.BaseEndpoint = aws.String(db.Endpoint) })
	param := "/aegis/acme/docs-client-secret-" + rand.Text() // moto_server is the package's, shared by every run
	_, err = sc.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(param), Value: aws.String(secret), Type: ssmtypes.ParameterTypeSecureString})
	must(err)

	now := time.Now().UTC()
	keys := map[string]string{}
	must(st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierGrowth, Created: now}))
	must(st.PutServer(ctx, registry.Server{Tenant: "acme", Name: "docs", URL: up.URL, Auth: registry.AuthOAuth, Created: now,
		OAuth: &registry.OAuthClient{ClientID: "aegis-docs", ClientSecretRef: "ssm:" + param}}))
	for _, c := range []string{"alice", "bob"} {
		s, k := auth.NewKey("acme", c, now)
		must(st.PutKey(ctx, k))
		keys[c] = s
	}

	fn := lambdatest.Start(t, bin, &lambdatest.Options{
		FunctionName: "aegis-GatewayFunction",
		Timeout:      10 * time.Second,
		Env: functionEnv(db, map[string]string{
			"RATE_LIMIT_PER_SESSION": "0", "BILLING_ENABLED": "0", "BILLING_ENFORCE": "0",
			"MAX_BODY_BYTES": "1048576", "UPSTREAM_TIMEOUT_SECS": "5", "FUNCTION_TIMEOUT_SECS": "10",
			wiring.EnvPublicURL: front, wiring.EnvConnectionsKMSKey: aws.ToString(key.KeyMetadata.Arn),
			"AWS_ENDPOINT_URL_KMS": db.Endpoint, "AWS_ENDPOINT_URL_SSM": db.Endpoint, "AWS_REGION": "us-east-1",
			"SSL_CERT_FILE": cert.File(t, t.TempDir()),
		}),
	})
	srv := &http.Server{Handler: &apiGateway{fn: fn, keys: map[string]string{}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(ln, cert.ServerConfig())) }()
	t.Cleanup(func() { _ = srv.Close() })

	// Alice, at 2026-07-28, asked in the protocol; her handler consents.
	asked := 0
	client := mcp.NewClient(&mcp.Implementation{Name: "lambda-connect", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked++
			if !strings.HasPrefix(req.Params.URL, front+"/t/acme/connect/start?state=") {
				return nil, errors.New("unexpected link " + req.Params.URL)
			}
			if st, page, _ := connecttest.Consent(t, connecttest.Browser(cert), req.Params.URL, "alice", nil); st != http.StatusOK || !strings.Contains(page, "Connected to docs") {
				t.Errorf("consent ended %d: %.300s", st, page)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front + "/t/acme/mcp",
		HTTPClient: &http.Client{Transport: withKey{keys["alice"], cert.Transport()}}}, nil)
	must(err)
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the client speaks %s through the function; want 2026-07-28", v)
	}
	for i := range 2 { // the second call: the warm instance's cached token
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs.whoami", Arguments: map[string]any{}})
		must(err)
		if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "subject=alice" {
			t.Fatalf("call %d: %+v", i, res.Content)
		}
	}
	if asked != 1 {
		t.Fatalf("alice was asked %d times; want once", asked)
	}

	// Her tokens are in DynamoDB, sealed under the KMS key.
	c, err := st.Connection(ctx, "acme", "alice", "docs")
	must(err)
	tokens, _ := up.Seen()
	if c.Status != connect.StatusActive || len(tokens) == 0 {
		t.Fatalf("connection %+v; the upstream saw %d tokens", c, len(tokens))
	}
	for _, tok := range tokens {
		if strings.Contains(string(c.Sealed), tok) || strings.Contains(fn.Log(), tok) {
			t.Fatal("an access token is in the stored record or the function's log")
		}
	}

	// Bob is not alice: /v1/invoke answers -32065 with his own link.
	hc := &http.Client{Transport: withKey{keys["bob"], cert.Transport()}, Timeout: 20 * time.Second}
	resp, err := hc.Post(front+"/t/acme/v1/invoke", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"docs.whoami","arguments":{}}}`))
	must(err)
	defer resp.Body.Close()
	var ans struct {
		Error *struct {
			Code    int
			Message string
		}
	}
	must(json.NewDecoder(resp.Body).Decode(&ans))
	if ans.Error == nil || ans.Error.Code != -32065 || !strings.Contains(ans.Error.Message, front+"/t/acme/connect/start?state=") {
		t.Fatalf("bob: %+v; want -32065 with a link", ans.Error)
	}
	if after, _ := up.Seen(); len(after) != len(tokens) {
		t.Fatal("bob's call reached the upstream with a token")
	}
}
