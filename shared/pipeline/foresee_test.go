package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// foreseeing is a peekable counting check that says, before any store
// work, whether it foresees a refusal (Foreseer); its Peek answers peek.
type foreseeing struct {
	peeking
	foresees bool
	peek     error
}

func (f foreseeing) Foresees(context.Context, *Call) bool { return f.foresees }

func (f foreseeing) Peek(context.Context, *Call) func() error {
	*f.peeked = append(*f.peeked, f.slot.String())
	return func() error { return f.peek }
}

// TestForeseenRefusalDecidedFirst: a stage marked Foresees that foresees
// a refusal is answered from the peeks of the stages ahead of it and its
// own, with nothing started that counts; when its Peek lets the call on
// after all, or it foresees nothing, the run is as before.
func TestForeseenRefusalDecidedFirst(t *testing.T) {
	byRate := refusal.RateLimit("session", 2, 1000)
	byPolicy := refusal.New(refusal.PolicyDenied, "")
	all := []string{"session", "ratelimit", "quota", "policy", "breaker"}
	for _, tc := range []struct {
		name           string
		rate           error
		foresees       bool
		peek, check    error
		want           error
		wantBy         Slot
		started, peeks []string
	}{
		{name: "foreseen", foresees: true, peek: byPolicy, check: byPolicy, want: byPolicy, wantBy: Policy, peeks: []string{"session", "ratelimit", "quota", "policy"}},
		{name: "foreseen, the rate limit first", rate: byRate, foresees: true, peek: byPolicy, check: byPolicy, want: byRate, wantBy: RateLimit, peeks: []string{"session", "ratelimit", "quota", "policy"}},
		{name: "foreseen, its peek lets it on", foresees: true, started: all, peeks: []string{"session", "ratelimit", "quota", "policy"}},
		{name: "not foreseen", check: byPolicy, want: byPolicy, wantBy: Policy, started: all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log, started, undone, peeked []string
			pol := foreseeing{peeking{counting{slot: Policy, refuse: tc.check, started: &started, undone: &undone}, &peeked}, tc.foresees, tc.peek}
			st := table(map[Slot]Check{
				Session:   peeking{counting{slot: Session, started: &started, undone: &undone}, &peeked},
				RateLimit: peeking{counting{slot: RateLimit, refuse: tc.rate, started: &started, undone: &undone}, &peeked},
				Quota:     peeking{counting{slot: Quota, started: &started, undone: &undone}, &peeked},
				Route:     fake{Route, &log, nil},
				Policy:    pol,
				Content:   fake{Content, &log, nil},
				Breaker:   counting{slot: Breaker, started: &started, undone: &undone},
			}, nil)
			for i := range st {
				st[i].StoreFree = st[i].Slot == Route || st[i].Slot == Content
				st[i].Foresees = st[i].Slot == Policy
			}
			p, err := New(st, quiet)
			if err != nil {
				t.Fatal(err)
			}
			c := &Call{Method: "tools/call", Settles: true}
			err = p.Run(context.Background(), c)
			if err != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err != nil && c.RefusedBy != tc.wantBy {
				t.Errorf("refused by %v, want %v", c.RefusedBy, tc.wantBy)
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

// TestNewRefusesForeseesWithoutAForeseer: a stage marked Foresees whose
// check is not a Foreseer makes New fail.
func TestNewRefusesForeseesWithoutAForeseer(t *testing.T) {
	var started, undone, peeked []string
	st := table(map[Slot]Check{
		Policy: peeking{counting{slot: Policy, started: &started, undone: &undone}, &peeked},
	}, nil)
	for i := range st {
		st[i].Foresees = st[i].Slot == Policy
	}
	if _, err := New(st, quiet); err == nil {
		t.Fatal("a stage marked Foresees that is not a Foreseer: accepted")
	}
}
