package pipeline

import (
	"context"
	"slices"
	"testing"
)

// TestOrderIsPinned: the order of checks is a public contract (seed 004,
// "Checks run in a fixed order"); changing it must be deliberate.
func TestOrderIsPinned(t *testing.T) {
	want := []string{"session", "ratelimit", "quota", "route", "killswitch", "policy", "content", "approval", "breaker"}
	if !slices.Equal(Order, want) {
		t.Fatalf("pipeline.Order = %v, want %v (update docs/pipeline.md too)", Order, want)
	}
}

type fake struct {
	slot string
	log  *[]string
	err  error
}

func (f fake) Slot() string { return f.slot }
func (f fake) Check(context.Context, *Call) error {
	*f.log = append(*f.log, f.slot)
	return f.err
}

func TestNewRefusesOutOfOrder(t *testing.T) {
	var log []string
	if _, err := New(fake{"route", &log, nil}, fake{"session", &log, nil}); err == nil {
		t.Fatal("out-of-order pipeline accepted")
	}
	if _, err := New(fake{"nope", &log, nil}); err == nil {
		t.Fatal("unknown slot accepted")
	}
	if _, err := New(fake{"route", &log, nil}, fake{"route", &log, nil}); err == nil {
		t.Fatal("duplicate slot accepted")
	}
}

func TestRunStopsAtFirstRefusal(t *testing.T) {
	var log []string
	stop := context.Canceled
	p, err := New(fake{"session", &log, nil}, fake{"ratelimit", &log, stop}, fake{"route", &log, nil})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), &Call{}); err != stop || !slices.Equal(log, []string{"session", "ratelimit"}) {
		t.Fatalf("err %v, ran %v", err, log)
	}
	log = nil
	if err := p.RunUntil(context.Background(), &Call{}, "ratelimit"); err != nil || !slices.Equal(log, []string{"session"}) {
		t.Fatalf("RunUntil ran %v", log)
	}
}

func TestFinishRunsInReverse(t *testing.T) {
	var got []string
	c := &Call{}
	c.OnDone(func(o Outcome) { got = append(got, "first:"+string(o)) })
	c.OnDone(func(o Outcome) { got = append(got, "second:"+string(o)) })
	c.Finish(Indeterminate)
	c.Finish(Allowed) // a second Finish runs nothing
	if !slices.Equal(got, []string{"second:indeterminate", "first:indeterminate"}) {
		t.Fatalf("got %v", got)
	}
}
