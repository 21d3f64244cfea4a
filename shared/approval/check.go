package approval

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/jsonrpc"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/store"
)

// Options configure the check. Zero values take the defaults named.
type Options struct {
	TTL      time.Duration    // APPROVAL_TTL_SECS; 0 = one hour
	Now      func() time.Time // nil = time.Now
	Logger   *slog.Logger     // nil = slog.Default()
	Audit    audit.Writer     // hold, consumption and settlement records; nil = log only
	Notifier Notifier         // told of every new hold; nil = nobody
	// Lease is how long after taking an approval its call should have
	// been settled (Use.LeaseUntil): longer than any call's answer can
	// take. 0 = DefaultLease.
	Lease time.Duration
	// PolicyHash is recorded on the approval's audit records.
	PolicyHash string
	// ParamsKey keys the approval's params_hash (what it is bound to and
	// what its audit records carry): the deployment's params key, the
	// gateway's (gateway.Options.ParamsKey). Required: with the zero key
	// no call can be held (the check refuses it as unavailable).
	ParamsKey audit.ParamsKey
}

// Check is the approval check. It is safe for concurrent use.
type Check struct {
	st Store
	o  Options
}

// New returns the check over st.
func New(st Store, o Options) *Check {
	if o.TTL <= 0 {
		o.TTL = time.Hour
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Check{st: st, o: o}
}

// DefaultLease is Options.Lease's default: well past the longest answer
// `aegis serve` waits for with the default settings (its write timeout,
// (UPSTREAM_MAX_RETRIES+3) × UPSTREAM_TIMEOUT_SECS + 30 s = 80 s) and
// Lambda's 29-second ceiling.
const DefaultLease = 5 * time.Minute

// errNoParamsKey is the check's error when built without a params key.
var errNoParamsKey = errors.New("approval: no params key (Options.ParamsKey)")

// maxRounds bounds Hold/Consume rounds when racing calls keep using up the
// approval a call just found.
const maxRounds = 3

// Check implements pipeline.Check: a tools/call to a tool whose settings
// require approval, or whose call the policy requires approval for
// (c.PolicyApproval), runs only by consuming an approved approval of its
// slot.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	return k.check(ctx, c, nil)
}

// Prefetch implements pipeline.Prefetcher: for a tools/call to a tool
// whose settings require approval (known once the call is routed), the
// slot's current approval is read with the call's other store work, so
// that an approved call goes straight to its consumption and a pending or
// denied one is answered without a read of its own. The copy is a hint:
// the consumption is conditional (a copy gone stale loses it, and the
// call holds afresh, as when another call used the approval up), and a
// copy of another slot than the call's when decided (an earlier stage
// changed its arguments), or of none, is not used. A call the policy
// requires approval for (c.PolicyApproval, decided later) reads its slot
// when decided.
func (k *Check) Prefetch(ctx context.Context, c *pipeline.Call) (func() error, func()) {
	if c.Server == nil || !c.Settings.RequiresApproval || k.o.ParamsKey.IsZero() {
		return func() error { return k.check(ctx, c, nil) }, nil
	}
	pre := &prefetched{slot: k.slotOf(c)}
	wait := c.Async(func() { pre.a, pre.found, pre.err = k.st.SlotApproval(ctx, pre.slot) })
	return func() error {
		wait()
		return k.check(ctx, c, pre)
	}, nil
}

// prefetched is a slot's approval as Prefetch read it.
type prefetched struct {
	slot  Slot
	a     Approval
	found bool
	err   error
}

// usable reports whether p can stand for HoldApproval's answer for a call
// of slot at now: read, of that slot, and live (a slot with no live
// approval gets a new one: HoldApproval).
func (p *prefetched) usable(slot Slot, now time.Time) bool {
	return p != nil && p.err == nil && p.found && p.slot == slot && p.a.Live(now)
}

// slotOf is c's slot: its caller, routed server and upstream tool, and
// its arguments' hash.
func (k *Check) slotOf(c *pipeline.Call) Slot {
	upTool := c.UpstreamTool
	if upTool == "" {
		upTool = c.Tool
	}
	return Slot{Tenant: c.Tenant.ID, Caller: c.Caller, Server: c.Server.Name, Tool: upTool,
		ParamsHash: k.o.ParamsKey.Hash(jsonrpc.Member(c.Params, "arguments"))}
}

// candidate is the approval a hold of c at now would store.
func (k *Check) candidate(c *pipeline.Call, now time.Time) Approval {
	sl := k.slotOf(c)
	return Approval{
		ID:            NewID(),
		Tenant:        sl.Tenant,
		Caller:        sl.Caller,
		Server:        sl.Server,
		Tool:          sl.Tool,
		ParamsHash:    sl.ParamsHash,
		Params:        Mask(jsonrpc.Member(c.Params, "arguments")),
		Status:        Pending,
		Created:       now.UTC(),
		Expires:       now.UTC().Add(k.o.TTL),
		CorrelationID: c.CorrelationID,
	}
}

// check is Check, with pre (nil: none) the slot's approval read by
// Prefetch, which stands for the first round's HoldApproval when usable.
func (k *Check) check(ctx context.Context, c *pipeline.Call, pre *prefetched) error {
	if c.Server == nil || !(c.Settings.RequiresApproval || c.PolicyApproval) {
		return nil
	}
	if k.o.ParamsKey.IsZero() {
		return errNoParamsKey // the stage fails closed
	}
	tool := displayTool(c)
	// The store could not answer: the stage fails closed with Unavailable.
	unavailable := func(err error) error { return err }
	for round := range maxRounds {
		now := k.o.Now()
		cand := k.candidate(c, now)
		var (
			a       Approval
			created bool
			err     error
		)
		if round == 0 && pre.usable(cand.Slot(), now) {
			a = pre.a
		} else if a, created, err = k.st.HoldApproval(ctx, cand, now); err != nil {
			return unavailable(err)
		}
		switch a.Status {
		case Pending:
			if created {
				// When the caller settles the call before its answer
				// (Call.Settles), recorded then, with the call's own
				// record: one round trip for both.
				rec := k.recordOf(c, a, EventHeld, "")
				if c.Settles {
					c.OnDoneAsync(func(audit.Outcome) { k.write(ctx, rec) })
				} else {
					k.write(ctx, rec)
				}
				if k.o.Notifier != nil {
					k.o.Notifier.Notify(ctx, Event{Type: EventHeld, Approval: a, Tenant: c.Tenant})
				}
			}
			return refusal.Approval(tool, c.Server.Name, a.ID, refusal.ApprovalPending)
		case Denied:
			return refusal.Approval(tool, c.Server.Name, a.ID, refusal.ApprovalDenied)
		case Approved:
			// The use is stored before the call can be sent, and settled
			// when it has ended (c.Finish): a crash in between leaves it
			// running, never approved again.
			u := Use{ID: NewID(), CorrelationID: c.CorrelationID, Started: now.UTC(), LeaseUntil: now.UTC().Add(k.o.Lease)}
			used, err := k.st.ConsumeApproval(ctx, a, u, now)
			switch {
			case err == nil:
				k.record(ctx, c, used, EventConsumed, "")
				c.OnDone(func(o audit.Outcome) { k.settle(ctx, c, used, o) })
				return nil
			case errors.Is(err, store.ErrConflict):
				// Another call used it up (or it just expired; or the
				// prefetched copy was stale): hold this one afresh.
				continue
			default:
				return unavailable(err)
			}
		default:
			return unavailable(errors.New("store returned approval " + a.ID + " with status " + string(a.Status)))
		}
	}
	return unavailable(errors.New("approval kept being used up by racing calls"))
}

// Unavailable is the approval stage's answer when its store cannot be
// reached (it fails closed): -32061 with status "unavailable"; the call
// never runs.
func Unavailable(c *pipeline.Call) error {
	server := ""
	if c.Server != nil {
		server = c.Server.Name
	}
	return refusal.Approval(displayTool(c), server, "", refusal.ApprovalUnavailable)
}

// displayTool is the tool's name as the client called it.
func displayTool(c *pipeline.Call) string {
	if c.Tool != "" {
		return c.Tool
	}
	return c.UpstreamTool
}

// settle ends the use of an approval when its call has ended. A call that
// a check after this one, or the idempotency ledger, refused was never
// sent, so it must not cost the approver's decision: the approval is given
// back. Calls that reached the upstream (answered, failed or timed out)
// keep it used, with how they ended: they may have run.
func (k *Check) settle(ctx context.Context, c *pipeline.Call, used Approval, o audit.Outcome) {
	ctx = context.WithoutCancel(ctx)
	out := Answered
	switch o {
	case audit.OutcomeRefused:
		back, err := k.st.ReleaseApproval(ctx, used, k.o.Now())
		if err == nil {
			k.record(ctx, c, back, EventReleased, "")
			return
		}
		// Expired or superseded meanwhile, or the store is away: the call
		// is held afresh next time, which is the safe side; the use is
		// settled as not sent.
		k.o.Logger.WarnContext(ctx, "approval not given back after a refusal",
			"tenant", c.Tenant.ID, "correlation_id", c.CorrelationID, "approval_id", used.ID, "err", err)
		out = NotSent
	case audit.OutcomeError:
		out = Failed
	case audit.OutcomeIndeterminate:
		out = Indeterminate
	}
	done, err := k.st.SettleApproval(ctx, used, out, k.o.Now())
	if err != nil {
		// It stays running, and shows as unsettled after its lease: an
		// operator sees it, and it never runs again.
		k.o.Logger.ErrorContext(ctx, "approval use not settled; it will show as unsettled",
			"tenant", c.Tenant.ID, "correlation_id", c.CorrelationID, "approval_id", used.ID, "outcome", string(out), "err", err)
		return
	}
	k.record(ctx, c, done, EventSettled, "")
}

// Event types of notifications and audit records.
const (
	EventHeld     = "approval.held"
	EventApproved = "approval.approved"
	EventDenied   = "approval.denied"
	EventConsumed = "approval.consumed" // taken by a call, before it was sent
	EventSettled  = "approval.settled"  // the call that took it ended (detail: outcome=)
	EventReleased = "approval.released" // given back: the call was refused after consuming it
)

// Record is the audit record of an approval event: method "approval.held",
// "approval.approved", "approval.denied", "approval.consumed",
// "approval.settled" or "approval.released", with the approval id, who
// decided and why, and a settled use's outcome in Detail.
func Record(a Approval, event, by, reason, correlationID, policyHash string, now time.Time) audit.Record {
	r := audit.Record{
		Time:          now.UTC(),
		Tenant:        a.Tenant,
		Caller:        a.Caller,
		CorrelationID: correlationID,
		Layer:         string(refusal.LayerGateway),
		Method:        event,
		Server:        a.Server,
		Tool:          a.Tool,
		ParamsHash:    a.ParamsHash,
		PolicyHash:    policyHash,
		Detail:        "approval_id=" + a.ID,
	}
	switch event {
	case EventHeld, EventDenied:
		r.Outcome = audit.OutcomeRefused
		r.Code = int(refusal.CodeApprovalRequired)
		r.Word = string(refusal.ApprovalRequired)
	default:
		r.Outcome = audit.OutcomeAllowed
	}
	if event == EventSettled && a.Use != nil {
		r.Detail += " outcome=" + string(a.Use.Outcome)
	}
	if by != "" {
		r.Detail += " by=" + quoteDetail(by)
	}
	if reason != "" {
		r.Detail += " reason=" + quoteDetail(reason)
	}
	return r
}

func quoteDetail(s string) string {
	const max = 500
	if r := []rune(s); len(r) > max {
		s = string(r[:max])
	}
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, ' ')
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}

func (k *Check) record(ctx context.Context, c *pipeline.Call, a Approval, event, by string) {
	k.write(ctx, k.recordOf(c, a, event, by))
}

// recordOf is the audit record of event on a, for c, at now.
func (k *Check) recordOf(c *pipeline.Call, a Approval, event, by string) audit.Record {
	ph := k.o.PolicyHash
	if ph == "" {
		ph = c.PolicyHash
	}
	rec := Record(a, event, by, "", c.CorrelationID, ph, k.o.Now())
	rec.Session = c.SessionID
	return rec
}

// write writes rec to the audit trail, or to the log when it cannot.
func (k *Check) write(ctx context.Context, rec audit.Record) {
	if k.o.Audit == nil {
		k.o.Logger.InfoContext(ctx, "audit", "record", rec)
		return
	}
	if err := k.o.Audit.Write(context.WithoutCancel(ctx), rec); err != nil {
		k.o.Logger.ErrorContext(ctx, "audit write failed; record kept in this log line", "record", rec, "err", err)
	}
}

var _ pipeline.Prefetcher = (*Check)(nil)
