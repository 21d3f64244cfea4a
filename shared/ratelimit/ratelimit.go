// Package ratelimit is the pipeline's "ratelimit" check (-32004): calls per
// minute per session (RATE_LIMIT_PER_SESSION) and per tool within a session
// (RATE_LIMIT_PER_TOOL), counted in fixed one-minute UTC windows in a shared
// Counter so that every gateway instance sees the same count.
//
// It applies to tools/call only. A limit of 0 turns that limit off. When the
// counter store cannot be reached the call goes through and the failure is
// logged (seed 004: the limiter fails open).
package ratelimit

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
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
}

// Window is the length of a rate-limit window.
const Window = time.Minute

// Scopes of a -32004 refusal.
const (
	ScopeSession = "session"
	ScopeTool    = "tool"
)

// Check is the rate-limit check. It is safe for concurrent use.
type Check struct {
	counter    Counter
	perSession int64
	perTool    int64
	now        func() time.Time
	log        *slog.Logger
}

// New returns the check. perSession and perTool are calls per minute
// (settings RateLimitPerSession and RateLimitPerTool; 0 = off). now and log
// default to time.Now and slog.Default when nil.
func New(c Counter, perSession, perTool int, now func() time.Time, log *slog.Logger) *Check {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Check{counter: c, perSession: int64(perSession), perTool: int64(perTool), now: now, log: log}
}

// Slot implements pipeline.Check.
func (*Check) Slot() string { return "ratelimit" }

// Keys returns the counter keys of the session window and the tool window
// that contain now. Exported for docs and tests; the layout is described in
// docs/design/dynamodb.md.
func Keys(tenant, session, server, tool string, now time.Time) (sessionKey, toolKey string) {
	w := strconv.FormatInt(now.UTC().Truncate(Window).Unix(), 10)
	if server != "" {
		tool = server + "/" + tool
	}
	return "rl#s#" + tenant + "#" + session + "#" + w, "rl#t#" + tenant + "#" + session + "#" + w + "#" + tool
}

// Check implements pipeline.Check. Both windows are counted with concurrent
// requests (one round trip). A call refused by one window may still have
// been counted in the other: every admitted-or-not attempt within a window
// counts once at most per window, never more.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	if c.Method != "tools/call" || (k.perSession <= 0 && k.perTool <= 0) {
		return nil
	}
	now := k.now()
	start := now.UTC().Truncate(Window)
	end := start.Add(Window)
	sKey, tKey := Keys(c.Tenant.ID, c.SessionID, c.RequestedServer, c.Tool, now)

	type result struct {
		ok  bool
		err error
	}
	var sRes, tRes result
	sRes.ok, tRes.ok = true, true
	var wg sync.WaitGroup
	if k.perSession > 0 && k.perTool > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, tRes.ok, tRes.err = k.counter.Incr(ctx, tKey, k.perTool, end)
		}()
		_, sRes.ok, sRes.err = k.counter.Incr(ctx, sKey, k.perSession, end)
		wg.Wait()
	} else if k.perSession > 0 {
		_, sRes.ok, sRes.err = k.counter.Incr(ctx, sKey, k.perSession, end)
	} else {
		_, tRes.ok, tRes.err = k.counter.Incr(ctx, tKey, k.perTool, end)
	}

	retry := end.Sub(now).Milliseconds()
	if retry < 1 {
		retry = 1
	}
	for _, r := range []struct {
		scope string
		limit int64
		res   result
	}{{ScopeSession, k.perSession, sRes}, {ScopeTool, k.perTool, tRes}} {
		if r.res.err != nil {
			// Fail open (seed 004): the limiter's store is unreachable.
			k.log.WarnContext(ctx, "rate limiter unavailable; call let through",
				"scope", r.scope, "tenant", c.Tenant.ID, "correlation_id", c.CorrelationID, "err", r.res.err)
			continue
		}
		if !r.res.ok {
			return refusal.RateLimit(r.scope, int(r.limit), retry)
		}
	}
	return nil
}

var _ pipeline.Check = (*Check)(nil)
