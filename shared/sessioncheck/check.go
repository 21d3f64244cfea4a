// Package sessioncheck is the pipeline's "session" slot.
package sessioncheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// MaxNewSessionsPerMinute is the ceiling on sessions one API key opens per
// UTC minute: initialize, and every call sent without a session id, opens
// one. The next is refused -32004 RATE_LIMITED with data scope
// ScopeNewSession, limit and retry_after_ms, before any other check counts
// anything; calls on an existing session are not affected. It is counted
// in the rate limiter's Counter (the same store windows, on both stores)
// under NewSessionKey. 600 a minute is five times the default per-session
// rate limit, which also counts the calls of a key that sends no session
// id: a client that never reuses its session meets that limit first. The
// ceiling bounds what one key can make the store keep: at most 600 new
// sessions a minute, each kept until it has been idle for
// SESSION_IDLE_SECS (docs/design/bounds.md).
const MaxNewSessionsPerMinute = 600

// ScopeNewSession is the scope of the -32004 refusal at the ceiling.
const ScopeNewSession = "new_session"

// MaxIDBytes caps the session id a client sends. The gateway's ids are 32
// hex digits (NewID); a longer one cannot be a session, and is refused as
// an unknown one with the call carrying it cut (audit.Cut), so that no
// later check's store key and no audit record holds it whole.
const MaxIDBytes = 128

// NewSessionKey is the counter of the sessions key opened in the UTC
// minute that contains now (the rate limiter's key layout, prefix "sm").
func NewSessionKey(tenant, key string, now time.Time) string {
	return "sm#" + tenant + "#" + key + "#" + strconv.FormatInt(now.UTC().Truncate(ratelimit.Window).Unix(), 10)
}

// Store is what the check needs: the sessions, and the rate limiter's
// Counter for the ceiling on new sessions. backend.Backend is one.
type Store interface {
	session.Store
	session.Admitter
	ratelimit.Counter
}

// Windows are the rate limits, in calls per minute, whose session and tool
// windows the check counts in the session's own record for a call on an
// existing session in Scope, the rate-limit stage's scope
// (ratelimit.Options' PerSession and PerTool, 0: off): the read (or
// touch) and both counts are then one write (session.Admitter.Admit), and
// the rate-limit check decides those windows from Call.SessionWindows.
// Zero limits: the check only reads or touches the session.
type Windows struct {
	PerSession, PerTool int
	Scope               pipeline.Scope
}

// Check is the pipeline's "session" slot. A call without a session id gets
// a new session, within the key's MaxNewSessionsPerMinute; a known,
// unexpired one is touched (one store operation; see below for decided
// calls); anything else — including a session opened by another caller — is the
// -32603 session error. A tools/call (a decided call) only reads its
// session, and touches it after its answer once its LastSeen is
// session.Limits.Refresh old: on DynamoDB a read on the call's path, and
// a write about once a minute per busy session. Over MCP (/mcp) a session must have been opened by
// initialize (which always mints one): no Mcp-Session-Id is -32600. When the store cannot be reached
// the check returns the error with a session that carries no upstream
// state (the upstream is initialized afresh), and its stage fails open:
// sessions are not an access control (the API key is), and a DynamoDB
// outage must not stop every tool call — the same choice the seed makes
// for the rate limiter. A ceiling counter that cannot be reached lets the
// session be opened the same way.
type Check struct {
	store  Store
	limits session.Limits
	win    Windows
	now    func() time.Time
	log    *slog.Logger
}

// New returns the session check.
func New(s Store, l session.Limits, w Windows, now func() time.Time, log *slog.Logger) *Check {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Check{store: s, limits: l, win: w, now: now, log: log}
}

// Check implements pipeline.Check.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	decide, _ := k.Prefetch(ctx, c)
	return decide()
}

// Prefetch implements pipeline.Prefetcher: the session id is settled at
// once (minted when the client sent none), so later checks can key on it,
// and the store operation runs while they start theirs.
func (k *Check) Prefetch(ctx context.Context, c *pipeline.Call) (func() error, func()) {
	return k.prefetch(ctx, c, true)
}

// prefetch is Prefetch; count false: a minted session is created without
// the call counted in its windows (Peek).
func (k *Check) prefetch(ctx context.Context, c *pipeline.Call, count bool) (func() error, func()) {
	now := k.now()
	if c.Stateless {
		return func() error { return nil }, nil
	}
	if c.MCP && c.SessionID == "" && pipeline.ScopeOf(c.Method) != pipeline.Opening {
		return func() error {
			return refusal.New(refusal.InvalidRequest, "Invalid request: Mcp-Session-Id header is required; send initialize first")
		}, nil
	}
	if len(c.SessionID) > MaxIDBytes {
		c.SessionID = audit.Cut(c.SessionID, MaxIDBytes)
		return func() error { return refusal.Session() }, nil
	}
	if c.SessionID == "" {
		return k.mint(ctx, c, now, count)
	}
	// A decided call (tools/call, a read: its Finish runs) reads its
	// session and touches it after the answer, only when stale; the
	// others touch it at once.
	later := !c.Relayed && pipeline.ScopeOf(c.Method)&pipeline.Decided != 0
	if k.windowsOn() && c.In(k.win.Scope) {
		return k.admit(ctx, c, now, later)
	}
	return k.read(ctx, c, now, later, nil), nil
}

// read reads c's session (later: a decided call, touched after its answer
// when stale) or touches it at once, and decides it. res, when not nil, is
// c.SessionWindows: what the session's windows would admit, from the
// record read, with nothing counted (Peek).
func (k *Check) read(ctx context.Context, c *pipeline.Call, now time.Time, later bool, res *session.AdmitResult) func() error {
	var (
		r   session.Record
		err error
	)
	tenant, id := c.Tenant.ID, c.SessionID
	wait := c.Async(func() {
		if later {
			r, err = k.store.Session(ctx, tenant, id, now, k.limits)
		} else {
			r, err = k.store.Touch(ctx, tenant, id, now, k.limits)
		}
		if res != nil && err != nil && !errors.Is(err, store.ErrNotFound) {
			res.Err = err
		}
	})
	return func() error {
		wait()
		switch {
		case errors.Is(err, store.ErrNotFound):
			return refusal.Session()
		case err != nil:
			// Not checked: the stage fails open, without upstream session state.
			c.Session = session.Record{ID: c.SessionID, Tenant: c.Tenant.ID, Caller: c.Caller, Created: now, LastSeen: now}
			return err
		case r.Caller != c.Caller:
			// A session belongs to the caller that opened it; another key
			// of the same tenant cannot continue it.
			return refusal.Session()
		}
		c.Session = r
		if res != nil {
			_, res.Admission = session.Admitted(r, now, res.Window)
		}
		if later && k.limits.Stale(r, now) {
			c.OnDoneAsync(func(audit.Outcome) { k.touch(ctx, c, now) })
		}
		return nil
	}
}

// Peek implements pipeline.Peeker: whether the session stage would refuse
// c, and, for the rate-limit stage's Peek, whether the session's own rate
// windows would (c.SessionWindows, nothing counted), from one consistent
// read of the session's record. The session is touched after the answer
// only when its LastSeen is stale (as a decided call's read touches it).
// A call that opens its session opens it as Prefetch does, without
// counting the call in the new session's windows: the client gets the
// session in the answer whatever refused it.
func (k *Check) Peek(ctx context.Context, c *pipeline.Call) func() error {
	if c.Stateless || c.SessionID == "" || len(c.SessionID) > MaxIDBytes {
		decide, _ := k.prefetch(ctx, c, false)
		return decide
	}
	now := k.now()
	var res *session.AdmitResult
	if k.windowsOn() && c.In(k.win.Scope) {
		res = k.windows(c, now)
	}
	return k.read(ctx, c, now, true, res)
}

// admit is Prefetch for a call on an existing session that counts in its
// rate windows: one Admit reads the session, touches it and counts the
// call in its session and tool windows (c.SessionWindows, which the
// rate-limit check decides from) and, for a decided call, in the
// session manifest's counters (its idle clock, tool_calls, declared step:
// session.Window.Use; the policy check decides on them as they were
// before it, c.Session). undo gives back what it counted, in one write,
// when the call is refused by any stage. later: a decided call, whose
// session is touched after its answer when nothing counted.
func (k *Check) admit(ctx context.Context, c *pipeline.Call, now time.Time, later bool) (func() error, func()) {
	res := k.windows(c, now)
	if later {
		res.Window.Use = use(c, now)
	}
	var (
		r   session.Record
		err error
	)
	tenant, id, caller := c.Tenant.ID, c.SessionID, c.Caller
	wait := c.Async(func() {
		r, res.Admission, err = k.store.Admit(ctx, tenant, id, caller, now, k.limits, res.Window)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			res.Err = err
		}
		res.Used = err == nil && res.Admission.Counted() && res.Window.Counts()
	})
	decide := func() error {
		wait()
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Missing, expired, or another caller's: nothing counted.
			return refusal.Session()
		case err != nil:
			c.Session = session.Record{ID: c.SessionID, Tenant: c.Tenant.ID, Caller: c.Caller, Created: now, LastSeen: now}
			return err
		}
		c.Session = r
		if !res.Admission.Counted() && k.limits.Stale(r, now) {
			// At a rate limit: the call is refused, and nothing was
			// written; the session is touched as a read call touches it.
			if later {
				c.OnDoneAsync(func(audit.Outcome) { k.touch(ctx, c, now) })
			} else {
				k.touch(ctx, c, now)
			}
		}
		return nil
	}
	return decide, k.giveBack(ctx, c, wait, func() (bool, session.Record) { return err == nil && res.Admission.Counted(), r })
}

// use is the count of c, a decided call, in its session manifest's
// counters at now: a tools/call counts in tool_calls, and a declared step
// (_meta["aegis/step"]) in the steps. A step that does not parse is not
// counted (the policy check refuses the call, and it is given back).
func use(c *pipeline.Call, now time.Time) session.Use {
	u := session.Use{At: now, ToolCall: c.Method == policy.MethodToolsCall}
	if jsonrpc.Member(c.Params, "_meta") != nil { // most calls have none: no decode
		if st, err := policy.ParseStep(c.Params); err == nil {
			u.Step, u.Declared = st.N, st.Declared
		}
	}
	return u
}

func (k *Check) windowsOn() bool { return k.win.PerSession > 0 || k.win.PerTool > 0 }

// windows is the AdmitResult of c's session and tool windows at now, set
// on c (Call.SessionWindows) for the rate-limit check.
func (k *Check) windows(c *pipeline.Call, now time.Time) *session.AdmitResult {
	res := &session.AdmitResult{Window: session.Window{
		Start:      now.UTC().Truncate(ratelimit.Window),
		PerSession: int64(k.win.PerSession),
		Tool:       ratelimit.ToolWindow(c),
		PerTool:    int64(k.win.PerTool),
	}}
	c.SessionWindows = res
	return res
}

// giveBack is the undo of a call whose windows (and manifest counters)
// were counted in its session's record: once wait has returned, when
// counted reports that they were, one GiveBack of them, with the record
// the count returned.
func (k *Check) giveBack(ctx context.Context, c *pipeline.Call, wait func(), counted func() (bool, session.Record)) func() {
	var once sync.Once
	tenant, id, res := c.Tenant.ID, c.SessionID, c.SessionWindows
	return func() {
		once.Do(func() {
			wait()
			ok, found := counted()
			if !ok {
				return
			}
			cctx, cancel := c.SettleContext(ctx, touchTimeout)
			defer cancel()
			if err := k.store.GiveBack(cctx, tenant, id, res.Window, found); err != nil {
				k.log.WarnContext(ctx, "session rate windows not given back", "tenant", tenant, "correlation_id", c.CorrelationID, "err", err)
			}
		})
	}
}

// touchTimeout bounds the touch a decided call makes after its answer.
const touchTimeout = 2 * time.Second

// touch sets c's session's LastSeen to now, on the call's settling path
// (Call.OnDoneAsync: alongside the audit write, whatever the outcome). A
// session that expired or was deleted meanwhile is left so; a store that
// cannot be reached leaves LastSeen as it was (the next call tries again).
func (k *Check) touch(ctx context.Context, c *pipeline.Call, now time.Time) {
	cctx, cancel := c.SettleContext(ctx, touchTimeout)
	defer cancel()
	if _, err := k.store.Touch(cctx, c.Tenant.ID, c.SessionID, now, k.limits); err != nil && !errors.Is(err, store.ErrNotFound) {
		k.log.WarnContext(ctx, "session not touched", "tenant", c.Tenant.ID, "correlation_id", c.CorrelationID, "err", err)
	}
}

// mint opens a session for c within its key's ceiling. In process the
// ceiling is counted first and nothing is stored when it refuses; against
// a remote store the count and the write overlap (one round trip, as for
// a call on an existing session), and a session written for a call the
// ceiling refuses is deleted again.
func (k *Check) mint(ctx context.Context, c *pipeline.Call, now time.Time, countWindows bool) (func() error, func()) {
	id := NewID()
	if c.Method == "initialize" {
		if caps := upstream.ParseCaps(jsonrpc.Member(c.Params, "capabilities")); caps != 0 {
			id += capsSep + caps.Tag()
		}
	}
	r := session.Record{ID: id, Tenant: c.Tenant.ID, Caller: c.Caller, Created: now, LastSeen: now}
	m, err := declaredManifest(c.Params)
	if err != nil {
		return func() error { return err }, nil
	}
	r.Manifest = m
	c.SessionID, c.NewSession = r.ID, true
	// A decided call counts in the new session's own windows: it is
	// created with them counted.
	var res *session.AdmitResult
	if k.windowsOn() && c.In(k.win.Scope) {
		res = k.windows(c, now)
		if countWindows {
			r, _ = session.Admitted(r, now, res.Window)
		} else {
			_, res.Admission = session.Admitted(r, now, res.Window)
		}
	}
	owner := c.KeyID
	if owner == "" {
		owner = "caller:" + c.Caller
	}
	key := NewSessionKey(c.Tenant.ID, owner, now)
	end := now.UTC().Truncate(ratelimit.Window).Add(ratelimit.Window)
	var (
		counted         bool
		countErr        error
		created         bool
		countWait, wait func()
	)
	count := func() {
		_, counted, countErr = k.store.Incr(ctx, key, MaxNewSessionsPerMinute, end)
	}
	create := func() {
		err = k.store.Create(ctx, r)
		created = err == nil
		if res != nil && err != nil {
			res.Err = err
		}
	}
	if c.Inline {
		count()
		if counted || countErr != nil {
			create()
		}
		countWait, wait = func() {}, func() {}
	} else {
		countWait, wait = c.Async(count), c.Async(create)
	}
	var undo func()
	if res != nil && countWindows {
		undo = k.giveBack(ctx, c, func() { countWait(); wait() }, func() (bool, session.Record) { return created, r })
	}
	return func() error {
		countWait()
		wait()
		if countErr == nil && !counted {
			if created {
				if derr := k.store.Delete(context.WithoutCancel(ctx), r.Tenant, r.ID); derr != nil {
					k.log.WarnContext(ctx, "session over the ceiling not deleted; it expires", "err", derr)
				}
			}
			c.SessionID, c.NewSession = "", false
			retry := max(end.Sub(now).Milliseconds(), 1)
			return refusal.New(refusal.RateLimited, fmt.Sprintf("Rate limit exceeded: %d new sessions per minute per API key; send X-Session-ID (or Mcp-Session-Id) to continue a session", MaxNewSessionsPerMinute)).
				With("scope", ScopeNewSession).With("limit", MaxNewSessionsPerMinute).With("retry_after_ms", retry)
		}
		c.Session = r
		if err != nil {
			return err // not stored: the stage fails open
		}
		return countErr // not counted: the stage fails open
	}, undo
}

// declaredManifest is the session manifest the request that opens a
// session declares in _meta["aegis/manifest"] (policy.MetaManifest),
// compacted; "" when it declares none. One that does not parse or
// validate is -32602, and no session is opened.
func declaredManifest(params json.RawMessage) (string, error) {
	meta := jsonrpc.Member(params, "_meta")
	if meta == nil {
		return "", nil
	}
	raw := jsonrpc.Member(meta, policy.MetaManifest)
	if raw == nil {
		return "", nil
	}
	if _, err := policy.ParseManifest(raw); err != nil {
		// The client's own text, back to it, bounded.
		return "", refusal.New(refusal.InvalidParams, "Invalid params: _meta[\""+policy.MetaManifest+"\"]: "+audit.Cut(err.Error(), 256))
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", refusal.New(refusal.InvalidParams, "Invalid params: _meta[\""+policy.MetaManifest+"\"] is not JSON")
	}
	return b.String(), nil
}

// capsSep joins a session id's random part and its capability tag.
const capsSep = "-"

// Caps is the client capability set c runs with (upstream.Caps): a
// 2026-07-28 request's own, from its _meta (Call.Session.Capabilities,
// which the gateway sets from it), or its session's, which the session's
// id carries: the 32 hex digits of NewID, then "-" and the set's two
// (upstream.Caps.Tag), when initialize declared any. The id carries it,
// not the session record, because routing (a pipeline.Resolver) resolves
// a call's tool before the record is read, in the same wave as the other
// checks' store work; the id is the record's key, so a client that
// changes the tag names a session that does not exist. An id without a tag
// (a session that declared nothing, a /v1/invoke session, or one opened
// before ids carried the tag) runs with none.
func Caps(c *pipeline.Call) upstream.Caps {
	if c.Stateless {
		return upstream.ParseCaps(json.RawMessage(c.Session.Capabilities))
	}
	id := c.SessionID
	if len(id) != 32+len(capsSep)+2 || id[32:32+len(capsSep)] != capsSep {
		return 0
	}
	caps, _ := upstream.ParseCapsTag(id[32+len(capsSep):])
	return caps
}

// NewID returns a new session id: 128 random bits, hex.
func NewID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("session: no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

var (
	_ pipeline.Prefetcher = (*Check)(nil)
	_ pipeline.Peeker     = (*Check)(nil)
)
