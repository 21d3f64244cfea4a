package infra

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-gw/aegis/internal/testtools"
)

const templatePath = "../template.yaml"

// TestCfnLint runs cfn-lint (SAM transform included) on template.yaml. Its
// exit status is a bit mask: 2 errors, 4 warnings, 8 informational. Errors
// and warnings fail; informational findings are only logged.
func TestCfnLint(t *testing.T) {
	bin := testtools.Path(t, "cfn-lint")
	cmd := exec.Command(bin, "--format", "parseable", "--", templatePath)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		t.Logf("cfn-lint: no findings")
	case errors.As(err, &exit):
		code := exit.ExitCode()
		if code&(2|4) != 0 || code&^(2|4|8) != 0 {
			t.Fatalf("cfn-lint exit %d (2 = errors, 4 = warnings):\n%s", code, out)
		}
		t.Logf("cfn-lint informational findings:\n%s", out)
	default:
		t.Fatalf("cfn-lint: %v\n%s", err, out)
	}
}

// loadTemplate decodes template.yaml as plain YAML: CloudFormation's short
// tags (!Ref, !Sub, ...) are dropped, so `!Ref X` reads as "X".
func loadTemplate(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// get walks a path of map keys and list indexes ("Resources", "X", ...).
func get(t *testing.T, v any, path ...string) any {
	t.Helper()
	for i, p := range path {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[p]; !ok {
				t.Fatalf("template: no %s", strings.Join(path[:i+1], "."))
			}
		case []any:
			n, err := strconv.Atoi(p)
			if err != nil || n >= len(x) {
				t.Fatalf("template: no %s", strings.Join(path[:i+1], "."))
			}
			v = x[n]
		default:
			t.Fatalf("template: %s is not a map or list", strings.Join(path[:i], "."))
		}
	}
	return v
}

func str(v any) string { return fmt.Sprint(v) }

// settings are design §2.3's variables with the seed's defaults; each is a
// template parameter with that default, passed to the functions.
var settings = []struct{ env, param, def string }{
	{"APPROVAL_TTL_SECS", "ApprovalTtlSecs", "3600"},
	{"UPSTREAM_TIMEOUT_SECS", "UpstreamTimeoutSecs", "10"},
	{"UPSTREAM_MAX_RETRIES", "UpstreamMaxRetries", "2"},
	{"CIRCUIT_FAILURE_THRESHOLD", "CircuitFailureThreshold", "5"},
	{"CIRCUIT_COOLDOWN_SECS", "CircuitCooldownSecs", "10"},
	{"UPSTREAM_MAX_CONCURRENT", "UpstreamMaxConcurrent", "64"},
	{"RATE_LIMIT_PER_SESSION", "RateLimitPerSession", "120"},
	{"RATE_LIMIT_PER_TOOL", "RateLimitPerTool", "60"},
	{"THREAT_MODE", "ThreatMode", "block"},
	{"INPUT_VALIDATION", "InputValidation", "block"},
	{"EGRESS_ACTION", "EgressAction", "block"},
	{"PII_ACTION", "PiiAction", "redact"},
	{"BILLING_ENFORCE", "BillingEnforce", "0"},
}

func TestSettingsAreParametersWithSeedDefaults(t *testing.T) {
	tpl := loadTemplate(t)
	env := get(t, tpl, "Globals", "Function", "Environment", "Variables").(map[string]any)
	for _, s := range settings {
		if got := str(env[s.env]); got != s.param {
			t.Errorf("Globals env %s = %q, want !Ref %s", s.env, got, s.param)
		}
		if got := str(get(t, tpl, "Parameters", s.param, "Default")); got != s.def {
			t.Errorf("parameter %s default = %s, want the seed's %s", s.param, got, s.def)
		}
	}
	// The names the DynamoDB store and the approval notifier read
	// (shared/dynamo.EnvStateTable, EnvAuditTable; shared/approval SNS).
	for k, want := range map[string]string{
		"AEGIS_STATE_TABLE":        "AegisState",
		"AEGIS_AUDIT_TABLE":        "AegisAudit",
		"AEGIS_APPROVAL_TOPIC_ARN": "ApprovalTopic",
	} {
		if got := str(env[k]); got != want {
			t.Errorf("Globals env %s = %q, want !Ref %s", k, got, want)
		}
	}
}

// TestTimeoutRule pins the rule the template's comment states: the gateway
// function's timeout is UPSTREAM_TIMEOUT_SECS + 5 s (the gateway answers
// -32064 itself and audits it) and under API Gateway's 30 s limit, for every
// value the parameter allows.
func TestTimeoutRule(t *testing.T) {
	tpl := loadTemplate(t)
	if got := get(t, tpl, "Resources", "GatewayFunction", "Properties", "Timeout"); !slices.Equal(toStrings(got), []string{"FunctionTimeout", "UpstreamTimeoutSecs", "Seconds"}) {
		t.Fatalf("GatewayFunction Timeout = %v, want !FindInMap [FunctionTimeout, !Ref UpstreamTimeoutSecs, Seconds]", got)
	}
	p := get(t, tpl, "Parameters", "UpstreamTimeoutSecs").(map[string]any)
	lo, hi := p["MinValue"].(int), p["MaxValue"].(int)
	m := get(t, tpl, "Mappings", "FunctionTimeout").(map[string]any)
	if len(m) != hi-lo+1 {
		t.Errorf("FunctionTimeout has %d keys; UpstreamTimeoutSecs allows %d..%d", len(m), lo, hi)
	}
	for u := lo; u <= hi; u++ {
		row, ok := m[strconv.Itoa(u)].(map[string]any)
		if !ok {
			t.Errorf("FunctionTimeout has no key %d", u)
			continue
		}
		fn := row["Seconds"].(int)
		if fn != u+5 || fn >= 30 {
			t.Errorf("upstream %d s -> function %d s; want %d s and under 30 s", u, fn, u+5)
		}
	}
	if def := p["Default"].(int); m[strconv.Itoa(def)].(map[string]any)["Seconds"] != 15 {
		t.Errorf("default upstream timeout %d s should give the documented 15 s function timeout", def)
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		out = append(out, str(x))
	}
	return out
}

func TestTables(t *testing.T) {
	tpl := loadTemplate(t)
	for _, name := range []string{"AegisState", "AegisAudit"} {
		p := get(t, tpl, "Resources", name, "Properties")
		if got := str(get(t, p, "BillingMode")); got != "PAY_PER_REQUEST" {
			t.Errorf("%s BillingMode = %s", name, got)
		}
		keys := fmt.Sprint(get(t, p, "KeySchema"))
		attrs := fmt.Sprint(get(t, p, "AttributeDefinitions"))
		if keys != "[map[AttributeName:pk KeyType:HASH] map[AttributeName:sk KeyType:RANGE]]" ||
			attrs != "[map[AttributeName:pk AttributeType:S] map[AttributeName:sk AttributeType:S]]" {
			t.Errorf("%s keys = %s %s; want pk (S, HASH), sk (S, RANGE) as shared/dynamo.TableDefinitions", name, keys, attrs)
		}
		if str(get(t, p, "TimeToLiveSpecification", "AttributeName")) != "ttl" || get(t, p, "TimeToLiveSpecification", "Enabled") != true {
			t.Errorf("%s: TTL must be on attribute ttl", name)
		}
		if get(t, p, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled") != true {
			t.Errorf("%s: point-in-time recovery must be on", name)
		}
		if str(get(t, tpl, "Resources", name, "DeletionPolicy")) != "Retain" {
			t.Errorf("%s: state must survive a stack deletion (DeletionPolicy Retain)", name)
		}
	}
}

func TestRoutes(t *testing.T) {
	tpl := loadTemplate(t)
	type route struct{ fn, method, path string }
	want := []route{
		{"GatewayFunction", "POST", "/mcp"}, {"GatewayFunction", "GET", "/mcp"}, {"GatewayFunction", "DELETE", "/mcp"},
		{"GatewayFunction", "POST", "/mcp/{server}"}, {"GatewayFunction", "GET", "/mcp/{server}"}, {"GatewayFunction", "DELETE", "/mcp/{server}"},
		{"GatewayFunction", "POST", "/v1/invoke"},
		{"GatewayFunction", "POST", "/t/{tenant}/mcp"}, {"GatewayFunction", "GET", "/t/{tenant}/mcp"}, {"GatewayFunction", "DELETE", "/t/{tenant}/mcp"},
		{"GatewayFunction", "POST", "/t/{tenant}/mcp/{server}"}, {"GatewayFunction", "GET", "/t/{tenant}/mcp/{server}"}, {"GatewayFunction", "DELETE", "/t/{tenant}/mcp/{server}"},
		{"GatewayFunction", "POST", "/t/{tenant}/v1/invoke"},
		{"GatewayFunction", "GET", "/t/{tenant}/connect/start"}, {"GatewayFunction", "GET", "/t/{tenant}/connect/callback"},
		{"GatewayFunction", "GET", "/.well-known/oauth-protected-resource"}, {"GatewayFunction", "GET", "/.well-known/oauth-protected-resource/{proxy+}"},
		{"AdminFunction", "ANY", "/admin/v1/{proxy+}"},
	}
	var got []route
	for _, fn := range []string{"GatewayFunction", "AdminFunction"} {
		evs := get(t, tpl, "Resources", fn, "Properties", "Events").(map[string]any)
		for name, ev := range evs {
			p := get(t, ev, "Properties")
			if str(get(t, ev, "Type")) != "HttpApi" || str(get(t, p, "ApiId")) != "GatewayApi" {
				t.Errorf("%s.%s is not a route of GatewayApi", fn, name)
			}
			r := route{fn, str(get(t, p, "Method")), str(get(t, p, "Path"))}
			got = append(got, r)
			auth, _ := p.(map[string]any)["Auth"].(map[string]any)
			iam := auth != nil && str(auth["Authorizer"]) == "AWS_IAM"
			if admin := strings.HasPrefix(r.path, "/admin/"); admin != iam {
				t.Errorf("%s %s: IAM authorization %v; admin routes (and only they) must use AWS_IAM", r.method, r.path, iam)
			}
		}
	}
	key := func(r route) string { return r.fn + " " + r.method + " " + r.path }
	slices.SortFunc(got, func(a, b route) int { return strings.Compare(key(a), key(b)) })
	slices.SortFunc(want, func(a, b route) int { return strings.Compare(key(a), key(b)) })
	if !slices.Equal(got, want) {
		t.Errorf("routes:\n got %v\nwant %v", got, want)
	}
	if get(t, tpl, "Resources", "GatewayApi", "Properties", "StageName") != "$default" {
		t.Error("the HTTP API must use the $default stage (no stage prefix in rawPath)")
	}
	if get(t, tpl, "Resources", "GatewayApi", "Properties", "Auth", "EnableIamAuthorizer") != true {
		t.Error("GatewayApi must enable the IAM authorizer")
	}
}

// TestFunctionsBuildWithMakefile checks every function against the design's
// runtime choices and the Makefile target SAM will call for it.
func TestFunctionsBuildWithMakefile(t *testing.T) {
	tpl := loadTemplate(t)
	glob := get(t, tpl, "Globals", "Function")
	for k, want := range map[string]string{"Runtime": "provided.al2023", "Architectures": "[arm64]", "Handler": "bootstrap", "CodeUri": ".", "Tracing": "Active"} {
		if got := str(get(t, glob, k)); got != want {
			t.Errorf("Globals.Function.%s = %s, want %s", k, got, want)
		}
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	makeBin := testtools.Path(t, "make")
	for name, r := range get(t, tpl, "Resources").(map[string]any) {
		if str(get(t, r, "Type")) != "AWS::Serverless::Function" {
			continue
		}
		if str(get(t, r, "Metadata", "BuildMethod")) != "makefile" {
			t.Errorf("%s: Metadata.BuildMethod must be makefile", name)
		}
		if str(get(t, r, "Properties", "LoggingConfig", "LogFormat")) != "JSON" {
			t.Errorf("%s: LoggingConfig.LogFormat must be JSON", name)
		}
		// EMF metric lines carry no "level": Lambda files them as INFO, so a
		// higher application level would drop the metrics the alarms read.
		if lvl := str(get(t, r, "Properties", "LoggingConfig", "ApplicationLogLevel")); !slices.Contains([]string{"TRACE", "DEBUG", "INFO"}, lvl) {
			t.Errorf("%s: ApplicationLogLevel %s would drop EMF metric lines", name, lvl)
		}
		target := "build-" + name
		if !strings.Contains(string(mk), "\n"+target+":") {
			t.Errorf("Makefile has no target %s", target)
			continue
		}
		dir := "./functions/" + strings.ToLower(strings.TrimSuffix(name, "Function"))
		out, err := exec.Command(makeBin, "-s", "-n", "-C", "..", target, "ARTIFACTS_DIR=/artifacts").CombinedOutput()
		if err != nil {
			t.Errorf("make -n %s: %v\n%s", target, err, out)
			continue
		}
		cmd := string(out)
		for _, want := range []string{"GOOS=linux GOARCH=arm64 CGO_ENABLED=0 ", "go build ", "-tags lambda.norpc", "-trimpath", "-ldflags='-s -w'", "-o /artifacts/bootstrap " + dir} {
			if !strings.Contains(cmd, want) {
				t.Errorf("make %s runs %q; missing %q", target, strings.TrimSpace(cmd), want)
			}
		}
	}
}
