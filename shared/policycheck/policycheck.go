// Package policycheck is the pipeline's "policy" stage (slot 7): it puts
// each decidable call to its tenant's policy.Decider (roles, Cedar and the
// session manifest; shared/policy), refuses what the decider refuses
// (-32003 POLICY_DENIED, -32005 CAPABILITY_DENIED with data.reason), marks
// what it requires approval for (pipeline.Call.PolicyApproval, held by the
// approval stage), and hides from tools/list what it would refuse
// (pipeline.Filter, the same decision through policy.Visible).
//
// Where the set comes from. Each tenant's set is in the store
// (registry.PolicyStore). The check caches it per tenant, for at most
// MaxTenants tenants, and re-reads it when the cached copy is older than
// the refresh period, so a PUT is in force everywhere within one period:
//
//   - never loaded and unreadable now (the store unreachable at a cold
//     start): the tenant's decider is policy.DenyAll, every decidable call
//     refused with -32003 "policy not loaded"; the next call tries again,
//     and the tenant recovers as soon as the set can be read;
//   - loaded once, unreadable now: the last known set stays in force
//     (logged), re-tried once per refresh period;
//   - no stored set (store.ErrNotFound): the loaded empty set, every call
//     allowed, policy_hash audit.PolicyHashNone;
//   - a stored set that does not parse (the writers parse before they
//     store, so only a newer writer's format): treated as unreadable.
//
// Audit mode (policy_mode: audit) forwards and records the intended
// verdict. The rule that decided is recorded on the call
// (pipeline.Call.PolicyRule, the audit record's policy_rule) and never put
// in the refusal.
//
// Counting. When the session check counted the call in its session's
// manifest counters, in the one write that counts its rate windows
// (session.AdmitResult.Used: a decided call on an existing session with a
// session or tool rate limit on), the call is decided on the counts as
// they were before that write, and nothing more is written here: the
// count is atomic, so calls in flight together each see a distinct
// tool_calls, and at most max_tool_calls of them are let through; the
// session check gives the count back when the call is refused. Otherwise
// a tools/call the decider lets through, in a session whose
// bounds set max_tool_calls, is reserved against it in the store before
// it is sent (session.Counter.Reserve, one conditional write), and decided
// again on the count the reservation saw: so calls in flight together
// never pass the limit. A call refused after its reservation (by a later
// stage, or not sent) gives the unit back (the pipeline's undo). For a
// call the whole pipeline allowed and the gateway forwarded (it finished
// with any outcome but refused) the check then counts the session's other
// manifest counters (session.Counter.Count: the idle clock, the declared
// step, and the tools/call when it was not reserved), when a rule in force
// reads them (counted): a manifest bounding the idle time, tool_calls or
// steps, or Cedar policies. Without one the call writes nothing for them.
package policycheck

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// Defaults of Options.
const (
	// DefaultRefresh is how old a cached set may get before it is read
	// again: a stored change is in force within it.
	DefaultRefresh = 5 * time.Second
	// DefaultMaxTenants bounds the cache; past it the tenant used least
	// recently is dropped (and read again on its next call).
	DefaultMaxTenants = 4096
)

// Keys is what the check reads a caller's key facts from, its roles and
// its manifest, when the call does not carry them (pipeline.Call.Roles
// nil; the gateway's authentication sets Roles and KeyManifest).
type Keys interface {
	Key(ctx context.Context, id string) (registry.Key, error)
}

// Policies is the store of the tenants' sets.
type Policies interface {
	Policy(ctx context.Context, tenant string) (registry.Policy, error)
}

// Options configure New. The zero value is valid.
type Options struct {
	Refresh    time.Duration    // 0: DefaultRefresh; < 0: read on every call
	MaxTenants int              // 0: DefaultMaxTenants
	Now        func() time.Time // nil: time.Now
	Logger     *slog.Logger     // nil: slog.Default()
}

// Check is the policy check and filter. It is safe for concurrent use.
type Check struct {
	sets    Policies
	keys    Keys
	counter session.Counter
	o       Options

	mu       sync.Mutex
	tenants  map[string]*entry
	keyFacts map[string]keyEntry       // by key id, under mu
	carried  map[string]carriedEntry   // by key id, under mu
	sessions map[string]*policy.Bounds // sessions' manifests by their text, under mu
}

// keyEntry is one key's cached facts.
type keyEntry struct {
	facts   keyFacts
	fetched time.Time
}

// entry is one tenant's cached set.
type entry struct {
	mu       sync.Mutex // held while (re)loading
	loaded   bool
	fetched  time.Time // when the set was read
	failedAt time.Time // the last failed reload since (zero: none)
	used     time.Time // last use, for eviction (under Check.mu)
	cur      Loaded
}

// Loaded is a tenant's set as the check holds it.
type Loaded struct {
	Decider policy.Decider
	Hash    string // policy.Hash of the set; "" while not loaded
	Set     *policy.Set
	// Bounds are the tenant's manifest compiled (nil: none), which the
	// check reserves max_tool_calls against.
	Bounds *policy.Bounds
	// SessionFree is the part of Decider that reads nothing of the
	// session's record (policy.BuildSessionFree; nil: it never refuses),
	// which Foresees asks.
	SessionFree policy.Decider
}

// New returns the check over the tenants' sets, the key records (for
// roles) and the session counters. o may be nil.
func New(sets Policies, keys Keys, counter session.Counter, o *Options) *Check {
	k := &Check{sets: sets, keys: keys, counter: counter, tenants: map[string]*entry{}, keyFacts: map[string]keyEntry{}, carried: map[string]carriedEntry{}, sessions: map[string]*policy.Bounds{}}
	if o != nil {
		k.o = *o
	}
	if k.o.Refresh == 0 {
		k.o.Refresh = DefaultRefresh
	}
	if k.o.MaxTenants <= 0 {
		k.o.MaxTenants = DefaultMaxTenants
	}
	if k.o.Now == nil {
		k.o.Now = time.Now
	}
	if k.o.Logger == nil {
		k.o.Logger = slog.Default()
	}
	return k
}

// Check implements pipeline.Check.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	decide, _ := k.Prefetch(ctx, c)
	return decide()
}

// Prefetch implements pipeline.Prefetcher: the tenant's set and the
// caller's key facts (roles, unless the call carries them, and the key's
// manifest), each when its cached copy is stale, are read together with
// the other checks' store work. It
// sets c.PolicyHash at once when the tenant's set is cached, so that a
// call an earlier stage refuses is recorded with it too.
func (k *Check) Prefetch(ctx context.Context, c *pipeline.Call) (func() error, func()) {
	return k.prefetch(ctx, c, false)
}

// Peek implements pipeline.Peeker: the verdict Check would give, from the
// same set and key facts (read when stale, as Prefetch reads them), with
// the session's max_tool_calls decided on the count its record holds
// (c.Session, as the session stage's Peek read it) instead of reserved,
// and the manifest counters not counted: nothing is written.
func (k *Check) Peek(ctx context.Context, c *pipeline.Call) func() error {
	decide, _ := k.prefetch(ctx, c, true)
	return decide
}

// Foresees implements pipeline.Foreseer: true when the tenant's set is
// cached and fresh, the call carries its roles (authentication set
// them), and the set's roles or Cedar refuse the call whatever its
// session's record holds (Loaded.SessionFree): a role's deny or no role
// allowing it, or a Cedar refusal whose candidate policies read no
// context.session. It reads no store; the runner then takes the verdict
// from Peek, after the stages ahead of this one (docs/design/cost.md,
// decision 11).
func (k *Check) Foresees(ctx context.Context, c *pipeline.Call) bool {
	if c.Server == nil || c.Roles == nil || reachMethod(c) != "" || !policy.Decidable(c.Method) {
		return false
	}
	l, ok := k.fresh(c.Tenant.ID)
	if !ok || l.SessionFree == nil {
		return false
	}
	return l.SessionFree.Decide(ctx, Request(c, k.o.Now())).Refused()
}

// fresh is tenant's cached set when it was read within the refresh
// period (Load would return it without reading); ok false otherwise.
func (k *Check) fresh(tenant string) (Loaded, bool) {
	k.mu.Lock()
	e := k.tenants[tenant]
	k.mu.Unlock()
	if e == nil {
		return Loaded{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded || k.o.Now().Sub(e.fetched) >= k.o.Refresh {
		return Loaded{}, false
	}
	return e.cur, true
}

// prefetch is Prefetch; peek: Peek.
func (k *Check) prefetch(ctx context.Context, c *pipeline.Call, peek bool) (func() error, func()) {
	if h := k.cachedHash(c.Tenant.ID); h != "" {
		c.PolicyHash = h
	}
	// What the closures share, in one allocation.
	p := &struct {
		l   Loaded
		key keyFacts
		res reservation
	}{}
	tenant, keyID := c.Tenant.ID, c.KeyID
	roles, manifest := c.Roles, c.KeyManifest
	wait := c.Async(func() {
		p.l = k.Load(ctx, tenant)
		if roles != nil {
			p.key = keyFacts{roles: roles, bounds: k.carriedBounds(ctx, tenant, keyID, manifest)}
		} else {
			p.key = k.key(ctx, tenant, keyID)
		}
	})
	decide := func() error {
		wait()
		if c.Roles == nil {
			c.Roles = p.key.roles
		}
		return k.decide(ctx, c, p.l, p.key.bounds, &p.res, peek)
	}
	return decide, func() { k.undo(ctx, &p.res) }
}

// reservation is what one call holds of its session's budgets: undone
// when a stage refused the call (this one or a later one, with a refusal
// or -32603) or it was finished as refused: it was not sent, and counts
// nothing; reserved when a tools/call was reserved against
// max_tool_calls (session.Counter.Reserve) for the session tenant/id.
type reservation struct {
	undone     atomic.Bool
	reserved   atomic.Bool
	tenant, id string // set before reserved
}

// undo marks the call not sent and gives back its reserved tools/call.
func (k *Check) undo(ctx context.Context, r *reservation) {
	if r.undone.Swap(true) || !r.reserved.Load() {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), countTimeout)
	defer cancel()
	if err := k.counter.Release(cctx, r.tenant, r.id); err != nil && !errors.Is(err, store.ErrNotFound) {
		// The unit stays spent: the session's budget errs on the strict side.
		k.o.Logger.WarnContext(ctx, "reserved tool call not given back", "tenant", r.tenant, "err", err)
	}
}

// decide puts c to l's decider and records the verdict on c. A tools/call
// the decider lets through is reserved against the session's
// max_tool_calls before it is sent (reserve), so that the limit holds for
// calls in flight together. peek: nothing is reserved or counted (Peek).
func (k *Check) decide(ctx context.Context, c *pipeline.Call, l Loaded, bounds *policy.Bounds, res *reservation, peek bool) error {
	if l.Hash != "" {
		c.PolicyHash = l.Hash
	}
	if c.Server == nil {
		// Not routed: an earlier stage answers; or logging/setLevel on
		// /mcp, sent to the servers Visible lets it reach.
		return nil
	}
	if m := reachMethod(c); m != "" {
		return k.reach(ctx, c, l, bounds, m)
	}
	var step policy.Step
	if meta := jsonrpc.Member(c.Params, "_meta"); meta != nil { // most calls have none: no decode
		var err error
		if step, err = policy.ParseStep(c.Params); err != nil {
			return refusal.New(refusal.InvalidParams, `Invalid params: _meta["aegis/step"] is not a non-negative integer`)
		}
		if !c.NewSession && jsonrpc.Member(meta, policy.MetaManifest) != nil {
			// Read only where a session opens: a later one would be
			// silently ignored, and a client must not think it narrowed.
			return refusal.New(refusal.InvalidParams, `Invalid params: _meta["`+policy.MetaManifest+`"] is only read on the request that opens a session`)
		}
	}
	bounds = bounds.Narrow(k.sessionBounds(ctx, c))
	req := Request(c, k.o.Now())
	req.Session.Step = step
	req.Bounds = bounds
	v := l.Decider.Decide(ctx, req)
	// The session check counted the call in its session's manifest
	// counters with its rate windows (one write; c.Session holds them as
	// they were before it, which is what req was decided on), and gives
	// them back when the call is refused: nothing to reserve or count
	// here (docs/design/cost.md, decision 8).
	folded := c.SessionWindows != nil && c.SessionWindows.Used
	// A held call is reserved too: once approved, it is sent by this
	// decision's pipeline run; until then the approval stage refuses it,
	// and the unit is given back.
	if limit := l.Bounds.Narrow(bounds).MaxToolCalls(); limit > 0 && !folded && !v.Refused() && req.Method == policy.MethodToolsCall {
		if c.SessionID == "" {
			// No session to count in (a stateless request): a budget that
			// cannot be counted does not bound, so the call is decided as
			// if it were spent.
			req.Session.ToolCalls = limit
			v = l.Decider.Decide(ctx, req)
		} else if !peek {
			var err error
			if v, err = k.reserve(ctx, c, l, req, limit, res); err != nil {
				return err
			}
		}
	}
	c.PolicyRule, c.PolicyVerdict, c.PolicyAudit = v.Rule, VerdictWord(v), v.Audit
	if v.Refused() {
		return v.Refusal()
	}
	c.PolicyApproval = v.Held()
	tenant, id := c.Tenant.ID, c.SessionID
	if peek || id == "" || folded || !counted(l, bounds) {
		return nil // a peek, counted already, or no rule in force reads the counters
	}
	use := session.Use{At: req.Now, ToolCall: req.Method == policy.MethodToolsCall && !res.reserved.Load(), Step: step.N, Declared: step.Declared}
	c.OnDoneAsync(func(o audit.Outcome) {
		if o == audit.OutcomeRefused || res.undone.Load() {
			return // never sent: it spends nothing and keeps nothing alive
		}
		// Finish runs on the gateway's settling path, after the answer.
		cctx, cancel := c.SettleContext(ctx, countTimeout)
		defer cancel()
		if err := k.counter.Count(cctx, tenant, id, use); err != nil && !errors.Is(err, store.ErrNotFound) {
			k.o.Logger.WarnContext(ctx, "session manifest counters not updated", "tenant", tenant, "correlation_id", c.CorrelationID, "err", err)
		}
	})
	return nil
}

// counted reports whether a rule in force for a call reads its session's
// manifest counters (the idle clock, tool_calls, the declared steps), so
// that a forwarded call must count them (session.Counter.Count): the
// manifests (the tenant's in l, and bounds, the key's and the session's
// narrowed) set max_idle_secs, max_tool_calls or max_steps, or the
// tenant's set has Cedar policies (they may read context.session.tool_calls).
// Otherwise nothing reads them and the call writes nothing for them.
func counted(l Loaded, bounds *policy.Bounds) bool {
	if l.Bounds.Narrow(bounds).Counted() {
		return true
	}
	return l.Set != nil && strings.TrimSpace(l.Set.Cedar) != ""
}

// reachMethod is the method c is bounded as when no Decider decides it
// (policy.Reachable): logging/setLevel, or, for a client's answer, the
// method of the server's request it answers (c.Target); "" for the others.
func reachMethod(c *pipeline.Call) string {
	switch {
	case c.Relayed && c.Method == pipeline.ResponseMethod:
		// An answer whose request is not known is not Reachable: under a
		// manifest it is refused (grant).
		return cmp.Or(c.Target, pipeline.ResponseMethod)
	case c.Method == "logging/setLevel":
		return c.Method
	}
	return ""
}

// reach decides c, a server-bound message no Decider decides (method m,
// reachMethod), by the manifests alone (the tenant's, the key's, the
// session's: policy.Bounds.Reach): the roles and Cedar decide the
// decidable methods only (seed 002).
func (k *Check) reach(ctx context.Context, c *pipeline.Call, l Loaded, bounds *policy.Bounds, m string) error {
	b := l.Bounds.Narrow(bounds.Narrow(k.sessionBounds(ctx, c)))
	if b == nil {
		return nil // no manifest: nothing bounds it
	}
	req := Request(c, k.o.Now())
	req.Method = m
	if reason := b.Reach(req); reason != "" {
		v := policy.Unreached(reason)
		c.PolicyRule, c.PolicyVerdict = v.Rule, VerdictWord(v)
		return v.Refusal()
	}
	return nil
}

// reserve reserves req, a tools/call the decider let through (or held for
// approval), against
// limit in the session's record, and decides it again on the count the
// reservation saw when that differs from the count read at the start of
// the call (calls in flight together): at the limit the gate refuses it
// (tool_calls), and a refused call gives its unit back (undo). A session
// that is not in the store (its write failed, and the session stage let
// the call on) has no record to count in: the call is decided on the
// counts read. A store that cannot be reached is an error: the stage
// fails closed, since a budget that cannot be counted does not bound.
func (k *Check) reserve(ctx context.Context, c *pipeline.Call, l Loaded, req *policy.Request, limit int, res *reservation) (policy.Verdict, error) {
	res.tenant, res.id = c.Tenant.ID, c.SessionID
	before, ok, err := k.counter.Reserve(ctx, res.tenant, res.id, limit)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return l.Decider.Decide(ctx, req), nil
	case err != nil:
		return policy.Verdict{}, fmt.Errorf("policy: reserving the session's tool call: %w", err)
	}
	if ok {
		res.reserved.Store(true)
	} else {
		// The write found the session at its limit. The count Reserve
		// read after it may be lower (units that calls refused since
		// then gave back), but this call holds no unit: decided on that
		// count, it would run unreserved and past the limit.
		before = max(before, limit)
	}
	req.Session.ToolCalls = before
	return l.Decider.Decide(ctx, req), nil
}

// countTimeout bounds one counter write.
const countTimeout = 2 * time.Second

// VerdictWord is a verdict as the audit record's policy_verdict: "allow",
// "approve" (allowed once a human approves) or "deny".
func VerdictWord(v policy.Verdict) string {
	switch {
	case !v.Allow:
		return "deny"
	case v.RequireApproval:
		return "approve"
	}
	return "allow"
}

// Request is c as the deciders see it: the tenant, the caller with its
// roles, the routed server and upstream tool with its annotations, the
// arguments and the session's manifest facts, at now. It declares no
// step (the caller sets Session.Step from policy.ParseStep).
func Request(c *pipeline.Call, now time.Time) *policy.Request {
	req := &policy.Request{
		Method: c.Method,
		Tenant: c.Tenant.ID,
		Caller: policy.Caller{ID: c.Caller, KeyID: c.KeyID, Roles: c.Roles, Claims: c.Claims},
		Session: policy.Session{
			ID: c.SessionID, Started: c.Session.Created, LastAllowed: c.Session.LastAllowed,
			ToolCalls: c.Session.ToolCalls, Steps: c.Session.Steps,
		},
		Now: now,
	}
	if c.SessionID == "" {
		// A request with no session (stateless MCP) outlives nothing: the
		// session clocks do not apply to it.
		req.Session.Started, req.Session.LastAllowed = now, time.Time{}
	}
	if c.Server != nil {
		req.Server = c.Server.Name
	}
	switch c.Method {
	case policy.MethodToolsCall:
		req.Tool = c.UpstreamTool
		if req.Tool == "" {
			req.Tool = c.Tool
		}
		req.Annotations = annotations(c.ToolDef)
	case policy.MethodPrompt:
		req.Prompt = c.Target
	case policy.MethodResource:
		req.ResourceURI = c.Target
	case "resources/subscribe", "resources/unsubscribe":
		// A subscription is decided as a read of its resource (the
		// 2025-11-25 form of a subscription): it would deliver the
		// resource's updates.
		req.Method, req.ResourceURI = policy.MethodResource, c.Target
	case policy.MethodCompletion:
		// The ref names a prompt or a resource (template): route.Named's
		// kind is on UpstreamTool.
		if strings.HasPrefix(c.UpstreamTool, route.KindPrompt+":") {
			req.Prompt = c.Target
		} else {
			req.ResourceURI = c.Target
		}
	}
	req.Arguments = jsonrpc.Member(c.Params, "arguments")
	return req
}

func annotations(def json.RawMessage) json.RawMessage {
	a := jsonrpc.Member(def, "annotations")
	if len(a) == 0 || a[0] != '{' {
		return nil
	}
	return a
}

// Visible implements pipeline.Filter with the same decision as Check
// (policy.Visible): c.ToolDef is the listed tool's definition while it is
// asked. A tenant whose set cannot be loaded shows no tools (DenyAll).
func (k *Check) Visible(ctx context.Context, c *pipeline.Call, server *registry.Server, tool string) bool {
	l := k.Load(ctx, c.Tenant.ID)
	if l.Hash != "" {
		c.PolicyHash = l.Hash
	}
	var key keyFacts
	if c.Roles != nil {
		key = keyFacts{roles: c.Roles, bounds: k.carriedBounds(ctx, c.Tenant.ID, c.KeyID, c.KeyManifest)}
	} else {
		key = k.key(ctx, c.Tenant.ID, c.KeyID)
		c.Roles = key.roles
	}
	tmpl := Request(c, k.o.Now())
	tmpl.Bounds = key.bounds.Narrow(k.sessionBounds(ctx, c))
	if limit := l.Bounds.Narrow(tmpl.Bounds).MaxToolCalls(); limit > 0 && c.SessionID == "" {
		tmpl.Session.ToolCalls = limit // as decide: no session, no budget to call on
	}
	switch c.Method {
	case "prompts/list":
		return policy.VisibleAs(ctx, l.Decider, tmpl, policy.MethodPrompt, server.Name, strings.TrimPrefix(tool, route.KindPrompt+":"), nil)
	case "resources/list":
		return policy.VisibleAs(ctx, l.Decider, tmpl, policy.MethodResource, server.Name, strings.TrimPrefix(tool, route.KindResource+":"), nil)
	case "resources/templates/list":
		// A template names many URIs, not one: it is listed, and each
		// read of a URI it expands to is decided on that URI.
		return true
	case "logging/setLevel":
		// Which servers it is sent to on /mcp: the same decision as on
		// /mcp/{server}.
		tmpl.Method, tmpl.Server = "logging/setLevel", server.Name
		return l.Bounds.Narrow(tmpl.Bounds).Reach(tmpl) == ""
	}
	return policy.Visible(ctx, l.Decider, tmpl, server.Name, tool, annotations(c.ToolDef))
}

// keyFacts are what the policy reads of the caller's key record.
type keyFacts struct {
	roles  []string       // never nil
	bounds *policy.Bounds // the key's manifest; nil: none
}

// key reads the caller's roles and manifest from its key record, cached
// like the tenants' sets (a change of a key's roles is in force within
// the refresh period; a revoked key is refused by the authenticator, not
// here). A key that cannot be read holds no roles (fail closed: a role
// only ever grants) and is not cached; its manifest, which can only
// narrow, is then missing: the tenant's still bounds.
func (k *Check) key(ctx context.Context, tenant, keyID string) keyFacts {
	out := keyFacts{roles: []string{}}
	if keyID == "" || auth.IsTokenKeyID(keyID) { // an OAuth token's caller has no key record
		return out
	}
	now := k.o.Now()
	k.mu.Lock()
	e, ok := k.keyFacts[keyID]
	k.mu.Unlock()
	if ok && now.Sub(e.fetched) < k.o.Refresh {
		return e.facts
	}
	out, cache := k.readKey(ctx, tenant, keyID)
	if cache {
		k.mu.Lock()
		if len(k.keyFacts) >= k.o.MaxTenants {
			for id := range k.keyFacts { // drop any one: a dropped key is read again
				delete(k.keyFacts, id)
				break
			}
		}
		k.keyFacts[keyID] = keyEntry{facts: out, fetched: now}
		k.mu.Unlock()
	}
	return out
}

// readKey reads the key record; cache is false when it could not be read.
func (k *Check) readKey(ctx context.Context, tenant, keyID string) (out keyFacts, cache bool) {
	out = keyFacts{roles: []string{}}
	rec, err := k.keys.Key(ctx, keyID)
	switch {
	case err != nil:
		k.o.Logger.WarnContext(ctx, "key record unreadable; caller decided with no roles", "tenant", tenant, "err", err)
		return out, false
	case rec.Tenant != tenant:
		return out, false
	}
	if rec.Roles != nil {
		out.roles = rec.Roles
	}
	out.bounds = k.keyBounds(ctx, tenant, keyID, rec.Manifest)
	return out, true
}

// carriedBounds is keyBounds of the manifest a call carries, compiled
// once per manifest value authentication hands out (the registry's cached
// key record): the last one is kept per key, bounded like the key facts.
func (k *Check) carriedBounds(ctx context.Context, tenant, keyID string, m *policy.Manifest) *policy.Bounds {
	if m == nil {
		return nil
	}
	k.mu.Lock()
	e, ok := k.carried[keyID]
	k.mu.Unlock()
	if ok && e.m == m {
		return e.b
	}
	b := k.keyBounds(ctx, tenant, keyID, m)
	k.mu.Lock()
	if len(k.carried) >= k.o.MaxTenants {
		for id := range k.carried { // drop any one: it is compiled again
			delete(k.carried, id)
			break
		}
	}
	k.carried[keyID] = carriedEntry{m: m, b: b}
	k.mu.Unlock()
	return b
}

// MaxSessionManifests bounds the cache of sessions' compiled manifests
// (by their text, each at most policy.MaxSessionManifestBytes: at most
// 8 MiB of text); past it the cache is emptied.
const MaxSessionManifests = 1024

// sessionBounds is the manifest c's session declared, compiled (nil:
// none), cached by its text. The session stage validated it when the
// session opened; one that no longer compiles grants nothing.
func (k *Check) sessionBounds(ctx context.Context, c *pipeline.Call) *policy.Bounds {
	text := c.Session.Manifest
	if text == "" {
		return nil
	}
	k.mu.Lock()
	b, ok := k.sessions[text]
	k.mu.Unlock()
	if ok {
		return b
	}
	m, err := policy.ParseManifest([]byte(text))
	if err == nil {
		b, err = policy.Merge(m)
	}
	if err != nil {
		k.o.Logger.ErrorContext(ctx, "session manifest invalid; the session's calls are refused", "tenant", c.Tenant.ID, "err", err)
		b, _ = policy.Merge(&policy.Manifest{Grants: map[string][]string{}})
	}
	k.mu.Lock()
	if len(k.sessions) >= MaxSessionManifests {
		clear(k.sessions)
	}
	k.sessions[text] = b
	k.mu.Unlock()
	return b
}

// carriedEntry is one key's carried manifest and its bounds.
type carriedEntry struct {
	m *policy.Manifest
	b *policy.Bounds
}

// keyBounds is a key's manifest compiled (nil: none). Writers validate a
// key's manifest; one that does not compile grants nothing.
func (k *Check) keyBounds(ctx context.Context, tenant, keyID string, m *policy.Manifest) *policy.Bounds {
	if m == nil {
		return nil
	}
	b, err := policy.Merge(m)
	if err != nil {
		k.o.Logger.ErrorContext(ctx, "key manifest invalid; the key's calls are refused", "tenant", tenant, "key", keyID, "err", err)
		b, _ = policy.Merge(&policy.Manifest{Grants: map[string][]string{}})
	}
	return b
}

// cachedHash is the hash of tenant's cached set, or "" when none is.
func (k *Check) cachedHash(tenant string) string {
	k.mu.Lock()
	e := k.tenants[tenant]
	k.mu.Unlock()
	if e == nil {
		return ""
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.loaded {
		return ""
	}
	return e.cur.Hash
}

// Load returns tenant's set: the cached copy, read again when it is older
// than the refresh period; policy.DenyAll while it was never loaded and
// cannot be read. It never fails.
func (k *Check) Load(ctx context.Context, tenant string) Loaded {
	e := k.entry(tenant)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := k.o.Now()
	if e.loaded && now.Sub(e.fetched) < k.o.Refresh {
		return e.cur
	}
	if e.loaded && !e.failedAt.IsZero() && now.Sub(e.failedAt) < k.retryAfterFailure() {
		return e.cur
	}
	l, err := k.read(ctx, tenant)
	if err != nil {
		if !e.loaded {
			k.o.Logger.ErrorContext(ctx, "policy set unreadable and never loaded; decidable calls refused (policy not loaded)", "tenant", tenant, "err", err)
			return Loaded{Decider: policy.DenyAll{}}
		}
		e.failedAt = now
		k.o.Logger.WarnContext(ctx, "policy set unreadable; the last known set stays in force",
			"tenant", tenant, "age", now.Sub(e.fetched).String(), "err", err)
		return e.cur
	}
	e.cur, e.loaded, e.fetched, e.failedAt = l, true, now, time.Time{}
	return l
}

// read reads and builds tenant's stored set; no stored set is the empty
// one.
func (k *Check) read(ctx context.Context, tenant string) (Loaded, error) {
	p, err := k.sets.Policy(ctx, tenant)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Build(&policy.Set{})
	case err != nil:
		return Loaded{}, err
	}
	set, err := policy.ParseSet([]byte(p.Source))
	if err != nil {
		return Loaded{}, err
	}
	return Build(set)
}

// Build is set ready to decide: its decider and its hash.
func Build(set *policy.Set) (Loaded, error) {
	d, err := policy.Build(set)
	if err != nil {
		return Loaded{}, err
	}
	h, err := policy.Hash(set)
	if err != nil {
		return Loaded{}, err
	}
	b, err := policy.Merge(set.Manifest)
	if err != nil {
		return Loaded{}, err
	}
	free, err := policy.BuildSessionFree(set)
	if err != nil {
		return Loaded{}, err
	}
	return Loaded{Decider: d, Hash: h, Set: set, Bounds: b, SessionFree: free}, nil
}

func (k *Check) retryAfterFailure() time.Duration {
	if k.o.Refresh > 0 {
		return k.o.Refresh
	}
	return time.Second
}

// entry returns tenant's cache entry, making room when the cache is full
// (the entry used least recently goes).
func (k *Check) entry(tenant string) *entry {
	now := k.o.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.tenants[tenant]
	if e == nil {
		if len(k.tenants) >= k.o.MaxTenants {
			var oldest string
			var at time.Time
			for t, x := range k.tenants {
				if oldest == "" || x.used.Before(at) {
					oldest, at = t, x.used
				}
			}
			delete(k.tenants, oldest)
		}
		e = &entry{}
		k.tenants[tenant] = e
	}
	e.used = now
	return e
}

var (
	_ pipeline.Prefetcher = (*Check)(nil)
	_ pipeline.Peeker     = (*Check)(nil)
	_ pipeline.Foreseer   = (*Check)(nil)
	_ pipeline.Filter     = (*Check)(nil)
)
