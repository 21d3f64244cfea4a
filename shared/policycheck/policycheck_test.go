package policycheck_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/policycheck"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// fakeStore is the tenants' sets, the keys and the counters in memory; Down
// makes every policy read fail, and reads counts them.
type fakeStore struct {
	mu     sync.Mutex
	sets   map[string]string
	keys   map[string]registry.Key
	down   bool
	reads  int
	counts []session.Use
	// reserved is the tools/calls reserved against max_tool_calls.
	reserved int
	keyReads int
	// givenBack: at the limit, Reserve reports the count less givenBack,
	// as DynamoDB's does when calls refused meanwhile gave units back
	// between its write and its read.
	givenBack int
}

func (f *fakeStore) Policy(_ context.Context, tenant string) (registry.Policy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.down {
		return registry.Policy{}, store.ErrUnavailable
	}
	src, ok := f.sets[tenant]
	if !ok {
		return registry.Policy{}, store.ErrNotFound
	}
	return registry.Policy{Tenant: tenant, Source: src}, nil
}

func (f *fakeStore) Key(_ context.Context, id string) (registry.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keyReads++
	k, ok := f.keys[id]
	if !ok {
		return registry.Key{}, store.ErrNotFound
	}
	return k, nil
}

func (f *fakeStore) Count(_ context.Context, _, _ string, u session.Use) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = append(f.counts, u)
	return nil
}

// Reserve and Release count in reserved; the stores' own contract tests
// (storetest) hold them to the bound.
func (f *fakeStore) Reserve(_ context.Context, _, _ string, limit int) (int, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reserved >= limit {
		return f.reserved - f.givenBack, false, nil
	}
	f.reserved++
	return f.reserved - 1, true, nil
}

func (f *fakeStore) Release(context.Context, string, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reserved--
	return nil
}

func (f *fakeStore) set(fn func(*fakeStore)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

const echoOnly = "cedar_policies: |\n  permit (principal, action, resource) when { resource.name == \"echo\" };\n"

func newCall(tenant, tool string) *pipeline.Call {
	return &pipeline.Call{
		Tenant: registry.Tenant{ID: tenant}, Caller: "agent", KeyID: "k1", Method: "tools/call",
		Params: []byte(`{"name":"` + tool + `","arguments":{}}`), SessionID: "s1", Inline: true,
		Server: &registry.Server{Tenant: tenant, Name: "mock"}, Tool: tool, UpstreamTool: tool,
	}
}

func wordOf(err error) refusal.Word {
	var r *refusal.Refusal
	if errors.As(err, &r) {
		return r.Word
	}
	return ""
}

// TestLoadStates: never loaded and unreadable is DenyAll and recovers at
// the next call; loaded then unreadable keeps the last known set; no set
// is the empty one; a change is read after the refresh period.
func TestLoadStates(t *testing.T) {
	clk := testclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	fs := &fakeStore{sets: map[string]string{"acme": echoOnly}, keys: map[string]registry.Key{"k1": {ID: "k1", Tenant: "acme"}}, down: true}
	k := policycheck.New(fs, fs, fs, &policycheck.Options{Refresh: 5 * time.Second, Now: clk.Now})
	ctx := context.Background()
	type step struct {
		name    string
		do      func()
		tool    string
		word    refusal.Word
		rule    string
		hashSet string // the set whose hash the call carries; "-": none
	}
	for _, s := range []step{
		{"cold start, store down", nil, "echo", refusal.PolicyDenied, policy.RuleNotLoaded, "-"},
		{"still down: tried again", nil, "echo", refusal.PolicyDenied, policy.RuleNotLoaded, "-"},
		{"store back", func() { fs.set(func(f *fakeStore) { f.down = false }) }, "echo", "", "cedar:policy0", echoOnly},
		{"rule denial", nil, "transfer", refusal.PolicyDenied, policy.RuleNoPermit, echoOnly},
		{"down again, past refresh: last known", func() { fs.set(func(f *fakeStore) { f.down = true }); clk.Advance(10 * time.Second) }, "transfer", refusal.PolicyDenied, policy.RuleNoPermit, echoOnly},
		{"changed, within refresh: old set", func() {
			fs.set(func(f *fakeStore) { f.down, f.sets["acme"] = false, "policy_mode: audit\n"+echoOnly })
		}, "transfer", refusal.PolicyDenied, policy.RuleNoPermit, echoOnly},
		{"past refresh: new set, audit mode", func() { clk.Advance(10 * time.Second) }, "transfer", "", policy.RuleNoPermit, "policy_mode: audit\n" + echoOnly},
		{"set removed: empty set", func() { fs.set(func(f *fakeStore) { delete(f.sets, "acme") }); clk.Advance(10 * time.Second) }, "transfer", "", "", ""},
	} {
		if s.do != nil {
			s.do()
		}
		c := newCall("acme", s.tool)
		err := k.Check(ctx, c)
		if wordOf(err) != s.word || c.PolicyRule != s.rule {
			t.Fatalf("%s: err %v rule %q; want %q by %q", s.name, err, c.PolicyRule, s.word, s.rule)
		}
		want := ""
		switch s.hashSet {
		case "-":
		case "":
			want = audit.PolicyHashNone
		default:
			set, _ := policy.ParseSet([]byte(s.hashSet))
			want, _ = policy.Hash(set)
		}
		if c.PolicyHash != want {
			t.Errorf("%s: policy hash %q, want %q", s.name, c.PolicyHash, want)
		}
	}
}

// TestCountsOnlyForwarded: the counters move for a call finished with any
// outcome but refused.
func TestCountsOnlyForwarded(t *testing.T) {
	for _, tc := range []struct {
		outcome audit.Outcome
		counted bool
	}{
		{audit.OutcomeAllowed, true}, {audit.OutcomeError, true}, {audit.OutcomeIndeterminate, true}, {audit.OutcomeRefused, false},
	} {
		t.Run(string(tc.outcome), func(t *testing.T) {
			fs := &fakeStore{sets: map[string]string{"acme": stepsBound}, keys: map[string]registry.Key{}}
			k := policycheck.New(fs, fs, fs, nil)
			c := newCall("acme", "echo")
			c.Params = []byte(`{"name":"echo","arguments":{},"_meta":{"aegis/step":4}}`)
			if err := k.Check(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			c.Finish(tc.outcome)
			if got := len(fs.counts) == 1; got != tc.counted {
				t.Fatalf("counted %v, want %v", fs.counts, tc.counted)
			}
			if tc.counted && (!fs.counts[0].ToolCall || !fs.counts[0].Declared || fs.counts[0].Step != 4) {
				t.Errorf("use %+v", fs.counts[0])
			}
		})
	}
}

// stepsBound is a set whose manifest reads the session's declared steps,
// so that a forwarded call counts.
const stepsBound = "manifest: {max_steps: 9}\n"

// TestCountsOnlyWhenARuleReadsThem: a forwarded call writes the manifest
// counters when a rule in force reads them (an idle, tool_calls or steps
// bound of the tenant's, the key's or the session's manifest, or Cedar
// policies) and writes nothing when none does (no set, roles only, a
// manifest of grants and lifetime only).
func TestCountsOnlyWhenARuleReadsThem(t *testing.T) {
	for _, tc := range []struct {
		name, set, sessionManifest string
		keyManifest                *policy.Manifest
		counted                    bool
	}{
		{name: "no set"},
		{name: "roles only", set: "roles: {agent: {allow: ['mock/*']}}\n"},
		{name: "grants and lifetime", set: "manifest: {max_lifetime_secs: 3600, grants: {tools/call: ['mock/*']}}\n"},
		{name: "tenant idle bound", set: "manifest: {max_idle_secs: 900}\n", counted: true},
		{name: "tenant max_steps", set: stepsBound, counted: true},
		{name: "tenant max_tool_calls", set: "manifest: {max_tool_calls: 9}\n", counted: true},
		{name: "cedar", set: echoOnly, counted: true},
		{name: "key manifest", keyManifest: &policy.Manifest{MaxIdleSecs: 900}, counted: true},
		{name: "session manifest", sessionManifest: `{"max_steps":9}`, counted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeStore{sets: map[string]string{}, keys: map[string]registry.Key{}}
			if tc.set != "" {
				fs.sets["acme"] = tc.set
			}
			k := policycheck.New(fs, fs, fs, nil)
			c := newCall("acme", "echo")
			c.Roles = []string{"agent"}
			c.KeyManifest = tc.keyManifest
			c.Session.Manifest = tc.sessionManifest
			c.Session.Created = time.Now()
			if err := k.Check(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			c.Finish(audit.OutcomeAllowed)
			if got := len(fs.counts) == 1; got != tc.counted {
				t.Fatalf("counts %v, want counted %v", fs.counts, tc.counted)
			}
		})
	}
}

func TestBadStep(t *testing.T) {
	fs := &fakeStore{sets: map[string]string{}, keys: map[string]registry.Key{}}
	k := policycheck.New(fs, fs, fs, nil)
	c := newCall("acme", "echo")
	c.Params = []byte(`{"name":"echo","_meta":{"aegis/step":"3"}}`)
	var r *refusal.Refusal
	if err := k.Check(context.Background(), c); !errors.As(err, &r) || r.Code != refusal.CodeInvalidParams {
		t.Fatalf("err %v, want -32602", err)
	}
}

// TestBoundedCache: past MaxTenants the least recently used tenant is
// dropped and read again on its next call.
func TestBoundedCache(t *testing.T) {
	clk := testclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	fs := &fakeStore{sets: map[string]string{}, keys: map[string]registry.Key{}}
	k := policycheck.New(fs, fs, fs, &policycheck.Options{MaxTenants: 2, Refresh: time.Hour, Now: clk.Now})
	ctx := context.Background()
	for _, tn := range []string{"a", "b", "a", "c", "a", "b"} {
		clk.Advance(time.Second)
		k.Load(ctx, tn)
	}
	// a b (2 reads), a cached, c evicts b (3), a cached, b evicts c (4).
	if fs.reads != 4 {
		t.Fatalf("reads = %d, want 4", fs.reads)
	}
}

// TestConcurrentLoads: many calls of many tenants at once, while the set
// changes and the store comes and goes (run with -race).
func TestConcurrentLoads(t *testing.T) {
	clk := testclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	fs := &fakeStore{sets: map[string]string{"t0": echoOnly, "t1": echoOnly}, keys: map[string]registry.Key{}}
	k := policycheck.New(fs, fs, fs, &policycheck.Options{MaxTenants: 3, Refresh: time.Second, Now: clk.Now})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				c := newCall(fmt.Sprintf("t%d", (i+j)%4), "echo")
				_ = k.Check(context.Background(), c)
				if j%5 == 0 {
					clk.Advance(time.Second)
					fs.set(func(f *fakeStore) { f.down = !f.down })
				}
				c.Finish(audit.OutcomeAllowed)
			}
		})
	}
	wg.Wait()
}

// failing is a check that cannot decide.
type failing struct{}

func (failing) Check(context.Context, *pipeline.Call) error { return errors.New("store down") }

// TestNotCountedWhenALaterStageFails: a later stage that cannot decide
// (failing closed, -32603) leaves the call unsent; the gateway finishes
// it as an error, and the policy counts nothing for it.
func TestNotCountedWhenALaterStageFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		later   pipeline.Check
		counted bool
	}{
		{"later stage fails closed", failing{}, false},
		{"no later stage", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeStore{sets: map[string]string{"acme": stepsBound}, keys: map[string]registry.Key{}}
			k := policycheck.New(fs, fs, fs, nil)
			var stages []pipeline.Stage
			for _, sl := range append(pipeline.Order[:], pipeline.ResultOrder[:]...) {
				st := pipeline.Stage{Slot: sl, Scope: pipeline.Every, Mode: pipeline.FailClosed}
				switch sl {
				case pipeline.Policy:
					st.Check = k
				case pipeline.Approval:
					st.Check = tc.later
				}
				stages = append(stages, st)
			}
			p, err := pipeline.New(stages, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := newCall("acme", "echo")
			err = p.Run(context.Background(), c)
			if (err != nil) == tc.counted {
				t.Fatalf("Run = %v", err)
			}
			o := audit.OutcomeAllowed
			if err != nil {
				o = audit.OutcomeError // as the gateway finishes a -32603
			}
			c.Finish(o)
			if got := len(fs.counts) == 1; got != tc.counted {
				t.Fatalf("counted %v, want %v", fs.counts, tc.counted)
			}
		})
	}
}

// TestCarriedRoles: roles and a key manifest the call carries (set by
// authentication) decide it without a read of the key record; a call
// that carries none is decided by the record's.
func TestCarriedRoles(t *testing.T) {
	const set = "roles: {ops: {allow: [\"mock/*\"]}}\n"
	fs := &fakeStore{sets: map[string]string{"acme": set}, keys: map[string]registry.Key{"k1": {ID: "k1", Tenant: "acme", Roles: []string{"reader"}}}}
	k := policycheck.New(fs, fs, fs, nil)
	ctx := context.Background()
	c := newCall("acme", "echo")
	c.Roles = []string{"ops"}
	if err := k.Check(ctx, c); err != nil || c.PolicyRule != "role:ops allow mock/*" {
		t.Fatalf("carried ops: %v rule %q", err, c.PolicyRule)
	}
	c = newCall("acme", "echo")
	c.Roles, c.KeyManifest = []string{"ops"}, &policy.Manifest{Grants: map[string][]string{"tools/call": {"mock/other"}}}
	if err := k.Check(ctx, c); wordOf(err) != refusal.CapabilityDenied {
		t.Fatalf("carried manifest: %v; want -32005 grant", err)
	}
	if fs.keyReads != 0 {
		t.Fatalf("the key record was read %d times for calls that carry their roles", fs.keyReads)
	}
	c = newCall("acme", "echo") // Roles nil: from the record (reader: no role allows)
	if err := k.Check(ctx, c); wordOf(err) != refusal.PolicyDenied || c.PolicyRule != policy.RuleNoRole || fs.keyReads != 1 {
		t.Fatalf("roles from the record: %v rule %q, %d reads", err, c.PolicyRule, fs.keyReads)
	}
}

// TestReservedToolCalls: a tools/call let through (or held for approval)
// under max_tool_calls is reserved before it is sent and decided on the
// reserved count; undo gives the unit back; a call refused by the policy
// reserves nothing.
func TestReservedToolCalls(t *testing.T) {
	const set = "roles: {ops: {allow: [\"mock/*\"], approve: [\"mock/transfer\"], deny: [\"mock/rm\"]}}\nmanifest: {max_tool_calls: 2}\n"
	fs := &fakeStore{sets: map[string]string{"acme": set}, keys: map[string]registry.Key{}}
	k := policycheck.New(fs, fs, fs, nil)
	ctx := context.Background()
	run := func(tool string) (*pipeline.Call, func(), error) {
		c := newCall("acme", tool)
		c.Roles = []string{"ops"}
		decide, undo := k.Prefetch(ctx, c)
		return c, undo, decide()
	}
	c, undo, err := run("transfer")
	if err != nil || !c.PolicyApproval || fs.reserved != 1 {
		t.Fatalf("held transfer: %v approval %v, reserved %d; want held and 1 reserved", err, c.PolicyApproval, fs.reserved)
	}
	undo() // the approval stage refused it (pending)
	if fs.reserved != 0 {
		t.Fatalf("after undo: reserved %d, want 0", fs.reserved)
	}
	if _, _, err := run("rm"); wordOf(err) != refusal.PolicyDenied || fs.reserved != 0 {
		t.Fatalf("rm: %v, reserved %d; want -32003 and nothing reserved", err, fs.reserved)
	}
	for i := range 2 {
		if c, _, err := run("echo"); err != nil || c.PolicyRule == "" {
			t.Fatalf("echo %d: %v", i, err)
		}
	}
	c, undo, err = run("echo")
	if wordOf(err) != refusal.CapabilityDenied || c.PolicyRule != "manifest:tool_calls" || fs.reserved != 2 {
		t.Fatalf("third echo: %v rule %q, reserved %d; want -32005 tool_calls, 2 reserved", err, c.PolicyRule, fs.reserved)
	}
	undo() // a refusal that reserved nothing gives nothing back
	if fs.reserved != 2 {
		t.Fatalf("undo of an unreserved call released: reserved %d", fs.reserved)
	}
	c.Finish(audit.OutcomeRefused)
	if len(fs.counts) != 0 {
		t.Fatalf("counted %v; Finish was not called for the allowed ones", fs.counts)
	}
}

// TestReservedAtLimitWhileGivenBack: a reservation refused at the limit
// refuses the call even when the count Reserve read afterwards is lower
// (units given back in between): the call holds no unit, so run it would
// pass the limit. (TestPolicyToolCallsBoundUnderConcurrency, shared/gateway,
// met this on DynamoDB when give-backs ran together.)
func TestReservedAtLimitWhileGivenBack(t *testing.T) {
	fs := &fakeStore{sets: map[string]string{"acme": "manifest: {max_tool_calls: 2}\n"}, keys: map[string]registry.Key{}, givenBack: 2}
	k := policycheck.New(fs, fs, fs, nil)
	ctx := context.Background()
	for i := range 3 {
		c := newCall("acme", "echo")
		c.Roles = []string{}
		decide, _ := k.Prefetch(ctx, c)
		err := decide()
		if i < 2 && err != nil {
			t.Fatalf("echo %d: %v", i, err)
		}
		if i == 2 && (wordOf(err) != refusal.CapabilityDenied || c.PolicyRule != "manifest:tool_calls") {
			t.Fatalf("echo at the limit, read count 0: %v rule %q; want -32005 tool_calls", err, c.PolicyRule)
		}
	}
	if fs.reserved != 2 {
		t.Fatalf("reserved %d, want 2", fs.reserved)
	}
}

// TestPeekReservesNothing: Peek gives Check's verdict without reserving
// against max_tool_calls or counting the manifest counters: the session's
// budget is decided on the count its record holds (c.Session.ToolCalls,
// as the session stage's Peek read it).
func TestPeekReservesNothing(t *testing.T) {
	const set = "roles: {ops: {allow: [\"mock/*\"], deny: [\"mock/rm\"]}}\nmanifest: {max_tool_calls: 2}\n"
	fs := &fakeStore{sets: map[string]string{"acme": set}, keys: map[string]registry.Key{}}
	k := policycheck.New(fs, fs, fs, nil)
	ctx := context.Background()
	peek := func(tool string, toolCalls int) (*pipeline.Call, error) {
		c := newCall("acme", tool)
		c.Roles = []string{"ops"}
		c.Session.ToolCalls = toolCalls
		err := k.Peek(ctx, c)()
		c.Finish(audit.OutcomeAllowed) // were anything registered, it would count now
		return c, err
	}
	if _, err := peek("echo", 1); err != nil {
		t.Fatalf("echo under the budget: %v", err)
	}
	if c, err := peek("echo", 2); wordOf(err) != refusal.CapabilityDenied || c.PolicyRule != "manifest:tool_calls" {
		t.Fatalf("echo at the budget: %v (rule %q); want -32005 tool_calls", err, c.PolicyRule)
	}
	if _, err := peek("rm", 0); wordOf(err) != refusal.PolicyDenied {
		t.Fatalf("rm: %v; want -32003", err)
	}
	if fs.reserved != 0 || len(fs.counts) != 0 {
		t.Fatalf("peeks reserved %d and counted %v; want nothing", fs.reserved, fs.counts)
	}
}
