package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// leakValues are the values demo.LeakText carries, none of which may reach
// the agent under redact.
var leakValues = []string{"jane.doe@example.com", "415-555-0132", "4111 1111 1111 1111", "123-45-6789"}

// contentEnv is the harness's gateway with the deployment's content
// settings set by set, acme's mock-primary behind a counting proxy, and
// acme's tenant overrides o.
func contentEnv(t *testing.T, set func(*config.Settings), o registry.ContentActions) (*env, *countedUpstream) {
	up := startCountedUpstream(t)
	e := newEnv(t, func(s *config.Settings, st *memstore.Store) {
		set(s)
		ctx := context.Background()
		must(t, st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierFree, Content: o}))
		must(t, st.PutServer(ctx, registry.Server{Tenant: "acme", Name: "mock-primary", URL: up.URL}))
	})
	return e, up
}

// lastRecord is acme's newest tools/call audit record.
func (e *env) lastRecord(t *testing.T) audit.Record {
	t.Helper()
	now := e.Clock.Now()
	recs, _, err := e.Store.Query(context.Background(), audit.Query{Tenant: "acme", From: now.Add(-time.Hour), To: now.Add(time.Hour)})
	must(t, err)
	var last *audit.Record
	for i := range recs {
		if recs[i].Method == "tools/call" && (last == nil || !recs[i].Time.Before(last.Time)) {
			last = &recs[i]
		}
	}
	if last == nil {
		t.Fatal("no tools/call audit record")
	}
	return *last
}

// kindsOf lists the kinds of the findings at at with action act.
func kindsOf(r audit.Record, at, act string) []string {
	var out []string
	for _, f := range r.Findings {
		if f.At == at && f.Action == act && !slices.Contains(out, f.Kind) {
			out = append(out, f.Kind)
		}
	}
	slices.Sort(out)
	return out
}

func leakText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestPIIActions: the demo's leak tool, called with the Go SDK client
// through /mcp/mock-primary, under each PII_ACTION, set for the deployment
// or as acme's override.
func TestPIIActions(t *testing.T) {
	ctx := context.Background()
	callLeak := func(t *testing.T, e *env) (*mcp.CallToolResult, error) {
		cs := connect(t, e.URL+"/mcp/mock-primary", e.KeyA)
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "leak"})
	}
	redacted := func(t *testing.T, e *env, res *mcp.CallToolResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		text := leakText(t, res)
		for _, v := range leakValues {
			if strings.Contains(text, v) {
				t.Fatalf("%q reached the agent: %s", v, text)
			}
		}
		for _, m := range []string{"[masked:card]", "[masked:ssn]", "[masked:email]", "[masked:phone]", "Customer record:"} {
			if !strings.Contains(text, m) {
				t.Fatalf("masked answer lacks %q: %s", m, text)
			}
		}
		rec := e.lastRecord(t)
		if got, want := kindsOf(rec, audit.AtResult, audit.ActionRedacted), []string{"card", "email", "phone", "ssn"}; !slices.Equal(got, want) {
			t.Fatalf("audit findings %+v, want redacted %v", rec.Findings, want)
		}
		if rec.Outcome != audit.OutcomeAllowed {
			t.Fatalf("outcome %q", rec.Outcome)
		}
	}

	t.Run("redact is the default", func(t *testing.T) {
		e, _ := contentEnv(t, func(*config.Settings) {}, registry.ContentActions{})
		res, err := callLeak(t, e)
		redacted(t, e, res, err)
		raw, _ := json.Marshal(e.lastRecord(t))
		for _, v := range leakValues {
			if strings.Contains(string(raw)+e.logs(), v) {
				t.Fatalf("%q is in the audit record or the logs", v)
			}
		}
	})

	t.Run("monitor forwards and records", func(t *testing.T) {
		e, _ := contentEnv(t, func(s *config.Settings) { s.PIIAction = "monitor" }, registry.ContentActions{})
		res, err := callLeak(t, e)
		if err != nil {
			t.Fatal(err)
		}
		if text := leakText(t, res); text != demo.LeakText {
			t.Fatalf("monitor changed the answer: %s", text)
		}
		rec := e.lastRecord(t)
		if got, want := kindsOf(rec, audit.AtResult, audit.ActionLogged), []string{"card", "email", "phone", "ssn"}; !slices.Equal(got, want) {
			t.Fatalf("audit findings %+v, want logged %v", rec.Findings, want)
		}
		if !strings.Contains(e.logs(), "PII_ACTION=monitor") {
			t.Fatalf("monitor did not log: %s", e.logs())
		}
	})

	for _, tc := range []struct {
		name     string
		set      func(*config.Settings)
		override registry.ContentActions
	}{
		{"block", func(s *config.Settings) { s.PIIAction = "block" }, registry.ContentActions{}},
		{"block as the tenant's override", func(*config.Settings) {}, registry.ContentActions{PII: "block"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := contentEnv(t, tc.set, tc.override)
			_, err := callLeak(t, e)
			var we *jsonrpc.Error
			if !errors.As(err, &we) || we.Code != -32052 {
				t.Fatalf("want -32052, got %v", err)
			}
			var d struct {
				Kinds []string              `json:"kinds"`
				Aegis struct{ Code string } `json:"aegis"`
			}
			if err := json.Unmarshal(we.Data, &d); err != nil || d.Aegis.Code != "SENSITIVE_DATA" {
				t.Fatalf("data %s", we.Data)
			}
			slices.Sort(d.Kinds)
			if !slices.Equal(d.Kinds, []string{"card", "ssn"}) {
				t.Fatalf("data.kinds %v, want card and ssn only (emails and phones never block)", d.Kinds)
			}
			for _, v := range leakValues {
				if strings.Contains(we.Message+string(we.Data), v) {
					t.Fatalf("the refusal echoes %q", v)
				}
			}
			rec := e.lastRecord(t)
			if rec.Code != -32052 || rec.Word != "SENSITIVE_DATA" || rec.Outcome != audit.OutcomeRefused {
				t.Fatalf("record %+v", rec)
			}
			if got := kindsOf(rec, audit.AtResult, audit.ActionBlocked); !slices.Equal(got, []string{"card", "ssn"}) {
				t.Fatalf("audit findings %+v", rec.Findings)
			}
		})
	}

	t.Run("THREAT_MODE=monitor: block is logged, not returned", func(t *testing.T) {
		e, _ := contentEnv(t, func(s *config.Settings) { s.PIIAction = "block"; s.ThreatMode = "monitor" }, registry.ContentActions{})
		res, err := callLeak(t, e)
		redacted(t, e, res, err)
	})

	t.Run("a clean answer is unchanged", func(t *testing.T) {
		e, _ := contentEnv(t, func(s *config.Settings) { s.PIIAction = "block" }, registry.ContentActions{})
		cs := connect(t, e.URL+"/mcp/mock-primary", e.KeyA)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "nothing to see"}})
		if err != nil || !strings.Contains(leakText(t, res), "nothing to see") {
			t.Fatalf("%v %+v", err, res)
		}
		if rec := e.lastRecord(t); len(rec.Findings) != 0 {
			t.Fatalf("findings on a clean answer: %+v", rec.Findings)
		}
	})
}

// TestEgressActions: sensitive data leaving in arguments, each
// EGRESS_ACTION, with the Go SDK client and a counting upstream.
func TestEgressActions(t *testing.T) {
	ctx := context.Background()
	const card = "4111 1111 1111 1111"
	send := func(t *testing.T, e *env, msg string) (*mcp.CallToolResult, error) {
		cs := connect(t, e.URL+"/mcp/mock-primary", e.KeyA)
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
	}
	for _, tc := range []struct {
		name, msg string
		set       func(*config.Settings)
		override  registry.ContentActions
		blocked   []string // kinds of -32053's data; nil: forwarded
		logged    []string
	}{
		{"block: card", "pay with " + card, func(*config.Settings) {}, registry.ContentActions{}, []string{"card"}, nil},
		{"block: ssn and a token", "ssn 123-45-6789 key ghp_" + strings.Repeat("aB3x", 9), func(*config.Settings) {}, registry.ContentActions{}, []string{"credential", "ssn"}, nil},
		{"block: an email never blocks", "write to jane.doe@example.com", func(*config.Settings) {}, registry.ContentActions{}, nil, []string{"email"}},
		{"monitor", "pay with " + card, func(s *config.Settings) { s.EgressAction = "monitor" }, registry.ContentActions{}, nil, []string{"card"}},
		{"THREAT_MODE=monitor", "pay with " + card, func(s *config.Settings) { s.ThreatMode = "monitor" }, registry.ContentActions{}, nil, []string{"card"}},
		{"off", "pay with " + card, func(s *config.Settings) { s.EgressAction = "off" }, registry.ContentActions{}, nil, nil},
		{"off as the tenant's override", "pay with " + card, func(*config.Settings) {}, registry.ContentActions{Egress: "off"}, nil, nil},
		{"block as the tenant's override", "pay with " + card, func(s *config.Settings) { s.EgressAction = "monitor" }, registry.ContentActions{Egress: "block"}, []string{"card"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, up := contentEnv(t, tc.set, tc.override)
			res, err := send(t, e, tc.msg)
			rec := e.lastRecord(t)
			if tc.blocked != nil {
				var we *jsonrpc.Error
				if !errors.As(err, &we) || we.Code != -32053 {
					t.Fatalf("want -32053, got %v %+v", err, res)
				}
				var d struct {
					Kinds []string `json:"kinds"`
				}
				_ = json.Unmarshal(we.Data, &d)
				slices.Sort(d.Kinds)
				if !slices.Equal(d.Kinds, tc.blocked) {
					t.Fatalf("data.kinds %v, want %v", d.Kinds, tc.blocked)
				}
				if strings.Contains(we.Message+string(we.Data)+e.logs(), "4111") {
					t.Fatal("the refusal or the logs echo the card")
				}
				if n := up.calls.Load(); n != 0 {
					t.Fatalf("a blocked call reached the upstream (%d)", n)
				}
				if rec.Code != -32053 || rec.Word != "EGRESS_BLOCKED" {
					t.Fatalf("record %+v", rec)
				}
				if got := kindsOf(rec, audit.AtArguments, audit.ActionBlocked); !slices.Equal(got, tc.blocked) {
					t.Fatalf("audit findings %+v", rec.Findings)
				}
				return
			}
			if err != nil || res.IsError {
				t.Fatalf("want forwarded: %v %+v", err, res)
			}
			if n := up.calls.Load(); n != 1 {
				t.Fatalf("upstream got %d calls, want 1", n)
			}
			if got := kindsOf(rec, audit.AtArguments, audit.ActionLogged); !slices.Equal(got, tc.logged) {
				t.Fatalf("audit findings %+v, want logged %v", rec.Findings, tc.logged)
			}
		})
	}
}

// TestEgressInToolCallMeta: a tools/call's _meta is forwarded with its
// arguments and scanned with them: a card number there is refused -32053
// and the call never reaches the upstream.
func TestEgressInToolCallMeta(t *testing.T) {
	e, up := contentEnv(t, func(*config.Settings) {}, registry.ContentActions{})
	cs := connect(t, e.URL+"/mcp/mock-primary", e.KeyA)
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Meta: mcp.Meta{"note": "pay with 4111 1111 1111 1111"},
		Name: "echo", Arguments: map[string]any{"message": "hi"},
	})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32053 {
		t.Fatalf("want -32053, got %v", err)
	}
	if n := up.calls.Load(); n != 0 {
		t.Fatalf("a blocked call reached the upstream (%d)", n)
	}
}

// TestEgressMetaProgressToken: an SDK's random progressToken is not taken
// for a credential (the secret-assignment rule reads its member's name),
// so a call with one is forwarded; a card number as the token is refused.
func TestEgressMetaProgressToken(t *testing.T) {
	e, up := contentEnv(t, func(*config.Settings) {}, registry.ContentActions{})
	cs := connect(t, e.URL+"/mcp/mock-primary", e.KeyA)
	ctx := context.Background()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Meta: mcp.Meta{"progressToken": "a1b2c3d4-e5f6-7890-abcd-ef1234567890"},
		Name: "echo", Arguments: map[string]any{"message": "hi"},
	}); err != nil {
		t.Fatalf("a random progressToken: %v", err)
	}
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("upstream got %d calls, want 1", n)
	}
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Meta: mcp.Meta{"progressToken": "4111 1111 1111 1111"},
		Name: "echo", Arguments: map[string]any{"message": "hi"},
	})
	var we *jsonrpc.Error
	if !errors.As(err, &we) || we.Code != -32053 {
		t.Fatalf("a card number as the progressToken: want -32053, got %v", err)
	}
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("upstream got %d calls, want 1", n)
	}
}
