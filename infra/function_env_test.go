package infra

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestGatewayKnowsItsTimeout: Lambda does not expose a function's timeout,
// so the template passes the GatewayFunction's Timeout as
// FUNCTION_TIMEOUT_SECS, from the same mapping row, and the gateway checks
// shared/config's rule (UPSTREAM_TIMEOUT_SECS + 5 <= FUNCTION_TIMEOUT_SECS
// <= 29) at cold start.
func TestGatewayKnowsItsTimeout(t *testing.T) {
	tpl := loadTemplate(t)
	fn := get(t, tpl, "Resources", "GatewayFunction", "Properties")
	timeout := toStrings(get(t, fn, "Timeout"))
	env := toStrings(get(t, fn, "Environment", "Variables", "FUNCTION_TIMEOUT_SECS"))
	if !slices.Equal(env, timeout) {
		t.Errorf("GatewayFunction FUNCTION_TIMEOUT_SECS = %v, want the Timeout's %v", env, timeout)
	}
}

// TestNoLoopbackEscape: the Lambda harness's test-only switch
// (shared/wiring.EnvAllowLoopback) must never reach a deployment.
func TestNoLoopbackEscape(t *testing.T) {
	b, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "AEGIS_ALLOW_LOOPBACK_UPSTREAMS") {
		t.Error("template.yaml mentions AEGIS_ALLOW_LOOPBACK_UPSTREAMS, the test harness's loopback escape")
	}
}
