// Package ratelimit is the pipeline's "ratelimit" check (-32004): calls per
// minute per session (RATE_LIMIT_PER_SESSION), per tool within a session
// (RATE_LIMIT_PER_TOOL) and per API key across all its sessions
// (RATE_LIMIT_PER_KEY, so that minting fresh sessions buys no fresh
// calls), counted in fixed one-minute UTC windows in a shared
// Counter so that every gateway instance sees the same count. The tool
// window is keyed by the routed server and tool, so the names a tool
// answers to (its exposed name, server.tool, params.server) share one
// window; a call sent without a session counts in its API key's windows
// and in the new session's.
//
// It applies to tools/call only (its stage's scope). A limit of 0 turns
// that limit off. When the counter store cannot be reached the check
// returns the error and its stage fails open (seed 004: the limiter lets
// the call through); the pipeline applies that in one place.
package ratelimit

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/session"
)

// Counter counts events in named windows. shared/memstore and shared/dynamo
// implement it; quota.Meter is the same method.
type Counter interface {
	// Incr adds one to the counter named key if its value is below limit and
	// returns the new value with ok true. When the value has reached limit
	// it changes nothing and returns the current value with ok false.
	// limit <= 0 means no limit. Keys name their window (a counter is never
	// reset); expires is when that window is over, after which the store may
	// forget the counter.
	Incr(ctx context.Context, key string, limit int64, expires time.Time) (n int64, ok bool, err error)
	// Decr gives back one unit that Incr counted (a call counted ahead of
	// a decision that then refused it). It never goes below zero.
	Decr(ctx context.Context, key string) error
	// Value returns the counter named key as a strongly consistent read
	// sees it (0 when absent), writing nothing: whether an Incr with a
	// limit would be refused, learnt without counting (Check.Peek).
	Value(ctx context.Context, key string) (int64, error)
}

// Window is the length of a rate-limit window.
const Window = time.Minute

// Scopes of a -32004 refusal.
const (
	ScopeSession = "session"
	ScopeTool    = "tool"
	ScopeKey     = "key"
)

// Options are the limits, in calls per minute (0 = off).
type Options struct {
	PerSession int // settings RateLimitPerSession
	PerTool    int // settings RateLimitPerTool
	PerKey     int // settings RateLimitPerKey: one window per API key, across its sessions
}

// Check is the rate-limit check. It is safe for concurrent use.
type Check struct {
	counter    Counter
	perSession int64
	perTool    int64
	perKey     int64
	now        func() time.Time
	log        *slog.Logger
}

// New returns the check with the limits in o. now and log default to
// time.Now and slog.Default when nil.
func New(c Counter, o Options, now func() time.Time, log *slog.Logger) *Check {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Check{counter: c, perSession: int64(o.PerSession), perTool: int64(o.PerTool), perKey: int64(o.PerKey), now: now, log: log}
}

// Keys returns the counter keys of the session window and the tool window
// that contain now. Exported for docs and tests; the layout is described in
// docs/design/dynamodb.md. session is the window's owner (see owner).
func Keys(tenant, session, server, tool string, now time.Time) (sessionKey, toolKey string) {
	w := strconv.FormatInt(now.UTC().Truncate(Window).Unix(), 10)
	if server != "" {
		tool = server + "/" + tool
	}
	return "rl#s#" + tenant + "#" + session + "#" + w, "rl#t#" + tenant + "#" + session + "#" + w + "#" + tool
}

// ToolOf is the server and tool whose window c counts in: the routed
// server and its tool's upstream name (route resolves first), so that the
// names a tool answers to share one window; else what the client named.
func ToolOf(c *pipeline.Call) (server, tool string) {
	if c.Server != nil {
		return c.Server.Name, c.UpstreamTool
	}
	return c.RequestedServer, c.Tool
}

// ToolWindow is the name of c's tool window in its session's record
// (session.Window.Tool): the tool part of Keys.
func ToolWindow(c *pipeline.Call) string {
	server, tool := ToolOf(c)
	if server != "" {
		return server + "/" + tool
	}
	return tool
}

// KeyWindow returns the counter key of the API key's window (all its
// sessions) that contains now. Exported for docs and tests.
func KeyWindow(tenant, keyID string, now time.Time) string {
	return "rl#k#" + tenant + "#" + keyID + "#" + strconv.FormatInt(now.UTC().Truncate(Window).Unix(), 10)
}

// Check implements pipeline.Check.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	decide, _ := k.Prefetch(ctx, c)
	return decide()
}

// Prefetch implements pipeline.Prefetcher. The windows are counted with
// concurrent requests (one round trip), started before earlier checks have
// decided. When any stage refuses the call (this one included), undo gives
// back every unit it counted: a refused call holds nothing.
func (k *Check) Prefetch(ctx context.Context, c *pipeline.Call) (func() error, func()) {
	return k.prefetch(ctx, c, true)
}

// Peek implements pipeline.Peeker: whether the call would be refused, from
// a consistent read of each window Prefetch would count in (Counter.Value:
// refused at its limit) and the session's windows as the session stage's
// Peek read them; nothing is counted.
func (k *Check) Peek(ctx context.Context, c *pipeline.Call) func() error {
	decide, _ := k.prefetch(ctx, c, false)
	return decide
}

// prefetch is Prefetch; count false: Peek.
func (k *Check) prefetch(ctx context.Context, c *pipeline.Call, count bool) (func() error, func()) {
	if k.perSession <= 0 && k.perTool <= 0 && k.perKey <= 0 {
		return func() error { return nil }, nil
	}
	now := k.now()
	start := now.UTC().Truncate(Window)
	end := start.Add(Window)
	server, tool := ToolOf(c)
	// Windows the session check counted in the session's record
	// (c.SessionWindows) are decided from what it found, not counted here.
	folded := c.SessionWindows
	// One record for what the closures share: one allocation for the
	// windows, their waits and the undo's once, not one for each.
	p := &prefetched{}
	var ownerRoom [2]string
	for _, who := range owners(c, ownerRoom[:0]) {
		if folded != nil && who == c.SessionID {
			continue
		}
		sKey, tKey := Keys(c.Tenant.ID, who, server, tool, now)
		if k.perSession > 0 {
			p.add(result{scope: ScopeSession, key: sKey, limit: k.perSession})
		}
		if k.perTool > 0 {
			p.add(result{scope: ScopeTool, key: tKey, limit: k.perTool})
		}
	}
	if k.perKey > 0 && c.KeyID != "" {
		p.add(result{scope: ScopeKey, key: KeyWindow(c.Tenant.ID, c.KeyID, now), limit: k.perKey})
	}
	windows := p.windows[:p.n]
	for i := range windows {
		w := &windows[i]
		if count {
			p.waits[i] = c.Async(func() { _, w.ok, w.err = k.counter.Incr(ctx, w.key, w.limit, end) })
			continue
		}
		p.waits[i] = c.Async(func() {
			var n int64
			n, w.err = k.counter.Value(ctx, w.key)
			w.ok = n < w.limit
		})
	}
	wait := func() {
		for _, w := range p.waits[:p.n] {
			w()
		}
	}
	decide := func() error {
		wait()
		retry := end.Sub(now).Milliseconds()
		if retry < 1 {
			retry = 1
		}
		var unreachable error
		if folded != nil {
			switch a := folded.Admission; {
			case folded.Err != nil:
				unreachable = folded.Err
			case a.SessionFull:
				return refusal.RateLimit(ScopeSession, int(folded.Window.PerSession), retry)
			case a.ToolFull:
				return refusal.RateLimit(ScopeTool, int(folded.Window.PerTool), retry)
			case a.ToolsFull:
				return refusal.RateLimitTools(session.MaxToolWindows, retry)
			}
		}
		for _, w := range windows {
			if w.err != nil {
				unreachable = w.err // the stage's mode applies, unless a window refused
				continue
			}
			if !w.ok {
				return refusal.RateLimit(w.scope, int(w.limit), retry)
			}
		}
		return unreachable
	}
	if !count {
		return decide, nil
	}
	undo := func() {
		p.undone.Do(func() {
			wait()
			k.giveBack(ctx, c, windows)
		})
	}
	return decide, undo
}

// giveBack returns the units windows counted, together (c.Async): one
// round trip.
func (k *Check) giveBack(ctx context.Context, c *pipeline.Call, windows []result) {
	var waits [maxWindows]func()
	n := 0
	for i := range windows {
		if w := &windows[i]; w.ok && w.err == nil {
			waits[n] = c.Async(func() {
				if err := k.counter.Decr(context.WithoutCancel(ctx), w.key); err != nil {
					k.log.WarnContext(ctx, "rate window not given back", "scope", w.scope, "err", err)
				}
			})
			n++
		}
	}
	for _, wait := range waits[:n] {
		wait()
	}
}

// prefetched is one call's windows, as many as maxWindows, and the waits
// of their counts.
type prefetched struct {
	windows [maxWindows]result
	waits   [maxWindows]func()
	n       int
	undone  sync.Once
}

// maxWindows: session and tool windows for each of at most two owners
// (owners), and the API key's.
const maxWindows = 5

func (p *prefetched) add(r result) {
	p.windows[p.n] = r
	p.n++
}

// result is one window's count for a call.
type result struct {
	scope string
	key   string
	limit int64
	ok    bool
	err   error
}

// owners names whose windows a call counts in: its session's; and for a
// call that came without a session (one was minted for it) its API key's
// as well, so that leaving the session header out does not buy a fresh
// window per call, and the session it mints starts with this call counted.
// A stateless call (MCP 2026-07-28) belongs to no session: its API key's
// windows stand for the session's (without it, every stateless call of
// the tenant would share one window, the session "").
// The names are appended to dst.
func owners(c *pipeline.Call, dst []string) []string {
	if c.Stateless && c.KeyID != "" {
		return append(dst, "key:"+c.KeyID)
	}
	if c.NewSession && c.KeyID != "" {
		return append(dst, "key:"+c.KeyID, c.SessionID)
	}
	return append(dst, c.SessionID)
}

var (
	_ pipeline.Prefetcher = (*Check)(nil)
	_ pipeline.Peeker     = (*Check)(nil)
)
