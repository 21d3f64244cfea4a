// Package pipeline is the gateway's order of checks as data: a one-method
// Check interface and one ordered list (Order). A call passes every check in
// order or is refused by the first that objects. Adding a check means adding
// a type in its own package and naming its slot here.
package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
)

// Order is the fixed order of checks of seed 004 and design §2.2, by slot
// name. Authentication and body reading happen before the pipeline (HTTP
// layer); the upstream call, result scanning and the audit record after it.
// docs/pipeline.md describes each slot; a test pins this list.
var Order = []string{
	"session",    // -32603 session error; mint a session when none was sent
	"ratelimit",  // -32004 per session and per tool; store unreachable → allow
	"quota",      // -32060 monthly tier quota; meter unreachable → under quota
	"route",      // -32601 a tool this tenant does not have
	"killswitch", // -32062 whatever the policy says
	"policy",     // -32003 RBAC/policy, -32005 session grant and budgets
	"content",    // -32602 input validation, -32050/-32051 threats, -32053 egress
	"approval",   // -32061 held for a human
	"breaker",    // -32063 circuit open or too many in flight
}

// Call is one request moving through the pipeline. Checks read it and fill
// in what later checks and the forwarder need.
type Call struct {
	Tenant        registry.Tenant
	Caller        string // who is calling: the API key's caller name
	KeyID         string
	CorrelationID string
	Method        string          // "tools/call", "tools/list", ...
	ID            json.RawMessage // JSON-RPC id, exact bytes
	Params        json.RawMessage // exact bytes as sent
	Start         time.Time

	// Session: the id the client sent ("" = mint one), and the record once
	// the session check has run.
	SessionID  string
	NewSession bool
	Session    session.Record

	// Routing: what the client asked for, then what it resolved to.
	Tool            string // tool name as the client sent it
	RequestedServer string // from /mcp/{server} or params.server ("" = any)
	Server          *registry.Server
	UpstreamTool    string          // the tool's name on its server
	ToolDef         json.RawMessage // the tool's definition as its server lists it
	Settings        registry.ToolSettings

	IdempotencyKey string
	PolicyHash     string // hash of the policy set in force (audit)

	// Inline: every store is in this process (the embedded store), so
	// checks run their store work at once instead of on goroutines (see
	// Async).
	Inline bool

	done []func(Outcome)
}

// Outcome is how a call ended, as the audit trail names it.
type Outcome string

// The four audit outcomes.
const (
	Allowed       Outcome = "allowed"
	Refused       Outcome = "refused"
	Failed        Outcome = "error"
	Indeterminate Outcome = "indeterminate"
)

// Async runs fn, a check's store work: on its own goroutine, so that the
// store round trips of several checks overlap, or at once when c.Inline
// (an in-process store, where a goroutine costs more than the work). The
// returned wait blocks until fn has run.
func (c *Call) Async(fn func()) (wait func()) {
	if c.Inline {
		fn()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	return func() { <-done }
}

// OnDone registers fn to run once the call has ended (after the upstream
// answer or a later refusal), e.g. to release a lease or record a breaker
// result. Functions run in reverse order of registration.
func (c *Call) OnDone(fn func(Outcome)) { c.done = append(c.done, fn) }

// Finish runs the OnDone functions with the call's outcome. It is called
// exactly once by the gateway.
func (c *Call) Finish(o Outcome) {
	for i := len(c.done) - 1; i >= 0; i-- {
		c.done[i](o)
	}
	c.done = nil
}

// Check is one step of the pipeline. Check returns nil to let the call on,
// a *refusal.Refusal to refuse it, or another error for an internal failure
// (the client then gets -32603 with the correlation id only).
type Check interface {
	Slot() string
	Check(ctx context.Context, c *Call) error
}

// Pipeline is an ordered list of checks.
type Pipeline struct {
	checks []Check
	hook   Hook
}

// Hook observes the checks as they run (shared/telemetry traces them with
// it). Before is called before each check and returns the context the check
// runs with; After is called with that context and the check's result. A
// hook changes nothing about the order or the result of a run; a pipeline
// without one pays a nil test per check.
type Hook interface {
	Before(ctx context.Context, slot string, c *Call) context.Context
	After(ctx context.Context, slot string, c *Call, err error)
}

// SetHook installs h (nil removes it). Call it before the pipeline serves
// its first call: it is not safe to call concurrently with Run.
func (p *Pipeline) SetHook(h Hook) { p.hook = h }

// hooked runs one check through the hook: its Check, or decide when the
// check was prefetched (the hook then sees the wait for its result).
func (p *Pipeline) hooked(ctx context.Context, ch Check, c *Call, decide func() error) error {
	slot := ch.Slot()
	cctx := p.hook.Before(ctx, slot, c)
	var err error
	if decide != nil {
		err = decide()
	} else {
		err = ch.Check(cctx, c)
	}
	p.hook.After(cctx, slot, c, err)
	return err
}

// New builds a pipeline. Checks must come in the order of Order, each slot
// at most once; a slot may be empty until its check exists.
func New(checks ...Check) (*Pipeline, error) {
	next := 0
	for _, c := range checks {
		i := indexOf(c.Slot())
		if i < 0 {
			return nil, fmt.Errorf("pipeline: unknown slot %q", c.Slot())
		}
		if i < next {
			return nil, fmt.Errorf("pipeline: check %q is out of order (order is %v)", c.Slot(), Order)
		}
		next = i + 1
	}
	return &Pipeline{checks: checks}, nil
}

func indexOf(slot string) int {
	for i, s := range Order {
		if s == slot {
			return i
		}
	}
	return -1
}

// Slots lists the slots of p's checks, in order.
func (p *Pipeline) Slots() []string {
	out := make([]string, len(p.checks))
	for i, c := range p.checks {
		out[i] = c.Slot()
	}
	return out
}

// Resolver is a Prefetcher whose Prefetch decides at once, without store
// I/O in steady state, and fills in fields the other checks' store work is
// keyed by: routing, whose resolved server and tool key the per-tool rate
// window, so that one tool cannot be counted under several names. Run starts
// resolvers before the other prefetchers; verdicts still come in Order.
type Resolver interface {
	Prefetcher
	Resolves()
}

// Prefetcher is a check whose store work can start before the checks ahead
// of it have decided, so that independent store round trips overlap
// (session touch, rate windows, quota meter: one wave instead of three).
// The decision order is unchanged: Run still asks each check in Order and
// reports the first refusal. Check must behave as Prefetch followed by
// decide.
type Prefetcher interface {
	Check
	// Prefetch starts the check's work for c. decide waits for it and
	// returns what Check would. undo takes back its effects (a counted
	// unit); Run calls it when decide allowed the call but an earlier
	// check refused it. Prefetch may set fields of c that later
	// Prefetches read (the session id); decide may set any field.
	Prefetch(ctx context.Context, c *Call) (decide func() error, undo func())
}

// Run passes c through every check until one refuses or fails. For
// tools/call, the Prefetchers start together first.
func (p *Pipeline) Run(ctx context.Context, c *Call) error {
	type started struct {
		decide func() error
		undo   func()
	}
	var pre []started
	if c.Method == "tools/call" {
		// Resolvers first: what they fill in (the routed server and tool)
		// keys the others' store work.
		for _, first := range []bool{true, false} {
			for i, ch := range p.checks {
				pf, ok := ch.(Prefetcher)
				if !ok {
					continue
				}
				if _, r := ch.(Resolver); r != first {
					continue
				}
				if pre == nil {
					pre = make([]started, len(p.checks))
				}
				pre[i].decide, pre[i].undo = pf.Prefetch(ctx, c)
			}
		}
	}
	for i, ch := range p.checks {
		var err error
		switch {
		case p.hook != nil:
			var decide func() error
			if pre != nil {
				decide = pre[i].decide
			}
			err = p.hooked(ctx, ch, c, decide)
		case pre != nil && pre[i].decide != nil:
			err = pre[i].decide()
		default:
			err = ch.Check(ctx, c)
		}
		if err != nil {
			for j := i + 1; pre != nil && j < len(pre); j++ {
				if pre[j].decide != nil && pre[j].decide() == nil && pre[j].undo != nil {
					pre[j].undo()
				}
			}
			return err
		}
	}
	return nil
}

// RunUntil runs the checks that come before slot (exclusive). tools/list
// runs the checks up to routing, then filters its answer with Visible.
func (p *Pipeline) RunUntil(ctx context.Context, c *Call, slot string) error {
	stop := indexOf(slot)
	for _, ch := range p.checks {
		if indexOf(ch.Slot()) >= stop {
			return nil
		}
		var err error
		if p.hook == nil {
			err = ch.Check(ctx, c)
		} else {
			err = p.hooked(ctx, ch, c, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Filter is implemented by checks whose decision also hides tools from
// tools/list (kill switch, policy): the list and the call use the same
// decision code.
type Filter interface {
	Visible(ctx context.Context, c *Call, server *registry.Server, tool string) bool
}

// Visible reports whether every filtering check lets tool on server show.
func (p *Pipeline) Visible(ctx context.Context, c *Call, server *registry.Server, tool string) bool {
	for _, ch := range p.checks {
		if f, ok := ch.(Filter); ok && !f.Visible(ctx, c, server, tool) {
			return false
		}
	}
	return true
}
