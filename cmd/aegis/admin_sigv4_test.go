package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/apigw"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// The CLI against the deployed stack's admin routes: API Gateway checks a
// SigV4 signature and hands the AdminFunction the caller's IAM ARN. Here a
// loopback stand-in for API Gateway verifies the signature with its own
// implementation of the SigV4 algorithm (not the SDK's signer), then serves
// the real admin handler (TrustIAM) through the real Lambda adapter.

const (
	testAKID   = "AKIDAEGISTEST0000001"
	testSecret = "aegis-test-secret-access-key-0123456789"
	testToken  = "aegis-test-session-token"
	testARN    = "arn:aws:sts::123456789012:assumed-role/AegisOperator/alice"
)

// apiGatewayStandIn plays API Gateway with IAM authorization: it records
// why it refused requests, for the assertions.
type apiGatewayStandIn struct {
	t       *testing.T
	region  string
	admin   http.Handler
	refused []string
}

func (g *apiGatewayStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := verifySigV4(r, body, g.region, time.Now()); err != nil {
		g.refused = append(g.refused, err.Error())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `{"message":%q}`, "Forbidden")
		return
	}
	ev := &events.APIGatewayV2HTTPRequest{
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Headers:        map[string]string{},
		Body:           string(body),
	}
	for k, v := range r.Header {
		ev.Headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev.RequestContext.Stage = "$default"
	ev.RequestContext.HTTP.Method = r.Method
	ev.RequestContext.HTTP.SourceIP = "127.0.0.1"
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
		IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{AccessKey: testAKID, UserARN: testARN},
	}
	resp := apigw.Serve(r.Context(), g.admin, ev)
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, resp.Body)
}

// verifySigV4 checks r's AWS4-HMAC-SHA256 signature for the execute-api
// service as AWS documents the algorithm: canonical request, string to
// sign, derived key. Paths in these tests need no escaping beyond what
// EscapedPath gives.
func verifySigV4(r *http.Request, body []byte, region string, now time.Time) error {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("not a SigV4 Authorization header: %.20q", auth)
	}
	fields := map[string]string{}
	for _, f := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	amzDate := r.Header.Get("X-Amz-Date")
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %v", err)
	}
	if d := now.Sub(at); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("signed %s ago", d)
	}
	scope := amzDate[:8] + "/" + region + "/execute-api/aws4_request"
	if fields["Credential"] != testAKID+"/"+scope {
		return fmt.Errorf("credential scope %q", fields["Credential"])
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	for _, must := range []string{"host", "x-amz-date", "x-amz-security-token"} {
		if !slices.Contains(signed, must) {
			return fmt.Errorf("%s is not signed (%v)", must, signed)
		}
	}
	if r.Header.Get("X-Amz-Security-Token") != testToken {
		return fmt.Errorf("session token missing")
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	if got := r.Header.Get("X-Amz-Content-Sha256"); got != "" && got != payload {
		return fmt.Errorf("x-amz-content-sha256 %s is not the body's hash", got)
	}
	var hdrs strings.Builder
	for _, h := range signed {
		v := r.Header.Get(h)
		if h == "host" {
			v = r.Host
		}
		hdrs.WriteString(h + ":" + strings.Join(strings.Fields(v), " ") + "\n")
	}
	canonical := strings.Join([]string{
		r.Method, r.URL.EscapedPath(), canonicalQuery(r.URL.Query()),
		hdrs.String(), fields["SignedHeaders"], payload,
	}, "\n")
	crh := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(crh[:])
	key := []byte("AWS4" + testSecret)
	for _, part := range []string{amzDate[:8], region, "execute-api", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return fmt.Errorf("signature does not match")
	}
	return nil
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// canonicalQuery sorts by name then value and escapes as RFC 3986 does.
func canonicalQuery(q url.Values) string {
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, rfc3986(k)+"="+rfc3986(v))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

func rfc3986(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

func startAPIGatewayStandIn(t *testing.T, region string) (*httptest.Server, *apiGatewayStandIn) {
	t.Helper()
	m := memstore.New()
	h, err := admin.New(m, &admin.Options{
		TrustIAM: apigw.IAMPrincipal,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	g := &apiGatewayStandIn{t: t, region: region, admin: h}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv, g
}

// awsEnv gives the CLI static credentials and nothing else from the machine.
func awsEnv(t *testing.T, secret string) {
	t.Setenv("AWS_ACCESS_KEY_ID", testAKID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", testToken)
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv(envAdminKey, "")
}

func TestAdminCLISigV4(t *testing.T) {
	srv, g := startAPIGatewayStandIn(t, "eu-west-1")
	awsEnv(t, testSecret)
	sig := []string{"--url", srv.URL, "--sigv4", "--region", "eu-west-1"}

	// A POST with a body, a GET, and a GET with a query string.
	if code, _, stderr := runCLI(t, append([]string{"tenants", "create", "acme", "--tier", "growth"}, sig...)...); code != 0 {
		t.Fatalf("tenants create: exit %d: %s (stand-in refused: %v)", code, stderr, g.refused)
	}
	if code, _, stderr := runCLI(t, append([]string{"servers", "add", "--tenant", "acme", "--name", "s1", "--server-url", "https://mcp.example.com/mcp"}, sig...)...); code != 0 {
		t.Fatalf("servers add: exit %d: %s (stand-in refused: %v)", code, stderr, g.refused)
	}
	code, out, stderr := runCLI(t, append([]string{"tools", "stop", "--tenant", "acme", "--server", "s1", "--tool", "deploy", "--unlisted", "--by", "alice", "--json"}, sig...)...)
	if code != 0 {
		t.Fatalf("tools stop: exit %d: %s (stand-in refused: %v)", code, stderr, g.refused)
	}
	// The admin function recorded the IAM principal API Gateway verified.
	if !strings.Contains(out, "alice via "+testARN) {
		t.Errorf("stop is not attributed to the IAM principal: %s", out)
	}
	if code, out, stderr = runCLI(t, append([]string{"tenants", "list", "--json"}, sig...)...); code != 0 || !strings.Contains(out, `"acme"`) {
		t.Fatalf("tenants list: exit %d: %s %s", code, out, stderr)
	}
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if code, out, stderr = runCLI(t, append([]string{"audit", "--tenant", "acme", "--from", from, "--limit", "5", "--json"}, sig...)...); code != 0 {
		t.Fatalf("audit (query string signed): exit %d: %s %s (refused: %v)", code, out, stderr, g.refused)
	}
	if len(g.refused) != 0 {
		t.Fatalf("stand-in refused signed requests: %v", g.refused)
	}

	// A wrong secret: API Gateway answers 403; the CLI says so, exits 1,
	// and prints no credential.
	awsEnv(t, "wrong-secret-access-key-wrong-wrong-000")
	code, out, stderr = runCLI(t, append([]string{"tenants", "list"}, sig...)...)
	if code != 1 || !strings.Contains(stderr, "HTTP 403") {
		t.Errorf("wrong secret: exit %d, stderr %q, want 1 and HTTP 403", code, stderr)
	}
	if len(g.refused) != 1 || !strings.Contains(g.refused[0], "signature does not match") {
		t.Errorf("stand-in should have refused one request for its signature: %v", g.refused)
	}
	for _, secret := range []string{"wrong-secret-access-key", testSecret, testToken} {
		if strings.Contains(out+stderr, secret) {
			t.Errorf("CLI output carries a credential (%q)", secret)
		}
	}

	// Without --sigv4 and without an admin key, a loopback URL is an error
	// that points at both ways in; nothing is sent.
	before := len(g.refused)
	code, _, stderr = runCLI(t, "tenants", "list", "--url", srv.URL)
	if code != 1 || !strings.Contains(stderr, envAdminKey+" is not set") || !strings.Contains(stderr, "--sigv4") {
		t.Errorf("no key, no --sigv4: exit %d, %q", code, stderr)
	}
	if len(g.refused) != before {
		t.Errorf("a request was sent without credentials")
	}
}

// With both an admin key and --sigv4, only the signature is sent: the
// admin key never travels to an AWS endpoint.
func TestAdminCLISigV4NeverSendsTheAdminKey(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"tenants":[]}`)
	}))
	defer srv.Close()
	awsEnv(t, testSecret)
	adminKey := "aegis-admin-key-that-must-stay-home-0001"
	t.Setenv(envAdminKey, adminKey)
	if code, _, stderr := runCLI(t, "tenants", "list", "--url", srv.URL, "--sigv4", "--region", "us-east-1"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for k, vs := range got {
		for _, v := range vs {
			if strings.Contains(v, adminKey) {
				t.Errorf("header %s carries the admin key", k)
			}
		}
	}
	if !strings.HasPrefix(got.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		t.Errorf("Authorization = %q, want a SigV4 signature", got.Get("Authorization"))
	}
}

func TestExecuteAPIRegion(t *testing.T) {
	for raw, want := range map[string]string{
		"https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com":          "us-east-1",
		"https://a1b2c3d4e5.execute-api.eu-central-1.amazonaws.com/admin": "eu-central-1",
		"https://a1b2c3d4e5.execute-api.cn-north-1.amazonaws.com.cn":      "cn-north-1",
		"https://A1B2.EXECUTE-API.AP-SOUTH-1.AMAZONAWS.COM":               "ap-south-1",
		"http://127.0.0.1:8080":                                      "",
		"https://gateway.example.com":                                "",
		"https://execute-api.us-east-1.amazonaws.com.evil.example":   "",
		"https://x.execute-api.us-east-1.amazonaws.com.evil.example": "",
	} {
		u, _ := url.Parse(raw)
		got, ok := executeAPIRegion(u)
		if got != want || ok != (want != "") {
			t.Errorf("%s: got %q, %v; want %q", raw, got, ok, want)
		}
	}
	// An execute-api URL turns signing on by itself.
	awsEnv(t, testSecret)
	s, err := newSigner(context.Background(), "https://a1b2c3d4e5.execute-api.us-west-2.amazonaws.com", false, "")
	if err != nil || s == nil || s.region != "us-west-2" {
		t.Fatalf("newSigner = %+v, %v; want a us-west-2 signer", s, err)
	}
	if s, err := newSigner(context.Background(), "http://127.0.0.1:8080", false, ""); s != nil || err != nil {
		t.Errorf("loopback URL without --sigv4: signer %+v, %v; want bearer mode", s, err)
	}
	if _, err := newSigner(context.Background(), "http://127.0.0.1:8080", true, ""); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("--sigv4 with no region anywhere: %v, want an error naming the region", err)
	}
}
