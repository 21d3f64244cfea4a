package gateway_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// A -32004 answer carries Retry-After: retry_after_ms in whole seconds,
// rounded up; the HTTP status stays 200 (seed 004). Other answers carry
// none.
func TestRetryAfterOnRateLimited(t *testing.T) {
	e := newEnv(t, func(s *config.Settings, _ *memstore.Store) { s.RateLimitPerSession = 1 })
	e.Clock.Advance(20*time.Second + 500*time.Millisecond) // 12:00:20.5: 39.5 s left in the minute
	r := e.post(t, "/v1/invoke", e.KeyA, `{"jsonrpc":"2.0","id":"l","method":"tools/list"}`)
	sid := r.Header.Get("X-Session-ID")
	first := e.post(t, "/v1/invoke", e.KeyA, call("1", "echo", `{"message":"x"}`), "X-Session-ID", sid)
	if first.code() != 0 || first.Header.Get("Retry-After") != "" {
		t.Fatalf("first call: %s, Retry-After %q", first.Raw, first.Header.Get("Retry-After"))
	}
	second := e.post(t, "/v1/invoke", e.KeyA, call("2", "echo", `{"message":"x"}`), "X-Session-ID", sid)
	if second.code() != -32004 || second.Status != http.StatusOK {
		t.Fatalf("want -32004 with HTTP 200: %d %s", second.Status, second.Raw)
	}
	var d struct {
		RetryAfterMs int64 `json:"retry_after_ms"`
	}
	_ = json.Unmarshal(second.Error.Data, &d)
	if d.RetryAfterMs != 39500 || second.Header.Get("Retry-After") != "40" {
		t.Fatalf("retry_after_ms %d, Retry-After %q; want 39500 and 40", d.RetryAfterMs, second.Header.Get("Retry-After"))
	}
	// A refusal of another kind has no Retry-After.
	unknown := e.post(t, "/v1/invoke", e.KeyA, call("3", "no_such_tool", `{}`))
	if unknown.code() != -32601 || unknown.Header.Get("Retry-After") != "" {
		t.Fatalf("unknown tool: %s, Retry-After %q", unknown.Raw, unknown.Header.Get("Retry-After"))
	}
}
