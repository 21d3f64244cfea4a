package gateway

import (
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/params"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/policycheck"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/route"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
)

// stage is one row of the stage table: the slot, the requests it applies
// to, what it does when its check cannot decide, and how its check is
// built from the gateway's parts (nil: off in this deployment).
type stage struct {
	slot  pipeline.Slot
	scope pipeline.Scope
	mode  pipeline.Mode
	// storeFree: decided before anything is counted (pipeline.Stage.StoreFree;
	// docs/design/cost.md, decision 9): its verdict needs no store on a
	// warm instance and no field a counting stage sets. The stages ahead
	// of the last such stage that are not are pipeline.Peekers.
	storeFree bool
	// foresees: not store-free, but its check can say before any store
	// work that it refuses a call whatever the store holds
	// (pipeline.Stage.Foresees, a pipeline.Foreseer; decision 11).
	foresees    bool
	check       func(g *Gateway) pipeline.Check
	result      func(g *Gateway) pipeline.ResultCheck
	message     func(g *Gateway) pipeline.MessageCheck
	unavailable func(c *pipeline.Call) error // a closed stage's answer; nil: -32603
}

// stages is the order of checks: one row per slot of pipeline.Order and
// pipeline.ResultOrder, in that order (pipeline.New refuses anything else).
// docs/pipeline.md is this table in prose; TestStageTableMatchesDocs keeps
// them in step. Adding a check is a package and a row here.
var stages = [...]stage{
	{slot: pipeline.Session, scope: pipeline.Every, mode: pipeline.FailOpen, check: func(g *Gateway) pipeline.Check {
		s := g.o.Settings
		// The session's own rate windows are counted with its touch, in
		// its record, when the rate-limit stage is on (docs/design/cost.md).
		w := sessioncheck.Windows{PerSession: max(s.RateLimitPerSession, 0), PerTool: max(s.RateLimitPerTool, 0), Scope: rateLimitScope}
		return sessioncheck.New(g.b, session.NewLimits(s.SessionLifetime, s.SessionIdle), w, g.o.Now, g.o.Logger)
	}},
	{slot: pipeline.Params, storeFree: true, scope: pipeline.ToolCall, mode: pipeline.FailClosed, check: func(*Gateway) pipeline.Check {
		return params.Check{}
	}},
	{slot: pipeline.RateLimit, scope: rateLimitScope, mode: pipeline.FailOpen, check: func(g *Gateway) pipeline.Check {
		s := g.o.Settings
		o := ratelimit.Options{PerSession: s.RateLimitPerSession, PerTool: s.RateLimitPerTool, PerKey: s.RateLimitPerKey}
		if o.PerSession <= 0 && o.PerTool <= 0 && o.PerKey <= 0 {
			return nil
		}
		return ratelimit.New(g.b, o, g.o.Now, g.o.Logger)
	}},
	{slot: pipeline.Quota, scope: pipeline.Decided, mode: pipeline.FailOpen, check: func(g *Gateway) pipeline.Check {
		s := g.o.Settings
		if !s.BillingEnabled {
			return nil
		}
		return quota.New(g.b, quota.Options{Enabled: true, Enforce: s.BillingEnforce, Tiers: g.o.Tiers}, g.o.Now, g.o.Logger)
	}},
	{slot: pipeline.Route, storeFree: true, scope: pipeline.Every, mode: pipeline.FailClosed, check: func(g *Gateway) pipeline.Check {
		return route.NewCheckAll(g.cats)
	}},
	{slot: pipeline.KillSwitch, storeFree: true, scope: pipeline.ServerBound, mode: pipeline.FailClosed, check: func(g *Gateway) pipeline.Check {
		return g.stops
	}},
	// Not store-free: a verdict can read the session's record (its own
	// manifest; its counters, for the bounds and Cedar), which the
	// session stage reads, and a tools/call under max_tool_calls is
	// reserved in it. A Peeker, asked when a later stage refuses first,
	// and a Foreseer: a role or Cedar refusal that reads no session is
	// taken before anything is counted (docs/design/cost.md, decision 11).
	{slot: pipeline.Policy, foresees: true, scope: pipeline.ServerBound, mode: pipeline.FailClosed, check: func(g *Gateway) pipeline.Check {
		return policycheck.New(g.b, g.reg, g.b, &policycheck.Options{Refresh: g.o.Settings.PolicyRefresh, Now: g.o.Now, Logger: g.o.Logger})
	}},
	{slot: pipeline.Content, storeFree: true, scope: pipeline.ServerBound, mode: pipeline.FailClosed, check: func(g *Gateway) pipeline.Check {
		return g.content.check
	}},
	{slot: pipeline.Approval, scope: pipeline.ToolCall, mode: pipeline.FailClosed, unavailable: approval.Unavailable, check: func(g *Gateway) pipeline.Check {
		s := g.o.Settings
		// The lease outlasts the longest a call can take, never shorter
		// than the default.
		lease := max(approval.DefaultLease, s.CallBudget())
		return approval.New(g.b, approval.Options{TTL: s.ApprovalTTL, Lease: lease, Now: g.o.Now, Logger: g.o.Logger, Audit: g.b, Notifier: g.o.Notifier, ParamsKey: g.key})
	}},
	{slot: pipeline.Breaker, scope: pipeline.Decided, mode: pipeline.FailOpen, check: func(g *Gateway) pipeline.Check {
		s := g.o.Settings
		brk := breaker.New(breaker.Options{
			Store: g.b, Threshold: s.CircuitFailureThreshold, Cooldown: s.CircuitCooldown,
			MaxConcurrent: s.UpstreamMaxConcurrent, UpstreamTimeout: s.UpstreamTimeout, Now: g.o.Now, Logger: g.o.Logger,
		})
		g.up.Observe = brk.Observe
		return brk
	}},
	{slot: pipeline.Results, scope: pipeline.Decided | pipeline.Subscription | pipeline.Control, mode: pipeline.FailClosed, result: func(g *Gateway) pipeline.ResultCheck {
		return g.content.results
	}},
	// The server-to-client messages other than answers: notifications and
	// requests of a server, each run as a relayed call (serverMessage):
	// THREAT_MODE and PII_ACTION over the whole message
	// (docs/design/ingress.md).
	{slot: pipeline.Ingress, scope: pipeline.Relayed, mode: pipeline.FailClosed, message: func(g *Gateway) pipeline.MessageCheck {
		return g.content.results
	}},
}

// rateLimitScope is the rate-limit stage's scope, and so the calls the
// session stage counts in their session's own windows (sessioncheck.Windows).
const rateLimitScope = pipeline.Decided | pipeline.Relayed | pipeline.Answered

// buildPipeline loops over the stage table.
func (g *Gateway) buildPipeline() (*pipeline.Pipeline, error) {
	out := make([]pipeline.Stage, len(stages))
	for i, row := range stages {
		st := pipeline.Stage{Slot: row.slot, Scope: row.scope, Mode: row.mode, Unavailable: row.unavailable, StoreFree: row.storeFree, Foresees: row.foresees}
		if row.check != nil {
			st.Check = row.check(g)
		}
		if row.result != nil {
			st.Result = row.result(g)
		}
		if row.message != nil {
			st.Message = row.message(g)
		}
		out[i] = st
	}
	o := &pipeline.Options{Logger: g.o.Logger}
	if g.o.Tracer != nil {
		o.Hook = g.o.Tracer
	}
	return pipeline.New(out, o)
}
