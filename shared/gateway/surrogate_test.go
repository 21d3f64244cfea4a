package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/registry"
)

// An approval must bind what the upstream receives. The params hash reads
// a lone surrogate escape as U+FFFD, so an approval of to:"acct-\ud800"
// used to let to:"acct-\udfff" run, and the upstream got the other string
// (issue 16, item 4). Both spellings are now refused with -32602 before
// any approval is asked for, and the upstream is never called.
func TestApprovalNotBoundToALoneSurrogate(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	must(t, e.Store.PutServer(ctx, registry.Server{Tenant: "acme", Name: "mock-primary", URL: e.UpA.URL,
		Tools: map[string]registry.ToolSettings{"transfer": {RequiresApproval: true}}}))
	approved := call("1", "transfer", `{"to":"acct-\ud800","amount":5}`)
	other := call("2", "transfer", `{"to":"acct-\udfff","amount":5}`)
	{
		path := "/v1/invoke"
		r := e.post(t, path, e.KeyA, approved)
		if r.code() == -32061 { // today's code: approve it, then try the other spelling
			var d struct {
				ID string `json:"approval_id"`
			}
			if json.Unmarshal(r.Error.Data, &d) == nil && d.ID != "" {
				if _, err := e.Store.DecideApproval(ctx, d.ID, approval.Decision{Status: approval.Approved, By: "alice"}, e.Clock.Now()); err != nil {
					t.Fatal(err)
				}
			}
		}
		if r.code() != -32602 {
			t.Errorf("%s, approved spelling: %s; want -32602 before any approval", path, r.Raw)
		}
		r2 := e.post(t, path, e.KeyA, other, "X-Session-ID", r.Header.Get("X-Session-ID"))
		if r2.code() != -32602 {
			t.Errorf("%s, other spelling after the first was approved: %s; want -32602", path, r2.Raw)
		}
		for _, x := range []reply{r, r2} {
			if x.Error != nil && (strings.Contains(x.Error.Message, "acct") || strings.Contains(x.Error.Message, "\ufffd")) {
				t.Errorf("%s: message %q echoes the value", path, x.Error.Message)
			}
		}
	}
	if n := e.UpA.Calls("transfer"); n != 0 {
		t.Errorf("upstream ran transfer %d times; want 0", n)
	}
	// A valid pair (an emoji) is one string with one reading: it is held
	// for approval as usual.
	if r := e.post(t, "/v1/invoke", e.KeyA, call("3", "transfer", `{"to":"acct-\ud83d\ude00","amount":5}`)); r.code() != -32061 {
		t.Errorf("valid surrogate pair: %s; want -32061 pending approval", r.Raw)
	}
}
