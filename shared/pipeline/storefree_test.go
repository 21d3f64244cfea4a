package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// peeking is a counting check that can also say, writing nothing, whether
// it would refuse (Peeker): a peek is logged as "peek:<slot>".
type peeking struct {
	counting
	peeked *[]string
}

func (f peeking) Peek(context.Context, *Call) func() error {
	*f.peeked = append(*f.peeked, f.slot.String())
	return func() error { return f.refuse }
}

// storeFreeTable is session, rate limit and quota counting (and
// peekable), route and content store-free, the breaker counting after
// them; rateRefuses and contentRefuses set who refuses.
func storeFreeTable(t *testing.T, log, started, undone, peeked *[]string, rateRefuses, contentRefuses error) *Pipeline {
	t.Helper()
	st := table(map[Slot]Check{
		Session:   peeking{counting{slot: Session, started: started, undone: undone}, peeked},
		RateLimit: peeking{counting{slot: RateLimit, refuse: rateRefuses, started: started, undone: undone}, peeked},
		Quota:     peeking{counting{slot: Quota, started: started, undone: undone}, peeked},
		Route:     fake{Route, log, nil},
		Content:   fake{Content, log, contentRefuses},
		Breaker:   counting{slot: Breaker, started: started, undone: undone},
	}, nil)
	for i := range st {
		if st[i].Slot == Route || st[i].Slot == Content {
			st[i].StoreFree = true
		}
	}
	p, err := New(st, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStoreFreeDecidedFirst: the store-free stages decide before any
// counting stage starts; a call they refuse starts nothing that counts,
// and the counting stages ahead of the refusing one are peeked at (all of
// them, once): the first refusal in Order is the answer.
func TestStoreFreeDecidedFirst(t *testing.T) {
	byRate := refusal.RateLimit("session", 2, 1000)
	byContent := refusal.New(refusal.EgressBlocked, "")
	for _, tc := range []struct {
		name           string
		rate, content  error
		want           error
		wantBy         Slot
		started, peeks []string
	}{
		{name: "allowed", started: []string{"session", "ratelimit", "quota", "breaker"}},
		{name: "content refuses", content: byContent, want: byContent, wantBy: Content, peeks: []string{"session", "ratelimit", "quota"}},
		{name: "rate limit and content refuse", rate: byRate, content: byContent, want: byRate, wantBy: RateLimit, peeks: []string{"session", "ratelimit", "quota"}},
		{name: "rate limit refuses", rate: byRate, want: byRate, wantBy: RateLimit, started: []string{"session", "ratelimit", "quota", "breaker"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log, started, undone, peeked []string
			p := storeFreeTable(t, &log, &started, &undone, &peeked, tc.rate, tc.content)
			c := &Call{Method: "tools/call", Settles: true}
			err := p.Run(context.Background(), c)
			if err != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err != nil && c.RefusedBy != tc.wantBy {
				t.Errorf("refused by %v, want %v", c.RefusedBy, tc.wantBy)
			}
			if !slices.Equal(log, []string{"route", "content"}) {
				t.Errorf("store-free stages ran %v", log)
			}
			if !slices.Equal(started, tc.started) || !slices.Equal(peeked, tc.peeks) {
				t.Errorf("started %v, peeked %v; want %v, %v", started, peeked, tc.started, tc.peeks)
			}
			c.Finish(audit.OutcomeRefused)
			if len(tc.started) == 0 && len(undone) != 0 {
				t.Errorf("nothing counted, yet %v given back", undone)
			}
		})
	}
}

// TestNewRefusesStoreFreeBehindACountingCheck: a stage ahead of a
// store-free one that cannot say whether it would refuse without counting
// (not a Peeker) makes New fail, naming it; behind the last store-free
// stage it need not be one.
func TestNewRefusesStoreFreeBehindACountingCheck(t *testing.T) {
	var started, undone []string
	st := table(map[Slot]Check{
		Quota:   counting{slot: Quota, started: &started, undone: &undone},
		Content: fake{Content, &started, nil},
		Breaker: counting{slot: Breaker, started: &started, undone: &undone},
	}, nil)
	for i := range st {
		st[i].StoreFree = st[i].Slot == Content
	}
	if _, err := New(st, quiet); err == nil {
		t.Fatal("quota ahead of a store-free stage, not a Peeker: accepted")
	}
	for i := range st {
		st[i].StoreFree = st[i].Slot == Route
	}
	if _, err := New(st, quiet); err != nil {
		t.Fatalf("counting stages only behind the store-free one: %v", err)
	}
}
