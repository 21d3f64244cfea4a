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

// counting is a Prefetcher that counts a unit when started.
type counting struct {
	slot    string
	refuse  error
	started *[]string
	undone  *[]string
}

func (f counting) Slot() string { return f.slot }
func (f counting) Check(ctx context.Context, c *Call) error {
	d, _ := f.Prefetch(ctx, c)
	return d()
}
func (f counting) Prefetch(context.Context, *Call) (func() error, func()) {
	*f.started = append(*f.started, f.slot)
	return func() error { return f.refuse }, func() { *f.undone = append(*f.undone, f.slot) }
}

// TestPrefetchKeepsOrderAndUndoes: prefetchers start together, decisions
// come in Order, and what later prefetchers counted is given back when an
// earlier check refuses.
func TestPrefetchKeepsOrderAndUndoes(t *testing.T) {
	var started, undone, ran []string
	refusedBySession := context.DeadlineExceeded
	p, err := New(
		counting{slot: "session", refuse: refusedBySession, started: &started, undone: &undone},
		counting{slot: "ratelimit", started: &started, undone: &undone},
		counting{slot: "quota", refuse: context.Canceled, started: &started, undone: &undone},
		fake{"route", &ran, nil},
	)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background(), &Call{Method: "tools/call"})
	if err != refusedBySession {
		t.Fatalf("got %v, want the session's refusal (first in order)", err)
	}
	if !slices.Equal(started, []string{"session", "ratelimit", "quota"}) || len(ran) != 0 {
		t.Fatalf("started %v, ran %v", started, ran)
	}
	// ratelimit allowed and is undone; quota refused itself, so nothing to give back.
	if !slices.Equal(undone, []string{"ratelimit"}) {
		t.Fatalf("undone %v, want [ratelimit]", undone)
	}
	// tools/list does not prefetch.
	started, undone = nil, nil
	_ = p.RunUntil(context.Background(), &Call{Method: "tools/list"}, "ratelimit")
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
