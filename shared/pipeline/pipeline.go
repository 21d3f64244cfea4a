// Package pipeline is the gateway's order of checks as data: slots of their
// own type (slot.go), one Stage per slot with its check and its declared
// failure mode, and a runner that asks each stage in order, applies the
// failure mode in one place, and takes back what checks counted for a call
// that is refused. The gateway's stage table (shared/gateway/stages.go)
// builds the stages; adding a check is a package and one row there.
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
)

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
	// Listed is what a read or subscription names, as its server lists
	// it (set by routing; zero when its server does not list it and it
	// is sent as named). While Visible is asked about an entry of
	// prompts/list, resources/list or resources/templates/list, it is
	// that entry, and ToolDef is nil. The content check judges it for
	// poisoning and pins as it judges ToolDef.
	Listed   Listed
	Settings registry.ToolSettings
	// Target is what a request other than tools/call names on its server,
	// as that server knows it: a prompt's name or a resource's URI
	// (resources/read, prompts/get, completion/complete,
	// resources/subscribe and unsubscribe). For those requests Tool and
	// UpstreamTool carry it with its kind ("prompt:NAME",
	// "resource:URI"; route.Named), so that rate windows, kill switches
	// and the audit trail never take it for a tool of the same name.
	Target string

	// SessionWindows is set by the session check when it counted the
	// call's session and tool rate windows in its session's record, with
	// its touch, in one write (session.Admitter; docs/design/cost.md,
	// decision 4): the rate-limit check then decides those windows from
	// it and counts only the others. Its Admission and Err are written by
	// the session check's store work and read once the session stage has
	// decided. nil: the rate-limit check counts every window itself.
	SessionWindows *session.AdmitResult

	IdempotencyKey string
	PolicyHash     string // hash of the policy set in force (audit)

	// Roles are the roles the caller's credential carries
	// (registry.Key.Roles, or an OAuth token's roles and scopes), and
	// KeyManifest its key's manifest (nil: none), both set by
	// authentication from what it verified. Nil Roles: not known; the
	// policy stage then reads both from the key record and sets Roles
	// (non-nil, empty for none).
	Roles       []string
	KeyManifest *policy.Manifest
	// Claims is the caller's OAuth token's payload (a JSON object) when
	// it came with one (shared/oauth), for the policy; nil with an API
	// key.
	Claims json.RawMessage
	// What the policy stage decided (shared/policycheck). PolicyApproval:
	// the policy requires a human's approval, and the approval stage holds
	// the call as it does a tool with requires_approval. PolicyVerdict is
	// "allow", "approve" or "deny" ("" when no policy decided) and
	// PolicyRule the rule that decided; PolicyAudit marks them as the
	// intended verdict of a tenant in audit mode, not enforced. The rule
	// is for the audit record only, never shown to the client.
	PolicyApproval bool
	PolicyVerdict  string
	PolicyRule     string
	PolicyAudit    bool

	// Settles: the caller finishes the call (Finish) whatever its
	// outcome, before it answers. Run then leaves a refused call's
	// give-backs to Finish, which the caller overlaps with its other
	// settling writes (the audit record): one round trip for both, and
	// still nothing held when the answer is written. False: Run gives
	// back before it returns.
	Settles bool

	// Inline: every store is in this process (the embedded store), so
	// checks run their store work at once instead of on goroutines (see
	// Async).
	Inline bool

	// MCP: the request came over MCP Streamable HTTP (/mcp, /mcp/{server}),
	// where a session must have been opened by initialize.
	MCP bool
	// Stateless: an MCP 2026-07-28 request (SEP-2575), which belongs to no
	// session: the session stage neither mints nor touches one, and
	// SessionID stays empty (rate windows are the API key's).
	// Session.Capabilities holds the capabilities the request's _meta
	// announces.
	Stateless bool
	// Relayed: a message the gateway relays between a server and the
	// client the other way round (a request of the server to the client,
	// or the client's answer): it runs under the Relayed scope, with
	// Server the server that asked, and Tool and UpstreamTool naming what
	// it is ("client:elicitation/create", "client:response").
	Relayed bool

	// RefusedBy is the stage that refused the call (set by Run, RunUntil
	// and RunResults with the refusal they return; 0 while none has):
	// the audit record's slot.
	RefusedBy Slot

	// Degraded lists the fail-open stages that could not decide and let
	// the call through (audit: degraded).
	Degraded []Slot

	// Findings are what the content checks found in the arguments and in
	// the answer, and what they did (audit: findings, findings_cut).
	Findings    []audit.Finding
	FindingsCut int

	done      []func(audit.Outcome)
	doneAsync []func(audit.Outcome)
	// Room for the usual few of each, so that registering them does not
	// grow the slices (an allocation each time).
	doneRoom, asyncRoom [4]func(audit.Outcome)
}

// Listed is one entry of a server's prompts/list, resources/list or
// resources/templates/list.
type Listed struct {
	Kind string          // registry.PinPrompt, PinResource or PinTemplate
	Name string          // its name there: a prompt's name, a resource's uri, a template's uriTemplate
	Def  json.RawMessage // the entry as its server lists it
}

// Found records a content check's finding on the call, once per distinct
// finding and at most audit.MaxFindings.
func (c *Call) Found(f audit.Finding) {
	var cut bool
	if c.Findings, cut = audit.AddFinding(c.Findings, f); cut {
		c.FindingsCut++
	}
}

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

// SettleContext is parent without its cancellation, for the store writes
// that settle a call once it has been answered, with deadline d: none
// when c.Inline (an in-process store waits on no network: no deadline and
// no timer per call; cancel is then a no-op).
func (c *Call) SettleContext(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(parent)
	if c.Inline {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// OnDone registers fn to run once the call has ended (after the upstream
// answer or a later refusal), e.g. to release a lease or record a breaker
// result. Functions run in reverse order of registration.
func (c *Call) OnDone(fn func(audit.Outcome)) {
	if c.done == nil {
		c.done = c.doneRoom[:0]
	}
	c.done = append(c.done, fn)
}

// OnDoneAsync registers fn like OnDone, for work independent of every
// other's (a store write of its own): Finish runs it alongside the OnDone
// functions (on its own goroutine unless c.Inline) and returns once it has
// run.
func (c *Call) OnDoneAsync(fn func(audit.Outcome)) {
	if c.doneAsync == nil {
		c.doneAsync = c.asyncRoom[:0]
	}
	c.doneAsync = append(c.doneAsync, fn)
}

// Finish runs the OnDone and OnDoneAsync functions with the call's
// outcome. It is called exactly once by the gateway.
func (c *Call) Finish(o audit.Outcome) {
	var room [4]func()
	waits := room[:0]
	for _, fn := range c.doneAsync {
		waits = append(waits, c.Async(func() { fn(o) }))
	}
	for i := len(c.done) - 1; i >= 0; i-- {
		c.done[i](o)
	}
	for _, w := range waits {
		w()
	}
	c.done, c.doneAsync = nil, nil
}

// Check is one stage's check. Check returns nil to let the call on, a
// *refusal.Refusal to refuse it, or another error when it could not decide
// (its store unreachable, say): the runner then applies the stage's Mode.
// A check is scoped by its stage; it need not test the method itself.
type Check interface {
	Check(ctx context.Context, c *Call) error
}

// Prefetcher is a check whose store work can start before the checks ahead
// of it have decided, so that independent store round trips overlap
// (session touch, rate windows, quota meter, circuit read: one wave). The
// decision order is unchanged: the runner still takes each verdict in
// Order and reports the first refusal. Check must behave as Prefetch
// followed by decide. A check that takes something scarce for the call (a
// concurrency lease) must take it in decide, not in Prefetch: a call that
// an earlier check refuses would hold it meanwhile.
type Prefetcher interface {
	Check
	// Prefetch starts the check's work for c. decide waits for it and
	// returns what Check would. undo takes back every effect of the work
	// (a counted unit, a lease): the runner calls it, whether or not decide
	// ran, when the call is refused by any stage, this one included, before
	// the refusal is answered; and, for a call every stage allowed, when it
	// is finished as refused (Call.Finish with audit.OutcomeRefused: the
	// gateway refused it before sending it). undo may be nil; it must be
	// safe to call once after decide or instead of it. Prefetch may set
	// fields of c that later Prefetches read (the session id); decide may
	// set any field.
	Prefetch(ctx context.Context, c *Call) (decide func() error, undo func())
}

// Resolver is a Prefetcher whose Prefetch decides at once, without store
// I/O in steady state, and fills in fields the other checks' store work is
// keyed by (the params' tool name; the routed server and tool). The runner
// starts resolvers, in order, before the other prefetchers.
type Resolver interface {
	Prefetcher
	Resolves()
}

// Peeker is a check that counts for a call (its Prefetch writes: a rate
// window, the quota meter, a session's touch) and can also say, writing
// nothing, whether it would refuse the call: Peek starts the reads its
// verdict needs (consistent reads of what Prefetch would count in) and
// returns decide, which waits for them and returns what Prefetch's
// decide would have returned had the call been counted (nil, a refusal,
// or an error when it could not decide: the stage's Mode applies as
// ever). It leaves nothing to give back. Peek may set fields of c that
// later Peeks read, as Prefetch does. The runner peeks at the stages
// ahead of a store-free stage that refused (Stage.StoreFree): every
// stage that is neither store-free nor after the last store-free one
// must be a Peeker (New checks it).
type Peeker interface {
	Check
	Peek(ctx context.Context, c *Call) (decide func() error)
}

// Foreseer is a check that counts for a call (a Peeker) and can at times
// say, before any store work and writing nothing, that it will refuse the
// call whatever its store holds: Foresees decides from the request, the
// fields the resolvers set and what the process holds (a cached set),
// and reports true only when a refusal is certain (false: it cannot
// say). The runner then takes the call as refused by this stage, as it
// does a store-free stage's refusal, but the answer is the stage's own
// Peek (the exact code, from the reads of the stages ahead of it), and
// when that Peek lets the call on after all the run goes on as if
// Foresees had said false. A stage with one is marked Stage.Foresees
// (docs/design/cost.md, decision 11).
type Foreseer interface {
	Peeker
	Foresees(ctx context.Context, c *Call) bool
}

// Filter is implemented by checks whose decision also hides tools from
// tools/list (kill switch, policy): the list and the call use the same
// decision code. While Visible is asked about a tool, c.ToolDef is that
// tool's definition as its server lists it.
type Filter interface {
	Visible(ctx context.Context, c *Call, server *registry.Server, tool string) bool
}

// ResultCheck is a response-side check: it reads (and may rewrite) the
// upstream's answer to c. It returns nil, a *refusal.Refusal, or another
// error when it could not decide (the stage's Mode applies).
type ResultCheck interface {
	CheckResult(ctx context.Context, c *Call, resp *jsonrpc.Response) error
}

// MessageCheck is a server-to-client check over a message a server sends
// the client other than its answer (a notification, a request): it reads,
// and may rewrite, *msg, the whole JSON-RPC message, or refuses it (a
// *refusal.Refusal), or returns another error when it could not decide
// (the stage's Mode applies). c is the call the message came during (or
// the stream's), with Server the server that sent it.
type MessageCheck interface {
	CheckMessage(ctx context.Context, c *Call, msg *json.RawMessage) error
}

// Stage is one row of the order: its slot, its check (nil: the stage is
// off in this deployment), which requests it applies to, and what happens
// when the check cannot decide.
type Stage struct {
	Slot  Slot
	Scope Scope
	Mode  Mode
	// Check is set for request-side slots, Result or Message for
	// response-side ones.
	Check   Check
	Result  ResultCheck
	Message MessageCheck
	// Unavailable is the answer of a FailClosed stage that could not
	// decide; nil: -32603 with the correlation id.
	Unavailable func(c *Call) error
	// StoreFree: on a warm instance the check decides from the request
	// and what the process holds (cached tenant state), writes nothing
	// the call counts, and reads no field a stage that counts sets
	// (Session, SessionWindows). For a decided request (tools/call, a
	// read) the runner decides the store-free stages first, in order,
	// before any counting stage starts its store work: a call one of
	// them refuses counts nothing (docs/design/cost.md, decision 9).
	StoreFree bool
	// Foresees: the check is a Foreseer, asked among the store-free
	// stages, in order, whether it refuses the call whatever the store
	// holds (New checks that it is one).
	Foresees bool
}

// Pipeline is the ordered stages that are on. It is safe for concurrent
// use once built.
type Pipeline struct {
	stages  []Stage    // request side, in Order
	peekers []Peeker   // by index in stages: the stages peeked at when a later store-free one refuses
	seers   []Foreseer // by index in stages: the stages marked Foresees
	results []Stage    // response side, in ResultOrder
	log     *slog.Logger
	hook    Hook
}

// Hook observes the checks as they run (shared/telemetry traces them with
// it). Before is called before each check and returns the context the check
// runs with; After is called with that context and the check's result. A
// hook changes nothing about the order or the result of a run; a pipeline
// without one pays a nil test per check.
type Hook interface {
	Before(ctx context.Context, slot Slot, c *Call) context.Context
	After(ctx context.Context, slot Slot, c *Call, err error)
}

// Options configure New.
type Options struct {
	Logger *slog.Logger // nil: slog.Default()
	Hook   Hook         // nil: none
}

// New builds a pipeline from stages, which must name every slot of Order
// and ResultOrder exactly once, in that order; a stage whose check is nil
// is off. A slot that is not a constant, a missing, repeated or misplaced
// slot, or a check on the wrong side is an error: nothing is left to run
// silently.
func New(stages []Stage, o *Options) (*Pipeline, error) {
	p := &Pipeline{log: slog.Default()}
	if o != nil {
		if o.Logger != nil {
			p.log = o.Logger
		}
		p.hook = o.Hook
	}
	want := append(append([]Slot{}, Order[:]...), ResultOrder[:]...)
	if len(stages) != len(want) {
		return nil, fmt.Errorf("pipeline: %d stages, want one per slot (%v)", len(stages), want)
	}
	for i, st := range stages {
		if !st.Slot.Valid() {
			return nil, fmt.Errorf("pipeline: stage %d: unknown slot %v", i, st.Slot)
		}
		if st.Slot != want[i] {
			return nil, fmt.Errorf("pipeline: stage %d is %v, want %v (order is %v)", i, st.Slot, want[i], want)
		}
		if st.Scope == 0 {
			return nil, fmt.Errorf("pipeline: stage %v applies to no request (Scope 0)", st.Slot)
		}
		if st.Slot.Response() {
			if st.Check != nil {
				return nil, fmt.Errorf("pipeline: response stage %v has a request check", st.Slot)
			}
			if st.Result != nil && st.Message != nil {
				return nil, fmt.Errorf("pipeline: response stage %v has both a result and a message check", st.Slot)
			}
			if st.Result != nil || st.Message != nil {
				p.results = append(p.results, st)
			}
			continue
		}
		if st.Result != nil || st.Message != nil {
			return nil, fmt.Errorf("pipeline: request stage %v has a result check", st.Slot)
		}
		if st.Check != nil {
			p.stages = append(p.stages, st)
		}
	}
	return p, p.findPeekers()
}

// findPeekers sets p.peekers and p.seers: a stage marked Foresees must be
// a Foreseer, and every stage on that is not store-free and comes before
// the last store-free or foreseeing stage on (that one included) must be
// a Peeker, so that a call such a stage refuses learns its verdict
// without counting.
func (p *Pipeline) findPeekers() error {
	last := -1
	p.seers = make([]Foreseer, len(p.stages))
	for i, st := range p.stages {
		if st.Foresees {
			fs, ok := st.Check.(Foreseer)
			if !ok {
				return fmt.Errorf("pipeline: stage %v is marked Foresees but is not a pipeline.Foreseer", st.Slot)
			}
			p.seers[i] = fs
		}
		if st.StoreFree || st.Foresees {
			last = i
		}
	}
	p.peekers = make([]Peeker, len(p.stages))
	for i, st := range p.stages[:last+1] {
		if st.StoreFree {
			continue
		}
		pk, ok := st.Check.(Peeker)
		if !ok {
			return fmt.Errorf("pipeline: stage %v comes before the store-free or foreseeing stage %v and cannot say whether it would refuse without counting (not a pipeline.Peeker)", st.Slot, p.stages[last].Slot)
		}
		p.peekers[i] = pk
	}
	return nil
}

// Slots lists the slots that are on, request side then response side.
func (p *Pipeline) Slots() []Slot {
	out := make([]Slot, 0, len(p.stages)+len(p.results))
	for _, st := range p.stages {
		out = append(out, st.Slot)
	}
	for _, st := range p.results {
		out = append(out, st.Slot)
	}
	return out
}

// Run passes c through every request-side stage of its scope, in order,
// until one refuses. For a decided request (tools/call, a read) the
// resolvers start first, then the store-free stages (Stage.StoreFree) are
// decided, and only then do the other prefetchers start together; the
// answer is still the first refusal in Order: when a store-free stage
// refuses, the stages ahead of it are asked whether they would have
// refused (Peeker), counting nothing. When a stage refuses, what every
// prefetcher took for the call is given back before Run returns, or, when
// c.Settles, by c's Finish.
func (p *Pipeline) Run(ctx context.Context, c *Call) error {
	return p.run(ctx, c, numSlots)
}

// RunUntil runs the stages of c's scope that come before slot. It is for
// the checks of a list (tools/list is filtered by Visible after the stages
// ahead of routing). An invalid or response-side slot is an error, never
// an empty run.
func (p *Pipeline) RunUntil(ctx context.Context, c *Call, slot Slot) error {
	if !slot.Valid() || slot.Response() {
		return fmt.Errorf("pipeline: RunUntil(%v): not a request-side slot", slot)
	}
	return p.run(ctx, c, slot)
}

type started struct {
	decide func() error
	undo   func()
}

func (p *Pipeline) run(ctx context.Context, c *Call, stop Slot) error {
	scope := c.scope()
	if scope&Decided != 0 && stop == numSlots {
		return p.runDecided(ctx, c, scope)
	}
	for i := range p.stages {
		st := &p.stages[i]
		if st.Slot >= stop {
			break
		}
		if st.Scope&scope == 0 {
			continue
		}
		if err := p.decide(ctx, st, c, nil); err != nil {
			return err
		}
	}
	return nil
}

// runDecided runs a decided request (tools/call, a read): the resolvers'
// prefetches, then the store-free stages' verdicts, in order; when one
// refuses, the stages ahead of it are peeked at (peekAhead); else every
// other prefetcher starts (one wave of store work) and the remaining
// verdicts are taken in order. The first refusal in Order is the answer
// either way.
func (p *Pipeline) runDecided(ctx context.Context, c *Call, scope Scope) error {
	pre := make([]started, len(p.stages))
	p.prefetch(ctx, c, scope, pre, true)
	var early uint32 // bit i: stage i was decided among the store-free ones
	for i := range p.stages {
		st := &p.stages[i]
		if st.Scope&scope == 0 {
			continue
		}
		if fs := p.seers[i]; fs != nil && fs.Foresees(ctx, c) {
			// A certain refusal: the stages ahead of it and its own
			// Peek give the answer; if none refuses after all, the run
			// goes on and this stage is decided with the others.
			if err := p.peekAhead(ctx, c, scope, i+1, nil); err != nil {
				p.settle(c, pre)
				return err
			}
		}
		if !st.StoreFree {
			continue
		}
		early |= 1 << i
		if err := p.decide(ctx, st, c, pre[i].decide); err != nil {
			err = p.peekAhead(ctx, c, scope, i, err)
			p.settle(c, pre)
			return err
		}
	}
	p.prefetch(ctx, c, scope, pre, false)
	for i := range p.stages {
		st := &p.stages[i]
		if st.Scope&scope == 0 || early&(1<<i) != 0 {
			continue
		}
		if err := p.decide(ctx, st, c, pre[i].decide); err != nil {
			p.settle(c, pre)
			return err
		}
	}
	// Allowed by every stage, the call may still be refused before it
	// is sent (the idempotency ledger; a client gone before the send):
	// the gateway then finishes it as refused, and it holds nothing
	// either.
	c.OnDone(func(o audit.Outcome) {
		if o == audit.OutcomeRefused {
			undoAll(c, pre)
		}
	})
	return nil
}

// peekAhead is the answer of a call that store-free stage i refused with
// err: the stages ahead of it that are not store-free are asked, with
// reads only and together (one wave), whether they would have refused it
// (Peeker); the first of them in order that would is the answer, else err.
// Nothing is counted, so nothing is given back. For a Foreseer at i-1,
// err is nil and its own Peek is the last asked.
func (p *Pipeline) peekAhead(ctx context.Context, c *Call, scope Scope, i int, err error) error {
	var room [numSlots]func() error
	decides := room[:i]
	for j := range decides {
		if pk := p.peekers[j]; pk != nil && p.stages[j].Scope&scope != 0 {
			decides[j] = pk.Peek(ctx, c)
		}
	}
	for j, decide := range decides {
		if decide == nil {
			continue
		}
		if perr := p.decide(ctx, &p.stages[j], c, decide); perr != nil {
			return perr
		}
	}
	return err
}

// settle gives back what the prefetchers took for a call refused by a
// stage: before the refusal is returned, or, when c.Settles, in c's
// Finish.
func (p *Pipeline) settle(c *Call, pre []started) {
	if c.Settles {
		c.OnDoneAsync(func(audit.Outcome) { undoAll(c, pre) })
		return
	}
	undoAll(c, pre)
}

// undoAll gives back what every prefetcher took for a refused call. The
// give-backs are independent writes, so they run together (c.Async): one
// round trip, not one each.
func undoAll(c *Call, pre []started) {
	var room [8]func()
	waits := room[:0]
	for j := range pre {
		if undo := pre[j].undo; undo != nil {
			waits = append(waits, c.Async(undo))
		}
	}
	for _, w := range waits {
		w()
	}
}

// prefetch starts the prefetchers of scope into pre: the resolvers, in
// order (what they fill in keys the others' store work), or the others
// that are not store-free (those were decided already).
func (p *Pipeline) prefetch(ctx context.Context, c *Call, scope Scope, pre []started, resolvers bool) {
	for i, st := range p.stages {
		if st.Scope&scope == 0 {
			continue
		}
		pf, ok := st.Check.(Prefetcher)
		if !ok {
			continue
		}
		if _, r := st.Check.(Resolver); r != resolvers || (!r && st.StoreFree) {
			continue
		}
		pre[i].decide, pre[i].undo = pf.Prefetch(ctx, c)
	}
}

// decide takes one stage's verdict (its prefetched decide, or its Check)
// through the hook, and applies the stage's Mode to a check that could not
// decide.
func (p *Pipeline) decide(ctx context.Context, st *Stage, c *Call, decide func() error) error {
	cctx := ctx
	if p.hook != nil {
		cctx = p.hook.Before(ctx, st.Slot, c)
	}
	var err error
	if decide != nil {
		err = decide()
	} else {
		err = st.Check.Check(cctx, c)
	}
	err = p.apply(ctx, st, c, err)
	if p.hook != nil {
		p.hook.After(cctx, st.Slot, c, err)
	}
	return err
}

// apply is the one place a failure mode is applied: a refusal stands; any
// other error means the check could not decide, and the stage's Mode says
// whether the call goes on (recorded as degraded) or is refused.
func (p *Pipeline) apply(ctx context.Context, st *Stage, c *Call, err error) error {
	if err == nil {
		return nil
	}
	var ref *refusal.Refusal
	if errors.As(err, &ref) {
		c.RefusedBy = st.Slot
		return ref
	}
	if st.Mode == FailOpen {
		c.Degraded = append(c.Degraded, st.Slot)
		p.log.WarnContext(ctx, "check could not decide; call let through (fails open)",
			"slot", st.Slot.String(), "tenant", c.Tenant.ID, "correlation_id", c.CorrelationID, "err", err)
		return nil
	}
	p.log.ErrorContext(ctx, "check could not decide; call refused (fails closed)",
		"slot", st.Slot.String(), "tenant", c.Tenant.ID, "correlation_id", c.CorrelationID, "err", err)
	c.RefusedBy = st.Slot
	if st.Unavailable != nil {
		return st.Unavailable(c)
	}
	return refusal.Internal(c.CorrelationID)
}

// RunResults passes the upstream's answer to c through the response-side
// stages, in order, until one refuses. A stage may rewrite resp.
func (p *Pipeline) RunResults(ctx context.Context, c *Call, resp *jsonrpc.Response) error {
	scope := c.scope()
	for i := range p.results {
		st := &p.results[i]
		if st.Scope&scope == 0 || st.Result == nil {
			continue
		}
		cctx := ctx
		if p.hook != nil {
			cctx = p.hook.Before(ctx, st.Slot, c)
		}
		err := p.apply(ctx, st, c, st.Result.CheckResult(cctx, c, resp))
		if p.hook != nil {
			p.hook.After(cctx, st.Slot, c, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// RunMessage passes msg, a message a server sends the client during c (a
// notification or a request), through the response-side stages with a
// MessageCheck whose scope includes c's, in order, until one refuses. A
// stage may rewrite msg.
func (p *Pipeline) RunMessage(ctx context.Context, c *Call, msg *json.RawMessage) error {
	scope := c.scope()
	for i := range p.results {
		st := &p.results[i]
		if st.Scope&scope == 0 || st.Message == nil {
			continue
		}
		cctx := ctx
		if p.hook != nil {
			cctx = p.hook.Before(ctx, st.Slot, c)
		}
		err := p.apply(ctx, st, c, st.Message.CheckMessage(cctx, c, msg))
		if p.hook != nil {
			p.hook.After(cctx, st.Slot, c, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Visible reports whether every filtering check lets tool on server show.
func (p *Pipeline) Visible(ctx context.Context, c *Call, server *registry.Server, tool string) bool {
	for _, st := range p.stages {
		if f, ok := st.Check.(Filter); ok && !f.Visible(ctx, c, server, tool) {
			return false
		}
	}
	return true
}

// DegradedNames are c's degraded slots by name, for the audit record.
func (c *Call) DegradedNames() []string {
	if len(c.Degraded) == 0 {
		return nil
	}
	out := make([]string, len(c.Degraded))
	for i, s := range c.Degraded {
		out[i] = s.String()
	}
	return out
}
