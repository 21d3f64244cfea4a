package pipeline

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// TestOrderIsPinned: the order of checks is a public contract (seed 004,
// "Checks run in a fixed order"); changing it must be deliberate.
func TestOrderIsPinned(t *testing.T) {
	want := []string{"session", "params", "ratelimit", "quota", "route", "killswitch", "policy", "content", "approval", "breaker"}
	var got []string
	for _, s := range Order {
		got = append(got, s.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pipeline.Order = %v, want %v (update docs/pipeline.md too)", got, want)
	}
	if got := ResultOrder; len(got) != 2 || got[0] != Results || got[1] != Ingress {
		t.Fatalf("ResultOrder = %v", got)
	}
	for s := Slot(0); s <= numSlots; s++ {
		if s.Valid() != (s > 0 && s < numSlots) {
			t.Fatalf("%d.Valid() = %v", s, s.Valid())
		}
	}
}

// table returns one stage per slot, in order, every one applying to every
// request; checks fills the named ones.
func table(checks map[Slot]Check, modes map[Slot]Mode) []Stage {
	var out []Stage
	for _, s := range append(Order[:], ResultOrder[:]...) {
		out = append(out, Stage{Slot: s, Scope: Every, Check: checks[s], Mode: modes[s]})
	}
	return out
}

var quiet = &Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

type fake struct {
	slot Slot
	log  *[]string
	err  error
}

func (f fake) Check(context.Context, *Call) error {
	*f.log = append(*f.log, f.slot.String())
	return f.err
}

func TestNewRefusesBadTables(t *testing.T) {
	var log []string
	good := table(map[Slot]Check{Route: fake{Route, &log, nil}}, nil)
	if _, err := New(good, nil); err != nil {
		t.Fatalf("good table refused: %v", err)
	}
	swapped := slices.Clone(good)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	unknown := slices.Clone(good)
	unknown[3].Slot = Slot(200)
	missing := slices.Clone(good)[1:]
	wrongSide := slices.Clone(good)
	wrongSide[len(wrongSide)-1].Check = fake{Results, &log, nil}
	noScope := slices.Clone(good)
	noScope[4].Scope = 0
	for name, st := range map[string][]Stage{"out of order": swapped, "unknown slot": unknown, "missing slot": missing, "check on the response side": wrongSide, "no scope": noScope} {
		if _, err := New(st, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRunStopsAtFirstRefusal(t *testing.T) {
	var log []string
	stop := refusal.New(refusal.InvalidParams, "no")
	p, err := New(table(map[Slot]Check{
		Session: fake{Session, &log, nil}, RateLimit: fake{RateLimit, &log, stop}, Route: fake{Route, &log, nil},
	}, nil), quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), &Call{}); err != stop || !slices.Equal(log, []string{"session", "ratelimit"}) {
		t.Fatalf("err %v, ran %v", err, log)
	}
	log = nil
	if err := p.RunUntil(context.Background(), &Call{}, RateLimit); err != nil || !slices.Equal(log, []string{"session"}) {
		t.Fatalf("RunUntil ran %v", log)
	}
}

// TestRunUntilRefusesBadSlot: a slot that is not a request-side constant
// is an error, never an empty run that allows.
func TestRunUntilRefusesBadSlot(t *testing.T) {
	var log []string
	p, err := New(table(map[Slot]Check{Session: fake{Session, &log, nil}}, nil), quiet)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Slot{0, Results, numSlots, 250} {
		if err := p.RunUntil(context.Background(), &Call{}, s); err == nil {
			t.Errorf("RunUntil(%v) = nil", s)
		}
	}
	if len(log) != 0 {
		t.Fatalf("ran %v", log)
	}
}

// TestFailureModes: a check that cannot decide is let through and recorded
// as degraded when its stage fails open, and refused when it fails closed
// (with the stage's answer, else -32603); a refusal is a refusal whatever
// the mode.
func TestFailureModes(t *testing.T) {
	down := errors.New("store unreachable")
	var log []string
	held := refusal.Approval("t", "s", "", refusal.ApprovalUnavailable)
	mk := func(closedAnswer bool) *Pipeline {
		st := table(map[Slot]Check{
			RateLimit: fake{RateLimit, &log, down},
			Quota:     fake{Quota, &log, down},
			Approval:  fake{Approval, &log, down},
		}, map[Slot]Mode{RateLimit: FailOpen, Quota: FailOpen, Approval: FailClosed})
		if closedAnswer {
			st[slices.Index(Order[:], Approval)].Unavailable = func(*Call) error { return held }
		}
		p, err := New(st, quiet)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	c := &Call{CorrelationID: "corr-1"}
	err := mk(true).Run(context.Background(), c)
	if err != held {
		t.Fatalf("closed stage answered %v, want its Unavailable", err)
	}
	if !slices.Equal(c.DegradedNames(), []string{"ratelimit", "quota"}) {
		t.Fatalf("degraded %v", c.DegradedNames())
	}
	c = &Call{CorrelationID: "corr-2"}
	var ref *refusal.Refusal
	if err := mk(false).Run(context.Background(), c); !errors.As(err, &ref) || ref.Word != refusal.InternalError {
		t.Fatalf("closed stage without an answer: %v, want -32603", err)
	}
	// A refusal from a fail-open stage still refuses.
	limited := refusal.RateLimit("session", 1, 10)
	p, _ := New(table(map[Slot]Check{RateLimit: fake{RateLimit, &log, limited}}, map[Slot]Mode{RateLimit: FailOpen}), quiet)
	if err := p.Run(context.Background(), &Call{}); err != limited {
		t.Fatalf("fail-open stage's refusal became %v", err)
	}
}

// TestScope: a stage runs only for the requests of its scope.
func TestScope(t *testing.T) {
	var log []string
	st := table(map[Slot]Check{
		Session: fake{Session, &log, nil}, Params: fake{Params, &log, nil}, Route: fake{Route, &log, nil},
	}, nil)
	st[0].Scope = InSession | Decided
	st[1].Scope = Decided
	p, err := New(st, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for method, want := range map[string][]string{
		"initialize": {"route"},
		"tools/list": {"session", "route"},
		"ping":       {"session", "route"},
		"tools/call": {"session", "params", "route"},
	} {
		log = nil
		if err := p.Run(context.Background(), &Call{Method: method}); err != nil || !slices.Equal(log, want) {
			t.Errorf("%s ran %v, want %v", method, log, want)
		}
	}
}

func TestFinishRunsInReverse(t *testing.T) {
	var got []string
	c := &Call{}
	c.OnDone(func(o audit.Outcome) { got = append(got, "first:"+string(o)) })
	c.OnDone(func(o audit.Outcome) { got = append(got, "second:"+string(o)) })
	c.Finish(audit.OutcomeIndeterminate)
	c.Finish(audit.OutcomeAllowed) // a second Finish runs nothing
	if !slices.Equal(got, []string{"second:indeterminate", "first:indeterminate"}) {
		t.Fatalf("got %v", got)
	}
}

// counting is a Prefetcher that counts a unit when started.
type counting struct {
	slot    Slot
	refuse  error
	started *[]string
	undone  *[]string
}

func (f counting) Check(ctx context.Context, c *Call) error {
	d, _ := f.Prefetch(ctx, c)
	return d()
}
func (f counting) Prefetch(context.Context, *Call) (func() error, func()) {
	*f.started = append(*f.started, f.slot.String())
	return func() error { return f.refuse }, func() {
		undoMu.Lock() // give-backs run together (undoAll)
		defer undoMu.Unlock()
		*f.undone = append(*f.undone, f.slot.String())
		slices.SortFunc(*f.undone, func(a, b string) int { return int(slotNamed(a)) - int(slotNamed(b)) })
	}
}

var undoMu sync.Mutex

// slotNamed is the request-side slot named s (its String).
func slotNamed(s string) Slot {
	for _, sl := range Order {
		if sl.String() == s {
			return sl
		}
	}
	return 0
}

// TestPrefetchKeepsOrderAndUndoes: prefetchers start together, decisions
// come in Order, and when any stage refuses, every prefetcher's work is
// taken back (earlier, later and the refusing one): a refused call holds
// nothing.
func TestPrefetchKeepsOrderAndUndoes(t *testing.T) {
	var started, undone, ran []string
	refusedByQuota := refusal.Quota("free", 1, 1, "202612")
	p, err := New(table(map[Slot]Check{
		Session:   counting{slot: Session, started: &started, undone: &undone},
		RateLimit: counting{slot: RateLimit, started: &started, undone: &undone},
		Quota:     counting{slot: Quota, refuse: refusedByQuota, started: &started, undone: &undone},
		Breaker:   counting{slot: Breaker, started: &started, undone: &undone},
		Route:     fake{Route, &ran, nil},
	}, nil), quiet)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background(), &Call{Method: "tools/call"})
	if err != refusedByQuota {
		t.Fatalf("got %v, want the quota's refusal", err)
	}
	if !slices.Equal(started, []string{"session", "ratelimit", "quota", "breaker"}) || len(ran) != 0 {
		t.Fatalf("started %v, ran %v", started, ran)
	}
	if !slices.Equal(undone, []string{"session", "ratelimit", "quota", "breaker"}) {
		t.Fatalf("undone %v, want every prefetcher", undone)
	}
	// tools/list does not prefetch.
	started, undone = nil, nil
	_ = p.RunUntil(context.Background(), &Call{Method: "tools/list"}, RateLimit)
	if !slices.Equal(started, []string{"session"}) {
		t.Fatalf("RunUntil started %v", started)
	}
}

func TestAsync(t *testing.T) {
	ran := false
	wait := (&Call{Inline: true}).Async(func() { ran = true })
	if !ran {
		t.Fatal("inline Async did not run fn at once")
	}
	wait()
	release := make(chan struct{})
	var done bool
	wait = (&Call{}).Async(func() { <-release; done = true })
	close(release)
	wait()
	if !done {
		t.Fatal("wait returned before fn finished")
	}
}

// TestRefusedAfterTheStagesUndoes: a call every stage allowed that the
// gateway then refuses before sending it (Finish with refused: the
// idempotency ledger) gives back what the prefetchers took; a call that
// was sent (any other outcome) keeps it.
func TestRefusedAfterTheStagesUndoes(t *testing.T) {
	for _, tc := range []struct {
		outcome audit.Outcome
		undone  []string
	}{
		{audit.OutcomeRefused, []string{"session", "ratelimit"}},
		{audit.OutcomeAllowed, nil},
		{audit.OutcomeError, nil},
		{audit.OutcomeIndeterminate, nil},
	} {
		var started, undone []string
		p, err := New(table(map[Slot]Check{
			Session:   counting{slot: Session, started: &started, undone: &undone},
			RateLimit: counting{slot: RateLimit, started: &started, undone: &undone},
		}, nil), quiet)
		if err != nil {
			t.Fatal(err)
		}
		c := &Call{Method: "tools/call"}
		if err := p.Run(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		if len(undone) != 0 {
			t.Fatalf("undone %v before the call finished", undone)
		}
		c.Finish(tc.outcome)
		if !slices.Equal(undone, tc.undone) {
			t.Errorf("finished %s: undone %v, want %v", tc.outcome, undone, tc.undone)
		}
	}
}
