package gateway_test

// A role or Cedar refusal that reads no context.session is foreseen by the
// policy stage and taken before anything is counted (docs/design/cost.md,
// decision 11); its answer is still the first refusal in the public
// order, read from the stages ahead of it and the policy's own Peek. The
// same bodies run on the embedded store and on DynamoDB (moto_server),
// two gateway instances over one store.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
)

// foreseenPolicy forbids echo with the message "no" (reading the
// arguments, not the session), holds echo with "approve" for approval,
// allows the rest, and bounds the session's idle time (the manifest gate,
// which reads the session's record).
const foreseenPolicy = `manifest: {max_idle_secs: 30}
cedar_policies: |
  @id("all")
  permit (principal, action, resource);
  @id("held")
  @approval("required")
  permit (principal, action == Action::"tools/call", resource)
  when { resource.name == "echo" && context.arguments.message == "approve" };
  @id("no")
  forbid (principal, action == Action::"tools/call", resource)
  when { resource.name == "echo" && context.arguments.message == "no" };
`

func TestPolicyForeseenRefusalKeepsTheOrder(t *testing.T) {
	runForeseenOrder(t, memStores)
}

func TestPolicyForeseenRefusalKeepsTheOrderOnDynamoDB(t *testing.T) {
	runForeseenOrder(t, dynStores(dynamotest.Start(t)))
}

// runForeseenOrder: for each case, fill the limit the case sets tight
// (allowed echo calls), then send, three times, a call that Cedar refuses
// (or holds) and that the tight limit, or the manifest, would also
// refuse: the answer is the earlier one's, and no counter moved.
func runForeseenOrder(t *testing.T, stores holdStores) {
	st := stores(t, 2)
	cases := []struct {
		name     string
		tune     func(*config.Settings)
		quota    int64
		fill     int
		message  string
		idle     bool // sent in a session idle past the manifest's max_idle_secs
		wantCode int
		wantData [2]string // a data member and its value
		held     bool      // an approval is written: the state is not compared
	}{
		{name: "session window full", tune: func(s *config.Settings) { s.RateLimitPerSession = 2 }, fill: 2, message: "no", wantCode: -32004, wantData: [2]string{"scope", ratelimit.ScopeSession}},
		{name: "key window full", tune: func(s *config.Settings) { s.RateLimitPerKey = 2 }, fill: 2, message: "no", wantCode: -32004, wantData: [2]string{"scope", ratelimit.ScopeKey}},
		{name: "quota spent", quota: 2, fill: 2, message: "no", wantCode: -32060},
		{name: "manifest idle", fill: 1, message: "no", idle: true, wantCode: -32005, wantData: [2]string{"reason", "idle"}},
		{name: "cedar only", fill: 1, message: "no", wantCode: -32003},
		{name: "approval still held", fill: 1, message: "approve", wantCode: -32061, held: true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tune := func(s *config.Settings) {
				s.RateLimitPerSession, s.RateLimitPerTool, s.RateLimitPerKey = roomyRate, roomyRate, roomyRate
				if tc.tune != nil {
					tc.tune(s)
				}
			}
			q := tc.quota
			if q == 0 {
				q = roomyQuota
			}
			e := newHoldEnv(t, st, fmt.Sprintf("fs%d", i), tune, q)
			ctx := context.Background()
			must(t, e.st.PutPolicy(ctx, registry.Policy{Tenant: e.tenant, Source: foreseenPolicy, Updated: e.now}))
			sid := e.session
			if tc.idle {
				sid = sessioncheck.NewID()
				must(t, e.st.Create(ctx, session.Record{ID: sid, Tenant: e.tenant, Caller: holdCaller,
					Created: e.now.Add(-10 * time.Minute), LastSeen: e.now, LastAllowed: e.now.Add(-5 * time.Minute)}))
			}
			for range tc.fill {
				if r := e.mustSend(toolParams("echo", `{"message":"fill"}`)); r.Code != 0 {
					t.Fatalf("fill call refused: %s", r.Raw)
				}
			}
			before, keyBefore := e.counts(), e.keyWindow()
			for range 3 {
				r, err := e.send(toolParams("echo", fmt.Sprintf(`{"message":%q}`, tc.message)), sid)
				if err != nil {
					t.Fatal(err)
				}
				if r.Code != tc.wantCode {
					t.Fatalf("want %d: %s", tc.wantCode, r.Raw)
				}
				if k := tc.wantData[0]; k != "" && r.Data[k] != tc.wantData[1] {
					t.Fatalf("want %s %s: %s", k, tc.wantData[1], r.Raw)
				}
			}
			if tc.held {
				return
			}
			if got := e.counts(); got != before {
				t.Errorf("refused calls moved the state: %+v\n\twas %+v", got, before)
			}
			if got := e.keyWindow(); got != keyBefore {
				t.Errorf("refused calls moved the key window: %d, was %d", got, keyBefore)
			}
		})
	}
}
