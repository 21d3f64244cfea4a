// Package quota is the pipeline's "quota" check (-32060): a monthly count of
// a tenant's tools/call requests against its tier's limit, in UTC calendar
// months, counted in a shared Meter so that every instance sees one count.
//
// With billing off the check does nothing. With billing on and enforcement
// off (BILLING_ENFORCE=0) every call is counted and overage is logged, never
// refused. With enforcement on, the call that would go past the limit is
// refused with data exactly {tier, limit, used, period}. A meter that cannot
// be reached, a tenant whose tier has no known limit, or tiers that were never
// loaded all count as under quota (seed 004).
package quota

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Meter counts usage; it has the same contract as ratelimit.Counter.
type Meter interface {
	Incr(ctx context.Context, key string, limit int64, expires time.Time) (n int64, ok bool, err error)
	Decr(ctx context.Context, key string) error
	Value(ctx context.Context, key string) (int64, error)
}

// Tiers maps a tier name to its monthly limit of tools/call requests.
// A limit of 0 means unlimited. A nil Tiers means "never loaded".
type Tiers map[string]int64

// Default monthly limits (docs/state.md).
const (
	DefaultFree       = 1_000
	DefaultGrowth     = 100_000
	DefaultEnterprise = 1_000_000
)

// DefaultTiers returns the default limits of the three tiers.
func DefaultTiers() Tiers {
	return Tiers{
		registry.TierFree:       DefaultFree,
		registry.TierGrowth:     DefaultGrowth,
		registry.TierEnterprise: DefaultEnterprise,
	}
}

// TiersFromEnv reads QUOTA_FREE, QUOTA_GROWTH and QUOTA_ENTERPRISE (whole
// numbers >= 0; 0 = unlimited) over the defaults. Errors name the variable.
func TiersFromEnv(getenv func(string) string) (Tiers, error) {
	t := DefaultTiers()
	for name, tier := range map[string]string{
		"QUOTA_FREE": registry.TierFree, "QUOTA_GROWTH": registry.TierGrowth, "QUOTA_ENTERPRISE": registry.TierEnterprise,
	} {
		if v := getenv(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s=%q: want a whole number of calls per month >= 0 (0 = unlimited)", name, v)
			}
			t[tier] = n
		}
	}
	return t, nil
}

// Options are the billing settings.
type Options struct {
	Enabled bool  // BILLING_ENABLED
	Enforce bool  // BILLING_ENFORCE
	Tiers   Tiers // nil: never loaded → every call is under quota
}

// Retention is how long a month's counter is kept after the month ends
// (billing history); it is the counter's TTL, not part of any decision.
const Retention = 400 * 24 * time.Hour

// Check is the quota check. It is safe for concurrent use.
type Check struct {
	meter Meter
	opt   Options
	now   func() time.Time
	log   *slog.Logger
}

// New returns the check; now and log default to time.Now and slog.Default.
func New(m Meter, opt Options, now func() time.Time, log *slog.Logger) *Check {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Check{meter: m, opt: opt, now: now, log: log}
}

// Period is the UTC month of t as YYYYMM, and the instant the month ends.
func Period(t time.Time) (string, time.Time) {
	u := t.UTC()
	start := time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
	return u.Format("200601"), start.AddDate(0, 1, 0)
}

// Key is the meter key of tenant's usage in period.
func Key(tenant, period string) string { return "q#" + tenant + "#" + period }

// Check implements pipeline.Check.
func (q *Check) Check(ctx context.Context, c *pipeline.Call) error {
	decide, _ := q.Prefetch(ctx, c)
	return decide()
}

// Prefetch implements pipeline.Prefetcher: the meter is counted while the
// checks ahead of it decide; undo gives the unit back when any stage
// refuses the call. At the limit's edge a call that is then refused may
// hold the last unit for one round trip.
func (q *Check) Prefetch(ctx context.Context, c *pipeline.Call) (func() error, func()) {
	return q.prefetch(ctx, c, true)
}

// Peek implements pipeline.Peeker: whether the call would be refused, from
// one consistent read of the meter (Meter.Value), counting nothing. Only
// an enforced limit refuses; with enforcement off nothing is read.
func (q *Check) Peek(ctx context.Context, c *pipeline.Call) func() error {
	decide, _ := q.prefetch(ctx, c, false)
	return decide
}

// prefetch is Prefetch; count false: Peek.
func (q *Check) prefetch(ctx context.Context, c *pipeline.Call, count bool) (func() error, func()) {
	if !q.opt.Enabled || (!count && !q.opt.Enforce) {
		return func() error { return nil }, nil
	}
	period, end := Period(q.now())
	tier := c.Tenant.Tier
	limit, known := q.opt.Tiers[tier]
	enforce := q.opt.Enforce && known && limit > 0
	lim := int64(0)
	if enforce {
		lim = limit
	}
	// What the closures share, in one allocation.
	p := &struct {
		key    string
		n      int64
		ok     bool
		err    error
		undone sync.Once
	}{key: Key(c.Tenant.ID, period)}
	wait := c.Async(func() {
		if count {
			p.n, p.ok, p.err = q.meter.Incr(ctx, p.key, lim, end.Add(Retention))
			return
		}
		p.n, p.err = q.meter.Value(ctx, p.key)
		p.ok = lim <= 0 || p.n < lim
	})
	decide := func() error {
		wait()
		if p.err != nil {
			return p.err // the stage fails open: counted as under quota (seed 004)
		}
		if !p.ok {
			return refusal.Quota(tier, limit, p.n, period)
		}
		if count && known && limit > 0 && p.n > limit {
			q.log.InfoContext(ctx, "quota overage recorded (BILLING_ENFORCE=0)",
				"tenant", c.Tenant.ID, "tier", tier, "limit", limit, "used", p.n, "period", period)
		}
		return nil
	}
	if !count {
		return decide, nil
	}
	undo := func() {
		p.undone.Do(func() {
			wait()
			if p.err == nil && p.ok {
				if derr := q.meter.Decr(context.WithoutCancel(ctx), p.key); derr != nil {
					q.log.WarnContext(ctx, "quota unit not given back", "tenant", c.Tenant.ID, "err", derr)
				}
			}
		})
	}
	return decide, undo
}

var (
	_ pipeline.Prefetcher = (*Check)(nil)
	_ pipeline.Peeker     = (*Check)(nil)
)
