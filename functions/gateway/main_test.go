package main

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/aegis-gw/aegis/functions/internal/replay"
	"github.com/aegis-gw/aegis/internal/oidctest"
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/killswitch"
	"github.com/aegis-gw/aegis/shared/lambdatest"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/wiring"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the function's responses")

func TestMain(m *testing.M) { dynamotest.Main(m) }

const (
	eventsDir = "../../events/gateway"
	goldenDir = "testdata/golden"
)

// The fixed identities the recorded events carry. Keys are seeded as their
// hashes, as the admin API would store them.
const (
	acmeKey   = "aegis_acmetest_3kq9vXh2TfR8wLm1Np4sYz6B"
	cappedKey = "aegis_cappedtest_Q7wE2rT9yU4iO1pA6sD3fG8h"
	darkKey   = "aegis_darktest_Z5xC8vB1nM4qW7eR2tY9uI6o"
	vaultKey  = "aegis_vaulttest_M3nB6vC9xZ2lK5jH8gF1dS4a"
	caller    = "ci-agent"

	mcpSession = "sess-acme-mcp-01JDQ7Z4K8X2M5N9P3R6T0V1W4" // seeded, used by /mcp events
	rlSession  = "sess-acme-rl-01JDQ80A1B2C3D4E5F6G7H8J9K"  // seeded, its rate window full
	delSession = "sess-acme-del-01JDQ81M2N3P4Q5R6S7T8V9W0X" // seeded, deleted by delete-session

	traceID = "4bf92f3577b34da6a3ce929d0e0e4736" // initialize's traceparent: the correlation id

	// perSession is RATE_LIMIT_PER_SESSION: low, so that rlSession is
	// seeded full with a few writes, and above what any one window sees:
	// the events' sessionless calls all count in the acme key's window.
	perSession = 12
	// freeQuota is QUOTA_FREE: the "capped" tenant is free tier, seeded at
	// its limit.
	freeQuota = 2
)

// steps is the order events are posted in; state carries over (the held
// call is approved through the store, then posted again). Every file of
// events/gateway appears here at least once.
var steps = []struct {
	event, golden string
	before, after func(h *harness, t *testing.T)
}{
	{event: "initialize"},
	{event: "notification-initialized"},
	{event: "tools-list"},
	{event: "tools-call-allowed"},
	{event: "invoke-allowed"},
	{event: "invoke-base64-body"},
	{event: "pii-redacted"},
	{event: "egress-blocked"},
	{event: "sensitive-data"},
	{event: "policy-tools-list"},
	{event: "policy-denied"},
	{event: "capability-denied"},
	{event: "policy-echo-allowed"},
	{event: "policy-denied-result"},
	{event: "policy-audit-mode", after: (*harness).intendedDenyRecorded},
	{event: "policy-not-loaded"},
	{event: "policy-not-loaded", golden: "policy-not-loaded.recovered", before: (*harness).repairPolicy},
	{event: "manifest-lifetime"},
	{event: "manifest-idle"},
	{event: "manifest-tool-calls", golden: "manifest-tool-calls.last"},
	{event: "manifest-tool-calls", golden: "manifest-tool-calls.over"},
	{event: "manifest-steps"},
	{event: "unknown-tool"},
	{event: "bad-session"},
	{event: "rate-limited"},
	{event: "quota-exceeded"},
	{event: "tool-stopped"},
	{event: "approval-required", golden: "approval-required.held"},
	{event: "approval-required", golden: "approval-required.approved", before: (*harness).approveHeld},
	{event: "unauthorized"},
	{event: "parse-error"},
	{event: "malformed-base64-body"},
	{event: "body-too-large"},
	{event: "get-405"},
	{event: "invalid-request"},
	{event: "upstream-down"},
	{event: "upstream-timeout"},
	{event: "delete-session"},
	// OAuth: acme trusts the test's issuer (oauthIssuer); the events name
	// their tokens as {{token:NAME}} (harness.tokens).
	{event: "oauth-metadata"},
	{event: "oauth-no-token"},
	{event: "oauth-tools-call"},
	{event: "oauth-expired"},
	{event: "oauth-wrong-audience"},
	{event: "oauth-insufficient-scope"},
	{event: "oauth-other-tenant"},
	{event: "oauth-alg-none"},
}

type harness struct {
	st     *dynamo.Store
	db     *dynamodb.Client // the raw table, for an item no writer would store
	tables dynamo.Tables
	fn     *lambdatest.Function
	last   events.APIGatewayV2HTTPResponse
	// issuer is acme's OAuth issuer, an https OpenID issuer on loopback
	// whose certificate the function trusts (SSL_CERT_FILE); tokens are
	// the tokens the events name.
	issuer *oidctest.Issuer
	tokens map[string]string
}

// TestFunction runs the real bootstrap under aws-lambda-rie against
// moto_server and the demo upstream, the stand-in for
// `sam local invoke GatewayFunction -e events/gateway/<case>.json`.
func TestFunction(t *testing.T) {
	bin := lambdatest.Build(t, "./functions/gateway")
	t.Run("events", func(t *testing.T) { testEvents(t, bin) })
	t.Run("refuses impossible timeouts", func(t *testing.T) { testBadTimeouts(t, bin) })
}

func testEvents(t *testing.T, bin string) {
	db := dynamotest.Start(t)
	up, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	h := &harness{st: db.Store(t, dynamo.Options{}), db: db.Client(t), tables: db.Tables, issuer: oidctest.Start(t, &oidctest.Options{TLS: true})}
	h.seed(t, up.URL)
	h.mintTokens(t)

	// The audit checkpoints' key, in moto's KMS (the template's
	// AuditSigningKey).
	kc := kms.New(kms.Options{Region: "us-east-1", BaseEndpoint: aws.String(db.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	key, err := kc.CreateKey(context.Background(), &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecEccNistP256, KeyUsage: kmstypes.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	h.fn = lambdatest.Start(t, bin, &lambdatest.Options{
		FunctionName: "aegis-GatewayFunction",
		Timeout:      6 * time.Second,
		Env: functionEnv(db, map[string]string{"UPSTREAM_TIMEOUT_SECS": "1", "FUNCTION_TIMEOUT_SECS": "6",
			"SSL_CERT_FILE":        h.issuer.CertFile(t, t.TempDir()),
			wiring.EnvAuditKMSKey:  aws.ToString(key.KeyMetadata.Arn),
			"AWS_ENDPOINT_URL_KMS": db.Endpoint,
			"AWS_REGION":           "us-east-1"}),
	})
	posted := map[string]bool{}
	for _, s := range steps {
		golden := s.golden
		if golden == "" {
			golden = s.event
		}
		t.Run(golden, func(t *testing.T) {
			if s.before != nil {
				s.before(h, t)
			}
			h.last = h.fn.Invoke(t, h.event(t, s.event))
			posted[s.event] = true
			got := replay.Normalize(t, h.last, replay.Stable{mcpSession, rlSession, delSession, traceID})
			got = []byte(strings.ReplaceAll(string(got), h.issuer.URL, "<issuer>"))
			for name, tok := range h.tokens {
				if strings.Contains(h.last.Body, tok) || strings.Contains(h.fn.Log(), tok) {
					t.Errorf("the %s token is in the response or the function's log", name)
				}
			}
			replay.Compare(t, goldenDir, golden, got, *update)
			if s.after != nil {
				s.after(h, t)
			}
		})
	}
	for _, name := range replay.Events(t, eventsDir) {
		if !posted[name] {
			t.Errorf("events/gateway/%s.json is not posted by any step", name)
		}
	}
	if log := h.fn.LogHas([]string{wiring.EnvAllowLoopback + "=1"}, 10*time.Second); !strings.Contains(log, wiring.EnvAllowLoopback+"=1") {
		t.Errorf("the loopback escape was not logged at start:\n%s", log)
	}
	t.Logf("INIT duration under aws-lambda-rie: %v", h.fn.InitDuration(t))

	// Every record the function wrote is chained by its execution
	// environment, and the trail verifies with the KMS key's public half.
	ctx := context.Background()
	vk, err := auditchain.KMSVerifier(ctx, kc, aws.ToString(key.KeyMetadata.Arn))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := auditchain.ParseVerifier(vk)
	d, err := auditchain.Collect(ctx, h.st, "acme", time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	rep := auditchain.Verify(d, []*auditchain.Verifier{v})
	if !rep.OK() || len(d.Records) == 0 || len(rep.Writers) == 0 || !strings.HasPrefix(rep.Writers[0].Writer, "lambda-") {
		t.Errorf("acme's audit trail: %d records, %+v", len(d.Records), rep)
	}
	for _, r := range d.Records {
		if !auditchain.Chained(r) {
			t.Errorf("record %s is not chained", r.CorrelationID)
		}
	}
}

// oauthResource is acme's resource as the events address it.
const oauthResource = "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/t/acme/mcp/crm"

// mintTokens signs the events' tokens with the issuer's key, valid for
// an hour from now (the function runs on the real clock), or expired an
// hour ago.
func (h *harness) mintTokens(t *testing.T) {
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := h.issuer.Claims(oauthResource, now, time.Hour)
		c["sub"], c["scope"] = caller, "mcp"
		if mod != nil {
			mod(c)
		}
		return c
	}
	k := h.issuer.Signing()
	h.tokens = map[string]string{
		"valid": h.issuer.Sign(t, k, claims(nil)),
		"expired": h.issuer.Sign(t, k, claims(func(c map[string]any) {
			c["iat"], c["nbf"], c["exp"] = now.Add(-2*time.Hour).Unix(), now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
		})),
		"wrong-audience": h.issuer.Sign(t, k, claims(func(c map[string]any) {
			c["aud"] = "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/t/vault/mcp"
		})),
		"no-scope": h.issuer.Sign(t, k, claims(func(c map[string]any) { c["scope"] = "profile" })),
		"alg-none": oidctest.Unsigned(t, claims(nil)),
	}
}

// event reads a recorded event, with the tokens it names put in.
func (h *harness) event(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(eventsDir, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for tn, tok := range h.tokens {
		s = strings.ReplaceAll(s, "{{token:"+tn+"}}", tok)
	}
	if strings.Contains(s, "{{token:") {
		t.Fatalf("events/gateway/%s.json names a token the harness has not minted", name)
	}
	return []byte(s)
}

// functionEnv is the template's environment for the function, pointed at
// moto_server, with the settings the events need.
func functionEnv(db dynamotest.Env, extra map[string]string) map[string]string {
	env := map[string]string{
		"AWS_ACCESS_KEY_ID":         "test",
		"AWS_SECRET_ACCESS_KEY":     "test",
		"AWS_ENDPOINT_URL_DYNAMODB": db.Endpoint,
		"AWS_EC2_METADATA_DISABLED": "true",
		"AEGIS_STATE_TABLE":         db.Tables.State,
		"AEGIS_AUDIT_TABLE":         db.Tables.Audit,
		"RATE_LIMIT_PER_SESSION":    strconv.Itoa(perSession),
		"RATE_LIMIT_PER_TOOL":       "0",
		"BILLING_ENABLED":           "1",
		"BILLING_ENFORCE":           "1",
		"QUOTA_FREE":                "2",
		"MAX_BODY_BYTES":            "2048",
		wiring.EnvAllowLoopback:     "1", // the demo upstream is on 127.0.0.1
		"AEGIS_LOG_LEVEL":           "info",
		"AEGIS_TRACE":               "off",
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// seed writes through the DynamoDB store what an operator would have set
// up: four tenants (acme with the demo upstream, capped at its quota, dark
// with an upstream that is down, vault withholding sensitive answers), their
// keys, sessions, a stopped tool.
func (h *harness) seed(t *testing.T, upstreamURL string) {
	ctx := context.Background()
	now := time.Now().UTC()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range []registry.Tenant{
		{ID: "acme", Tier: registry.TierGrowth, RefusalShape: registry.ShapeError, Created: now, Issuers: []registry.Issuer{{
			URL: h.issuer.URL, Audiences: []string{oauthResource}, RequiredScopes: []string{"mcp"},
		}}},
		{ID: "capped", Tier: registry.TierFree, Created: now},
		{ID: "dark", Tier: registry.TierGrowth, Created: now},
		// vault withholds answers that carry sensitive data (PII_ACTION=block
		// as its override; the deployment redacts).
		{ID: "vault", Tier: registry.TierGrowth, Content: registry.ContentActions{PII: "block"}, Created: now},
	} {
		must(h.st.PutTenant(ctx, tn))
	}
	// guarded has a policy set (guardedPolicy): echo only, within a grant.
	must(h.st.PutTenant(ctx, registry.Tenant{ID: "guarded", Tier: registry.TierGrowth, Created: now}))
	must(h.st.PutServer(ctx, registry.Server{Tenant: "guarded", Name: "crm", URL: upstreamURL, Created: now}))
	must(h.st.PutPolicy(ctx, registry.Policy{Tenant: "guarded", Source: guardedPolicy, Updated: now}))
	h.seedPolicies(t, upstreamURL, now)
	for _, k := range []struct{ tenant, secret string }{{"acme", acmeKey}, {"capped", cappedKey}, {"dark", darkKey}, {"vault", vaultKey}, {"guarded", guardedKey}} {
		rec, err := auth.KeyWithSecret(k.tenant, caller, k.secret, now)
		must(err)
		must(h.st.PutKey(ctx, rec))
	}
	for _, sv := range []registry.Server{
		{Tenant: "acme", Name: "crm", URL: upstreamURL, Tools: map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}}, Created: now},
		{Tenant: "capped", Name: "crm", URL: upstreamURL, Created: now},
		{Tenant: "vault", Name: "crm", URL: upstreamURL, Created: now},
		// Port 1 on loopback: nothing listens, the connection is refused.
		{Tenant: "dark", Name: "ledger", URL: "http://127.0.0.1:1/mcp", Created: now},
	} {
		must(h.st.PutServer(ctx, sv))
	}
	for _, id := range []string{mcpSession, rlSession, delSession} {
		r := session.Record{ID: id, Tenant: "acme", Caller: caller, Created: now, LastSeen: now}
		if id == rlSession {
			// Its own session window (kept in its record) full, for a
			// minute two ahead: a call before then counts in that later
			// window (session.Admitter), so that the refusal does not
			// depend on when the event is posted.
			r.Windows = session.Windows{Start: now.Truncate(ratelimit.Window).Add(2 * ratelimit.Window), Calls: perSession}
		}
		must(h.st.Create(ctx, r))
	}
	must(h.st.PutStop(ctx, killswitch.Stop{Tenant: "acme", Server: "crm", Tool: "fail", Reason: "incident INC-4471", By: "ops-alice", At: now}))
	// Fill capped's monthly meter, for this month and the next, so that
	// the refusal does not depend on when the event is posted.
	for at := now; at.Before(now.AddDate(0, 0, 32)); at = at.AddDate(0, 0, 28) {
		period, end := quota.Period(at)
		for range freeQuota {
			_, _, err := h.st.Incr(ctx, quota.Key("capped", period), freeQuota, end.Add(quota.Retention))
			must(err)
		}
	}
}

// guardedKey is tenant guarded's key.
const guardedKey = "aegis_guardedtest_P4oL7kJ1hG5fD8sA2qW6eR9t"

// guardedPolicy is tenant guarded's policy set: the manifest grants echo
// and transfer (leak is -32005 grant), Cedar permits echo only (transfer
// is -32003), and tools/list shows echo alone.
const guardedPolicy = `cedar_policies: |
  @id("echo-only")
  permit (principal, action == Action::"tools/call", resource == Tool::"crm/echo");
manifest:
  grants: {tools/call: ["crm/echo", "crm/transfer"]}
`

// approveHeld approves, through the store, the call the previous step held.
func (h *harness) approveHeld(t *testing.T) {
	var frame struct {
		Error struct {
			Code int `json:"code"`
			Data struct {
				ApprovalID string `json:"approval_id"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(h.last.Body), &frame); err != nil || frame.Error.Code != -32061 || frame.Error.Data.ApprovalID == "" {
		t.Fatalf("previous step did not hold the call (-32061 with approval_id): %v\n%s", err, h.last.Body)
	}
	_, err := h.st.DecideApproval(context.Background(), frame.Error.Data.ApprovalID,
		approval.Decision{Status: approval.Approved, By: "arn:aws:sts::123456789012:assumed-role/AegisOperator/ops-alice"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
}

// testBadTimeouts: a combination that cannot work stops the cold start
// with a message naming the settings, before any request is served.
func testBadTimeouts(t *testing.T, bin string) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no margin", map[string]string{"UPSTREAM_TIMEOUT_SECS": "10", "FUNCTION_TIMEOUT_SECS": "12"}, []string{"UPSTREAM_TIMEOUT_SECS=10", "FUNCTION_TIMEOUT_SECS=12"}},
		{"over API Gateway's limit", map[string]string{"UPSTREAM_TIMEOUT_SECS": "10", "FUNCTION_TIMEOUT_SECS": "30"}, []string{"FUNCTION_TIMEOUT_SECS=30"}},
		{"not passed", map[string]string{"UPSTREAM_TIMEOUT_SECS": "10"}, []string{"FUNCTION_TIMEOUT_SECS is not set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1"}
			for k, v := range tc.env {
				env[k] = v
			}
			fn := lambdatest.Start(t, bin, &lambdatest.Options{Env: env, Timeout: 6 * time.Second})
			ev, err := os.ReadFile(filepath.Join(eventsDir, "invoke-allowed.json"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fn.InvokeRaw(t.Context(), ev); err == nil {
				t.Fatal("the function served a request with an impossible timeout combination")
			}
			want := append(tc.want, "refusing to start")
			log := fn.LogHas(want, 10*time.Second)
			for _, w := range want {
				if !strings.Contains(log, w) {
					t.Errorf("start-up log does not name %q:\n%s", w, log)
				}
			}
		})
	}
}
