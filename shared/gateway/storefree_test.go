package gateway_test

// Store-free stages are decided first (docs/design/cost.md, decision 9):
// a call that the content stage (or routing, the kill switch, params)
// refuses counts nothing, and its answer is still the first refusal in the
// public order: a call that a counting stage ahead of it would also refuse
// gets that stage's answer. The same bodies run on the embedded store and
// on DynamoDB (moto_server), two gateway instances over one store.

import (
	"context"
	"fmt"
	"testing"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/ratelimit"
)

// cardArgs carry a card number: the content stage refuses them -32053
// (EGRESS_ACTION=block, the default).
const cardArgs = `{"message":"card 4111 1111 1111 1111"}`

func TestStoreFreeRefusalKeepsTheOrder(t *testing.T) {
	runStoreFreeOrder(t, memStores)
}

func TestStoreFreeRefusalKeepsTheOrderOnDynamoDB(t *testing.T) {
	runStoreFreeOrder(t, dynStores(dynamotest.Start(t)))
}

// runStoreFreeOrder: for each case, fill the limit the case sets tight
// (allowed echo calls), then send a call that carries a card number and
// that the tight limit (or an earlier store-free stage) would also refuse:
// the answer is the earlier stage's, and no counter moved. The "content
// only" case has room everywhere: the content stage's -32053, three times,
// spends nothing of the budgets, and the next allowed call counts one.
func runStoreFreeOrder(t *testing.T, stores holdStores) {
	st := stores(t, 2)
	cases := []struct {
		name     string
		tune     func(*config.Settings)
		quota    int64
		fill     int    // allowed echo calls first
		tool     string // the refused call's tool
		session  string // "" the env's session; else sent as is
		wantCode int
		wantData string // data.scope of a -32004
	}{
		{name: "session window full", tune: func(s *config.Settings) { s.RateLimitPerSession = 2 }, fill: 2, tool: "echo", wantCode: -32004, wantData: ratelimit.ScopeSession},
		{name: "tool window full", tune: func(s *config.Settings) { s.RateLimitPerTool = 2 }, fill: 2, tool: "echo", wantCode: -32004, wantData: ratelimit.ScopeTool},
		{name: "key window full", tune: func(s *config.Settings) { s.RateLimitPerKey = 2 }, fill: 2, tool: "echo", wantCode: -32004, wantData: ratelimit.ScopeKey},
		{name: "quota spent", quota: 2, fill: 2, tool: "echo", wantCode: -32060},
		{name: "unknown session", fill: 1, tool: "echo", session: "0123456789abcdef0123456789abcdef", wantCode: -32603},
		{name: "stopped tool", fill: 1, tool: "halted", wantCode: -32062},
		{name: "unknown tool", fill: 1, tool: "nope", wantCode: -32601},
		{name: "content only", fill: 1, tool: "echo", wantCode: -32053},
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
			e := newHoldEnv(t, st, fmt.Sprintf("sf%d", i), tune, q)
			for range tc.fill {
				if r := e.mustSend(toolParams("echo", `{"message":"fill"}`)); r.Code != 0 {
					t.Fatalf("fill call refused: %s", r.Raw)
				}
			}
			before, keyBefore := e.counts(), e.keyWindow()
			sid := e.session
			if tc.session != "" {
				sid = tc.session
			}
			for range 3 {
				r, err := e.send(toolParams(tc.tool, cardArgs), sid)
				if err != nil {
					t.Fatal(err)
				}
				if r.Code != tc.wantCode {
					t.Fatalf("want %d: %s", tc.wantCode, r.Raw)
				}
				if tc.wantData != "" && r.Data["scope"] != tc.wantData {
					t.Fatalf("want scope %s: %s", tc.wantData, r.Raw)
				}
			}
			if got := e.counts(); got != before {
				t.Errorf("refused calls moved the state: %+v\n\twas %+v", got, before)
			}
			if got := e.keyWindow(); got != keyBefore {
				t.Errorf("refused calls moved the key window: %d, was %d", got, keyBefore)
			}
			if tc.name != "content only" {
				return
			}
			// The next allowed call counts one in each window and the
			// meter, from where the fill left them.
			if r := e.mustSend(toolParams("echo", `{"message":"after"}`)); r.Code != 0 {
				t.Fatalf("allowed call after the refusals: %s", r.Raw)
			}
			after := e.counts()
			if after.Session != before.Session+1 || after.Echo != before.Echo+1 || after.Quota != before.Quota+1 || e.keyWindow() != keyBefore+1 {
				t.Errorf("one allowed call after three refusals: %+v (key %d), from %+v (key %d)", after, e.keyWindow(), before, keyBefore)
			}
		})
	}
}

// keyWindow is the API key's rate window of this minute.
func (e *holdEnv) keyWindow() int64 {
	e.t.Helper()
	n, err := e.st.Value(context.Background(), ratelimit.KeyWindow(e.tenant, e.keyID, e.now))
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}
