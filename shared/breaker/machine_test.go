package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/store"
)

// TestTransition is the state machine: each state × result → next record.
func TestTransition(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const threshold, cooldown = 3, 10 * time.Second
	reopen := t0.Add(cooldown)
	legacy := []byte(`{"state":2,"generation":4,"counts":{},"start":"2025-12-31T23:59:50Z","expiry":"2026-01-01T00:00:00Z"}`)
	probe := func(c Circuit) Circuit {
		c.Probe, c.ProbeUntil = "p1", t0.Add(time.Minute)
		return c
	}
	for _, tc := range []struct {
		name   string
		c      Circuit
		failed bool
		want   Circuit // Version as read: PutCircuit stores Version+1
		write  bool
	}{
		{"never written, success", Circuit{}, false, Circuit{}, false},
		{"never written, failure", Circuit{}, true, Circuit{Failures: 1}, true},
		{"closed clean, success", Circuit{Version: 3}, false, Circuit{Version: 3}, false},
		{"closed clean, failure", Circuit{Version: 3}, true, Circuit{Failures: 1, Version: 3}, true},
		{"closed 1 failure, success", Circuit{Failures: 1, Version: 3}, false, Circuit{Version: 3}, true},
		{"closed 1 failure, failure", Circuit{Failures: 1, Version: 3}, true, Circuit{Failures: 2, Version: 3}, true},
		{"closed threshold-1, success", Circuit{Failures: 2, Version: 3}, false, Circuit{Version: 3}, true},
		{"closed threshold-1, failure: opens", Circuit{Failures: 2, Version: 3}, true, Circuit{Failures: 3, OpenUntil: reopen, Version: 3}, true},
		{"open, success: ignored", Circuit{Failures: 3, OpenUntil: t0.Add(time.Nanosecond), Version: 4}, false,
			Circuit{Failures: 3, OpenUntil: t0.Add(time.Nanosecond), Version: 4}, false},
		{"open, failure: ignored", Circuit{Failures: 3, OpenUntil: t0.Add(time.Nanosecond), Version: 4}, true,
			Circuit{Failures: 3, OpenUntil: t0.Add(time.Nanosecond), Version: 4}, false},
		{"cooldown ends now, success: closes", Circuit{Failures: 3, OpenUntil: t0, Version: 4}, false, Circuit{Version: 4}, true},
		{"cooldown ends now, failure: reopens", Circuit{Failures: 3, OpenUntil: t0, Version: 4}, true,
			Circuit{Failures: 4, OpenUntil: reopen, Version: 4}, true},
		{"half-open, probe out, success: closes", probe(Circuit{Failures: 3, OpenUntil: t0.Add(-time.Second), Version: 5}), false,
			Circuit{Version: 5}, true},
		{"half-open, probe out, failure: reopens", probe(Circuit{Failures: 3, OpenUntil: t0.Add(-time.Second), Version: 5}), true,
			Circuit{Failures: 4, OpenUntil: reopen, Version: 5}, true},
		// Records of the gobreaker version: State is not read (here it
		// says half-open while the fields say open), and is dropped when
		// written over.
		{"legacy open, success: ignored", Circuit{State: legacy, OpenUntil: t0.Add(time.Second), Version: 6}, false,
			Circuit{State: legacy, OpenUntil: t0.Add(time.Second), Version: 6}, false},
		{"legacy half-open, failure: reopens", Circuit{State: legacy, OpenUntil: t0.Add(-time.Second), Version: 6}, true,
			Circuit{Failures: 1, OpenUntil: reopen, Version: 6}, true},
		{"unreadable state, closed, failure", Circuit{State: []byte("\x00garbage"), Failures: 1, Version: 6}, true,
			Circuit{Failures: 2, Version: 6}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, write := transition(tc.c, tc.failed, t0, threshold, cooldown)
			if write != tc.write || !equal(got, tc.want) {
				t.Fatalf("transition(%+v, failed=%v) = %+v, %v; want %+v, %v", tc.c, tc.failed, got, write, tc.want, tc.write)
			}
			if want := stateAt(tc.want, t0); stateAt(got, t0) != want {
				t.Fatalf("state after = %v; want %v", stateAt(got, t0), want)
			}
		})
	}
}

func TestStateAt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		openUntil time.Time
		want      state
	}{
		{time.Time{}, closed},
		{t0.Add(time.Nanosecond), open},
		{t0, halfOpen}, // the cooldown's last instant is over: admit and transition agree
		{t0.Add(-time.Hour), halfOpen},
	} {
		if got := stateAt(Circuit{OpenUntil: tc.openUntil}, t0); got != tc.want {
			t.Errorf("stateAt(OpenUntil %v) = %v; want %v", tc.openUntil, got, tc.want)
		}
	}
}

func equal(a, b Circuit) bool {
	return string(a.State) == string(b.State) && a.OpenUntil.Equal(b.OpenUntil) && a.Failures == b.Failures &&
		a.Probe == b.Probe && a.ProbeUntil.Equal(b.ProbeUntil) && a.Version == b.Version
}

// racyStore lets another process write the record between record's read
// and its write, once.
type racyStore struct {
	Store
	c     Circuit
	other *Circuit // written before the next PutCircuit; then nil
	puts  int
}

func (s *racyStore) Circuit(context.Context, string) (Circuit, error) { return s.c, nil }

func (s *racyStore) PutCircuit(_ context.Context, _ string, c Circuit) error {
	s.puts++
	if s.other != nil {
		s.c, s.other = *s.other, nil
		s.c.Version++
	}
	if c.Version != s.c.Version {
		return store.ErrConflict
	}
	c.Version++
	s.c = c
	return nil
}

// TestRecordConflict: a lost race reads the record again and applies the
// result to what the other process wrote.
func TestRecordConflict(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	// Another process opened the circuit meanwhile: this failure belongs
	// to the older generation and is not written.
	s := &racyStore{c: Circuit{Failures: 1, Version: 1}, other: &Circuit{Failures: 3, OpenUntil: t0.Add(time.Second), Version: 1}}
	k := New(Options{Store: s, Threshold: 3, Now: now})
	if err := k.record(context.Background(), "k", true); err != nil {
		t.Fatal(err)
	}
	if s.puts != 1 || s.c.Failures != 3 || !s.c.OpenUntil.Equal(t0.Add(time.Second)) || s.c.Version != 2 {
		t.Fatalf("after a lost race on an opened circuit: %+v after %d puts", s.c, s.puts)
	}
	// Another process counted a failure meanwhile: this one is the third.
	s = &racyStore{c: Circuit{Failures: 1, Version: 1}, other: &Circuit{Failures: 2, Version: 1}}
	k = New(Options{Store: s, Threshold: 3, Cooldown: 10 * time.Second, Now: now})
	if err := k.record(context.Background(), "k", true); err != nil {
		t.Fatal(err)
	}
	if s.puts != 2 || s.c.Failures != 3 || !s.c.OpenUntil.Equal(t0.Add(10*time.Second)) || s.c.Version != 3 {
		t.Fatalf("after a lost race on a counted failure: %+v after %d puts", s.c, s.puts)
	}
}
