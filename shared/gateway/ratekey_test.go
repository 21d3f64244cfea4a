package gateway_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/memstore"
)

// TestRateLimitPerKeySpansSessions (issue 16 item 5): minting a session
// every few calls buys no fresh window. With RATE_LIMIT_PER_KEY=L exactly L
// calls reach the upstream in the minute; the rest are -32004 scope key.
func TestRateLimitPerKeySpansSessions(t *testing.T) {
	const limit, calls = 9, 40
	e := newEnv(t, func(s *config.Settings, _ *memstore.Store) { s.RateLimitPerKey = limit })
	admitted, refused, sid := 0, 0, ""
	for i := range calls {
		var hdr []string
		if i%4 != 0 && sid != "" { // a new session every 4 calls
			hdr = []string{"X-Session-ID", sid}
		}
		r := e.post(t, "/v1/invoke", e.KeyA, call(strconv.Itoa(i+1), "echo", `{"message":"hi"}`), hdr...)
		if s := r.Header.Get("X-Session-ID"); s != "" {
			sid = s
		}
		switch r.code() {
		case 0:
			admitted++
		case -32004:
			var d struct {
				Scope string `json:"scope"`
				Limit int    `json:"limit"`
			}
			_ = json.Unmarshal(r.Error.Data, &d)
			if d.Scope != "key" || d.Limit != limit {
				t.Fatalf("call %d: -32004 data %s, want scope key, limit %d", i+1, r.Error.Data, limit)
			}
			refused++
		default:
			t.Fatalf("call %d: %s", i+1, r.Raw)
		}
	}
	if admitted != limit || refused != calls-limit {
		t.Fatalf("admitted %d, refused %d; want %d and %d", admitted, refused, limit, calls-limit)
	}
	if n := e.UpA.Calls("echo"); n != limit {
		t.Fatalf("upstream ran echo %d times, want exactly %d", n, limit)
	}
	// Another key has its own window.
	if r := e.post(t, "/v1/invoke", e.KeyB, call("99", "echo", `{"message":"hi"}`)); r.code() != 0 {
		t.Fatalf("another key: %s", r.Raw)
	}
}
