package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/refusal"
)

func mustMerge(t *testing.T, ms ...*Manifest) *Bounds {
	t.Helper()
	b, err := Merge(ms...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestManifestGate(t *testing.T) {
	m := &Manifest{
		Grants: map[string][]string{
			MethodToolsCall: {"mock/*", "files/read_*"},
			MethodResource:  {"files/file:///docs/*"},
		},
		MaxLifetimeSecs: 3600, MaxIdleSecs: 300, MaxToolCalls: 10, MaxSteps: 3,
	}
	denyInner := fixed(denied(ReasonForbid, "inner"))
	tests := []struct {
		name   string
		edit   func(r *Request)
		inner  Decider
		reason string // "" = allowed by the gate
	}{
		{"within every bound", func(r *Request) {}, nil, ""},
		{"lifetime at the limit", func(r *Request) { r.Now = t0.Add(time.Hour) }, nil, ReasonLifetime},
		{"lifetime before idle", func(r *Request) { r.Now = t0.Add(2 * time.Hour); r.Session.LastAllowed = t0.Add(time.Hour) }, nil, ReasonLifetime},
		{"idle from start", func(r *Request) { r.Now = t0.Add(300 * time.Second) }, nil, ReasonIdle},
		{"idle from last allowed", func(r *Request) {
			r.Session.LastAllowed = t0.Add(10 * time.Minute)
			r.Now = t0.Add(14 * time.Minute)
		}, nil, ""},
		{"clocks before grants", func(r *Request) { r.Now = t0.Add(time.Hour); r.Server = "other" }, nil, ReasonLifetime},
		{"tool not granted", func(r *Request) { r.Server, r.Tool = "files", "write" }, nil, ReasonGrant},
		{"tool granted by glob", func(r *Request) { r.Server, r.Tool = "files", "read_all" }, nil, ""},
		{"method not listed", func(r *Request) { r.Method, r.Prompt = MethodPrompt, "p" }, nil, ReasonGrant},
		{"resource granted", func(r *Request) { r.Method, r.Server, r.ResourceURI = MethodResource, "files", "file:///docs/a/b" }, nil, ""},
		{"resource not granted", func(r *Request) { r.Method, r.Server, r.ResourceURI = MethodResource, "files", "file:///etc/passwd" }, nil, ReasonGrant},
		{"grants before budgets", func(r *Request) { r.Tool, r.Server = "x", "other"; r.Session.ToolCalls = 10 }, nil, ReasonGrant},
		{"tool calls exhausted", func(r *Request) { r.Session.ToolCalls = 10 }, nil, ReasonToolCalls},
		{"tool calls one left", func(r *Request) { r.Session.ToolCalls = 9 }, nil, ""},
		{"tool calls bound only tools/call", func(r *Request) {
			r.Method, r.Server, r.ResourceURI = MethodResource, "files", "file:///docs/x"
			r.Session.ToolCalls = 10
		}, nil, ""},
		{"step at limit", func(r *Request) { r.Session.Step = Step{N: 3, Declared: true} }, nil, ReasonSteps},
		{"step below limit", func(r *Request) { r.Session.Step = Step{N: 2, Declared: true} }, nil, ""},
		{"new step once limit seen", func(r *Request) {
			r.Session.Steps = []int64{0, 1, 2}
			r.Session.Step = Step{N: 2, Declared: true}
		}, nil, ""},
		{"renumbering around the limit", func(r *Request) {
			r.Session.Steps = []int64{0, 1, 5}
			r.Session.Step = Step{N: 2, Declared: true}
		}, nil, ReasonSteps},
		{"no step declared, many seen", func(r *Request) { r.Session.Steps = []int64{0, 1, 2} }, nil, ""},
		{"budget before inner", func(r *Request) { r.Session.ToolCalls = 10 }, denyInner, ReasonToolCalls},
		{"inner decides last", func(r *Request) {}, denyInner, "inner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := toolCall("mock", "echo")
			tt.edit(req)
			v := NewManifestGate(mustMerge(t, m), tt.inner).Decide(context.Background(), req)
			switch {
			case tt.reason == "inner":
				if v.Rule != "inner" {
					t.Fatalf("got %+v, want the inner verdict", v)
				}
			case tt.reason == "":
				if !v.Allow {
					t.Fatalf("got %+v, want allowed", v)
				}
			default:
				want := Verdict{Code: refusal.CodeCapabilityDenied, Word: refusal.CapabilityDenied, Reason: tt.reason, Rule: "manifest:" + tt.reason}
				if v != want {
					t.Fatalf("got %+v, want %+v", v, want)
				}
			}
		})
	}
}

func TestManifestGateNeverAudit(t *testing.T) {
	// An audit-mode inner decider does not make the gate's refusals audit-only.
	b := mustMerge(t, &Manifest{MaxToolCalls: 1})
	g := NewManifestGate(b, auditDecider{inner: fixed(denied(ReasonForbid, "x"))})
	req := toolCall("m", "t")
	req.Session.ToolCalls = 1
	if v := g.Decide(context.Background(), req); !v.Refused() || v.Audit {
		t.Fatalf("gate refusal = %+v, want enforced", v)
	}
	req.Session.ToolCalls = 0
	if v := g.Decide(context.Background(), req); !v.Forward() || !v.Audit {
		t.Fatalf("inner audit verdict = %+v, want forwarded audit-only", v)
	}
}

func TestMergeNarrowsNeverWidens(t *testing.T) {
	tenant := &Manifest{Grants: map[string][]string{MethodToolsCall: {"mock/*", "files/*"}}, MaxToolCalls: 100, MaxIdleSecs: 600}
	key := &Manifest{Grants: map[string][]string{MethodToolsCall: {"mock/*", "payments/*"}}, MaxToolCalls: 10}
	session := &Manifest{MaxToolCalls: 50, MaxIdleSecs: 60, MaxLifetimeSecs: 120}
	b := mustMerge(t, tenant, nil, key, session)
	if b.maxToolCalls != 10 || b.idle != time.Minute || b.lifetime != 2*time.Minute || b.maxSteps != 0 {
		t.Fatalf("limits = %+v, want the smallest of each", b)
	}
	tests := []struct {
		server string
		want   bool
	}{
		{"mock", true},      // both grant it
		{"files", false},    // the key does not
		{"payments", false}, // the tenant does not: a key cannot widen
	}
	for _, tt := range tests {
		req := toolCall(tt.server, "x")
		if got := b.check(req) == ""; got != tt.want {
			t.Errorf("%s/x granted = %v, want %v", tt.server, got, tt.want)
		}
	}
	// Request.Bounds narrow the gate's bounds the same way.
	g := NewManifestGate(mustMerge(t, tenant), nil)
	req := toolCall("mock", "x")
	req.Bounds = mustMerge(t, &Manifest{Grants: map[string][]string{}})
	if v := g.Decide(context.Background(), req); v.Reason != ReasonGrant {
		t.Fatalf("empty grant list on the key = %+v, want grant refusal", v)
	}
	if b, err := Merge(nil, &Manifest{}); err != nil || b != nil {
		t.Fatalf("Merge of nothing = %v, %v; want nil bounds", b, err)
	}
}

func TestManifestValidate(t *testing.T) {
	tests := []struct {
		name string
		m    *Manifest
		ok   bool
	}{
		{"nil", nil, true},
		{"limits", &Manifest{MaxToolCalls: 3, MaxSteps: 2}, true},
		{"negative", &Manifest{MaxIdleSecs: -1}, false},
		{"undecidable method", &Manifest{Grants: map[string][]string{"tools/list": {"*/*"}}}, false},
		{"pattern without server", &Manifest{Grants: map[string][]string{MethodToolsCall: {"echo"}}}, false},
		{"pattern with space", &Manifest{Grants: map[string][]string{MethodToolsCall: {"mock/ echo"}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.m.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestParseStep(t *testing.T) {
	tests := []struct {
		params string
		want   Step
		bad    bool
	}{
		{`{"name":"echo"}`, Step{}, false},
		{``, Step{}, false},
		{`{"_meta":{"progressToken":1}}`, Step{}, false},
		{`{"_meta":{"aegis/step":0}}`, Step{N: 0, Declared: true}, false},
		{`{"_meta":{"aegis/step":7}}`, Step{N: 7, Declared: true}, false},
		{`{"_meta":{"aegis/step":7.0}}`, Step{N: 7, Declared: true}, false},
		{`{"_meta":{"aegis/step":-1}}`, Step{}, true},
		{`{"_meta":{"aegis/step":1.5}}`, Step{}, true},
		{`{"_meta":{"aegis/step":"3"}}`, Step{}, true},
		{`{"_meta":{"aegis/step":null}}`, Step{}, true},
		{`{"_meta":{"aegis/step":1e300}}`, Step{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.params, func(t *testing.T) {
			got, err := ParseStep(json.RawMessage(tt.params))
			if tt.bad != errors.Is(err, ErrBadStep) || got != tt.want {
				t.Fatalf("ParseStep = %+v, %v; want %+v, bad %v", got, err, tt.want, tt.bad)
			}
		})
	}
}

// TestCountTouchesOnlyWhatIsForwarded drives a session through the gate
// with an injected clock: refused calls neither keep it alive nor spend
// its budget.
func TestCountTouchesOnlyWhatIsForwarded(t *testing.T) {
	g := NewManifestGate(mustMerge(t, &Manifest{MaxIdleSecs: 60, MaxToolCalls: 2, MaxSteps: 2}), nil)
	s := Session{ID: "s", Started: t0}
	call := func(at time.Duration, step int64) Verdict {
		req := toolCall("m", "t")
		req.Now = t0.Add(at)
		req.Session = s
		req.Session.Step = Step{N: step, Declared: true}
		v := g.Decide(context.Background(), req)
		if v.Forward() {
			s.Count(req)
		}
		return v
	}
	steps := []struct {
		at     time.Duration
		step   int64
		reason string
	}{
		{30 * time.Second, 0, ""},
		{60 * time.Second, 5, ReasonSteps}, // refused: does not touch the idle clock
		{89 * time.Second, 1, ""},          // 59 s after the last allowed call
		{100 * time.Second, 1, ReasonToolCalls},
		{150 * time.Second, 1, ReasonIdle}, // 61 s after the last allowed call
	}
	for i, st := range steps {
		if v := call(st.at, st.step); v.Reason != st.reason {
			t.Fatalf("call %d: %+v, want reason %q", i, v, st.reason)
		}
	}
	if s.ToolCalls != 2 || len(s.Steps) != 2 || !s.LastAllowed.Equal(t0.Add(89*time.Second)) {
		t.Fatalf("session = %+v", s)
	}
}

// TestParseManifest: a session's declared manifest is strict JSON,
// validated and bounded; merged, it can only narrow.
func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(`{"grants":{"tools/call":["mock/echo"]},"max_tool_calls":2}`))
	if err != nil || m.MaxToolCalls != 2 || len(m.Grants["tools/call"]) != 1 {
		t.Fatalf("ParseManifest = %+v, %v", m, err)
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"bogus":1}`, `{"max_steps":-1}`, `{"grants":{"tools/list":["*/*"]}}`, `{} {}`,
		`{"grants":{"tools/call":["` + strings.Repeat("a", MaxSessionManifestBytes) + `"]}}`} {
		if _, err := ParseManifest([]byte(bad)); err == nil {
			t.Errorf("ParseManifest(%.40q) accepted", bad)
		}
	}
	wide, _ := ParseManifest([]byte(`{"grants":{"tools/call":["*/*"]},"max_tool_calls":100}`))
	b, err := Merge(&Manifest{MaxToolCalls: 3, Grants: map[string][]string{"tools/call": {"mock/echo"}}}, wide)
	if err != nil || b.MaxToolCalls() != 3 {
		t.Fatalf("merged max_tool_calls %d, %v; want the tenant's 3", b.MaxToolCalls(), err)
	}
}
