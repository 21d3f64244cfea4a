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
// Counting. For a call the whole pipeline allowed and the gateway
// forwarded (no stage refused it, and it finished with any outcome but
// refused: the pipeline's undo tells the rest) the check counts the
// session's manifest counters in the store (session.Counter: the idle
// clock, tool_calls, the declared step). Calls in flight together are
// decided on the same counts, so concurrent calls may pass a budget by as
// many as run at once.
package policycheck

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
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

// Keys is what the check reads a caller's key facts from: its roles (used
// when the call does not carry them, pipeline.Call.Roles nil) and its
// manifest.
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
	keyFacts map[string]keyEntry // by key id, under mu
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
}

// New returns the check over the tenants' sets, the key records (for
// roles) and the session counters. o may be nil.
func New(sets Policies, keys Keys, counter session.Counter, o *Options) *Check {
	k := &Check{sets: sets, keys: keys, counter: counter, tenants: map[string]*entry{}, keyFacts: map[string]keyEntry{}}
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
	if h := k.cachedHash(c.Tenant.ID); h != "" {
		c.PolicyHash = h
	}
	var l Loaded
	var key keyFacts
	tenant, keyID := c.Tenant.ID, c.KeyID
	wait := c.Async(func() {
		l = k.Load(ctx, tenant)
		key = k.key(ctx, tenant, keyID)
	})
	// undone: a stage refused the call (this one or a later one, with a
	// refusal or -32603), or it was finished as refused: it was not sent,
	// and counts nothing.
	undone := new(atomic.Bool)
	decide := func() error {
		wait()
		if c.Roles == nil {
			c.Roles = key.roles
		}
		return k.decide(ctx, c, l, key.bounds, undone)
	}
	return decide, func() { undone.Store(true) }
}

// decide puts c to l's decider and records the verdict on c.
func (k *Check) decide(ctx context.Context, c *pipeline.Call, l Loaded, bounds *policy.Bounds, undone *atomic.Bool) error {
	if l.Hash != "" {
		c.PolicyHash = l.Hash
	}
	if c.Server == nil {
		return nil // not routed: an earlier stage answers
	}
	var step policy.Step
	if jsonrpc.Member(c.Params, "_meta") != nil { // most calls have none: no decode
		var err error
		if step, err = policy.ParseStep(c.Params); err != nil {
			return refusal.New(refusal.InvalidParams, `Invalid params: _meta["aegis/step"] is not a non-negative integer`)
		}
	}
	req := Request(c, k.o.Now())
	req.Session.Step = step
	req.Bounds = bounds
	v := l.Decider.Decide(ctx, req)
	c.PolicyRule, c.PolicyVerdict, c.PolicyAudit = v.Rule, VerdictWord(v), v.Audit
	if v.Refused() {
		return v.Refusal()
	}
	c.PolicyApproval = v.Held()
	use := session.Use{At: req.Now, ToolCall: req.Method == policy.MethodToolsCall, Step: step.N, Declared: step.Declared}
	tenant, id := c.Tenant.ID, c.SessionID
	c.OnDoneAsync(func(o audit.Outcome) {
		if o == audit.OutcomeRefused || undone.Load() || id == "" {
			return // never sent: it spends nothing and keeps nothing alive
		}
		// Finish runs on the gateway's settling path, after the answer.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), countTimeout)
		defer cancel()
		if err := k.counter.Count(cctx, tenant, id, use); err != nil && !errors.Is(err, store.ErrNotFound) {
			k.o.Logger.WarnContext(ctx, "session manifest counters not updated", "tenant", tenant, "correlation_id", c.CorrelationID, "err", err)
		}
	})
	return nil
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
	if c.Server != nil {
		req.Server = c.Server.Name
	}
	req.Tool = c.UpstreamTool
	if req.Tool == "" {
		req.Tool = c.Tool
	}
	req.Annotations = annotations(c.ToolDef)
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
	key := k.key(ctx, c.Tenant.ID, c.KeyID)
	if c.Roles == nil {
		c.Roles = key.roles
	}
	tmpl := Request(c, k.o.Now())
	tmpl.Bounds = key.bounds
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
	if rec.Manifest != nil {
		b, err := policy.Merge(rec.Manifest)
		if err != nil {
			// Writers validate a key's manifest; one that does not
			// compile grants nothing.
			k.o.Logger.ErrorContext(ctx, "key manifest invalid; the key's calls are refused", "tenant", tenant, "key", keyID, "err", err)
			b, _ = policy.Merge(&policy.Manifest{Grants: map[string][]string{}})
		}
		out.bounds = b
	}
	return out, true
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
	return Loaded{Decider: d, Hash: h, Set: set}, nil
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
	_ pipeline.Filter     = (*Check)(nil)
)
