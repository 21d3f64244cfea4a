package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/store"
)

// testSessionWindows holds session.Admitter to its contract: the windows
// count to their limits and no further (concurrently too), a window at its
// limit changes nothing, a new minute drops the last one's, the tool map
// is capped, GiveBack takes back one Admit, and a missing, expired or
// foreign session is ErrNotFound.
func testSessionWindows(t *testing.T, nb NewBackend) {
	b := nb(t, Options{})
	c := ctx(t)
	l := session.Limits{Lifetime: time.Hour, Idle: 10 * time.Minute}
	m0 := t0.Truncate(time.Minute)
	if err := b.Create(c, session.Record{ID: "w1", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	w := session.Window{Start: m0, PerSession: 3, Tool: "srv/echo", PerTool: 2}
	now := t0.Add(time.Second)
	for i := 1; i <= 2; i++ {
		r, a, err := b.Admit(c, "acme", "w1", "agent", now, l, w)
		if err != nil || !a.Counted() || r.Windows.At(m0, "") != int64(i) || r.Windows.At(m0, "srv/echo") != int64(i) || !r.LastSeen.Equal(now) {
			t.Fatalf("Admit %d = %+v, %+v, %v; want counted %d in both windows, LastSeen %v", i, r.Windows, a, err, i, now)
		}
	}
	// The tool window is at 2: refused, nothing counted, LastSeen kept.
	later := now.Add(time.Second)
	r, a, err := b.Admit(c, "acme", "w1", "agent", later, l, w)
	if err != nil || a != (session.Admission{ToolFull: true}) || r.Windows.At(m0, "") != 2 || !r.LastSeen.Equal(now) {
		t.Fatalf("Admit at the tool limit = %+v, %+v, %v, LastSeen %v; want ToolFull, session window 2, LastSeen %v", r.Windows, a, err, r.LastSeen, now)
	}
	// Another tool: the session window reaches 3, then is full.
	other := w
	other.Tool = "srv/other"
	if _, a, err := b.Admit(c, "acme", "w1", "agent", later, l, other); err != nil || !a.Counted() {
		t.Fatalf("Admit other tool = %+v, %v", a, err)
	}
	if _, a, err := b.Admit(c, "acme", "w1", "agent", later, l, other); err != nil || !a.SessionFull {
		t.Fatalf("Admit at the session limit = %+v, %v; want SessionFull", a, err)
	}
	// GiveBack frees one of each; a second of the other tool fits again.
	if err := b.GiveBack(c, "acme", "w1", other, session.Record{}); err != nil {
		t.Fatal(err)
	}
	r, err = b.Session(c, "acme", "w1", later, l)
	if err != nil || r.Windows.At(m0, "") != 2 || r.Windows.At(m0, "srv/other") != 0 || r.Windows.At(m0, "srv/echo") != 2 {
		t.Fatalf("after GiveBack: %+v, %v; want session 2, other 0, echo 2", r.Windows, err)
	}
	// A new minute drops the last one's windows in the same write.
	m1 := m0.Add(time.Minute)
	w1 := w
	w1.Start = m1
	r, a, err = b.Admit(c, "acme", "w1", "agent", m1.Add(time.Second), l, w1)
	if err != nil || !a.Counted() || !r.Windows.Start.Equal(m1) || r.Windows.Calls != 1 || len(r.Windows.Tools) != 1 || r.Windows.Tools["srv/echo"] != 1 {
		t.Fatalf("Admit in a new minute = %+v, %+v, %v; want only this minute's one call", r.Windows, a, err)
	}
	// A give-back of the earlier minute changes nothing.
	if err := b.GiveBack(c, "acme", "w1", w, session.Record{}); err != nil {
		t.Fatal(err)
	}
	if r, _ := b.Session(c, "acme", "w1", m1, l); r.Windows.Calls != 1 {
		t.Fatalf("after an old minute's GiveBack: %+v; want 1 call kept", r.Windows)
	}
	// The tool map holds at most MaxToolWindows tools a minute.
	wide := session.Window{Start: m1, PerTool: 5}
	for i := 1; i < session.MaxToolWindows; i++ {
		wide.Tool = fmt.Sprint("srv/t", i)
		if _, a, err := b.Admit(c, "acme", "w1", "agent", m1.Add(2*time.Second), l, wide); err != nil || !a.Counted() {
			t.Fatalf("Admit tool %d: %+v, %v", i, a, err)
		}
	}
	wide.Tool = "srv/one-too-many"
	if _, a, err := b.Admit(c, "acme", "w1", "agent", m1.Add(2*time.Second), l, wide); err != nil || a != (session.Admission{ToolsFull: true}) {
		t.Fatalf("Admit past MaxToolWindows = %+v, %v; want ToolsFull", a, err)
	}
	// Missing, foreign and expired sessions.
	for _, tc := range []struct {
		name, id, caller string
		now              time.Time
	}{
		{"missing", "nope", "agent", now},
		{"foreign caller", "w1", "intruder", m1},
		{"expired", "w1", "agent", m1.Add(time.Hour)},
	} {
		if _, _, err := b.Admit(c, "acme", tc.id, tc.caller, tc.now, l, session.Window{Start: tc.now.Truncate(time.Minute), PerSession: 9}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Admit(%s) err = %v, want ErrNotFound", tc.name, err)
		}
	}
	if err := b.GiveBack(c, "acme", "nope", w, session.Record{}); err != nil {
		t.Errorf("GiveBack(missing) = %v, want nil", err)
	}

	// Concurrent Admits: exactly the limit are counted.
	if err := b.Create(c, session.Record{ID: "w2", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	const limit, callers = 5, 20
	cw := session.Window{Start: m0, PerSession: limit, Tool: "srv/echo", PerTool: 100}
	var (
		mu      sync.Mutex
		counted int
		wg      sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			_, a, err := b.Admit(c, "acme", "w2", "agent", now, l, cw)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case a.Counted():
				counted++
			case !a.SessionFull:
				t.Errorf("refused Admit %+v, want SessionFull", a)
			}
		})
	}
	wg.Wait()
	if counted != limit {
		t.Errorf("%d of %d concurrent Admits counted, want %d", counted, callers, limit)
	}
}

// testSessionAdmitCounters holds Admit's count of the manifest counters
// (session.Window.Use) to its contract: the returned record has the
// counters as they were before the call, the stored one has them counted;
// a window at its limit counts nothing; GiveBack takes back the count,
// restoring LastAllowed and removing the step only while they are still
// the Admit's own; concurrent Admits each see a distinct ToolCalls, and
// their GiveBacks leave none.
func testSessionAdmitCounters(t *testing.T, nb NewBackend) {
	b := nb(t, Options{})
	c := ctx(t)
	l := session.Limits{Lifetime: time.Hour}
	m0 := t0.Truncate(time.Minute)
	if err := b.Create(c, session.Record{ID: "u1", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	stored := func() session.Record {
		t.Helper()
		r, err := b.Session(c, "acme", "u1", t0.Add(30*time.Second), l)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(r.Steps)
		return r
	}
	win := func(at time.Time, u session.Use) session.Window {
		u.At = at
		return session.Window{Start: m0, PerSession: 3, Tool: "srv/echo", PerTool: 10, Use: u}
	}
	t1, t2, t3, t4 := t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(3*time.Second), t0.Add(4*time.Second)

	w1 := win(t1, session.Use{ToolCall: true, Step: 3, Declared: true})
	r1, a, err := b.Admit(c, "acme", "u1", "agent", t1, l, w1)
	if err != nil || !a.Counted() || r1.ToolCalls != 0 || !r1.LastAllowed.IsZero() || len(r1.Steps) != 0 || r1.Windows.At(m0, "") != 1 {
		t.Fatalf("first Admit = %+v, %+v, %v; want the counters before it (none) and the window counted", r1, a, err)
	}
	if got := stored(); got.ToolCalls != 1 || !got.LastAllowed.Equal(t1) || !slices.Equal(got.Steps, []int64{3}) {
		t.Fatalf("stored after the first Admit: calls %d last %v steps %v; want 1 %v [3]", got.ToolCalls, got.LastAllowed, got.Steps, t1)
	}
	// A read call (no tools/call) with a step seen already: the clock only.
	w2 := win(t2, session.Use{Step: 3, Declared: true})
	r2, _, err := b.Admit(c, "acme", "u1", "agent", t2, l, w2)
	if err != nil || r2.ToolCalls != 1 || !r2.LastAllowed.Equal(t1) || !slices.Equal(r2.Steps, []int64{3}) {
		t.Fatalf("second Admit = calls %d last %v steps %v, %v; want 1 %v [3] (before it)", r2.ToolCalls, r2.LastAllowed, r2.Steps, err, t1)
	}
	// Given back: the clock returns to t1, the step it did not add stays.
	if err := b.GiveBack(c, "acme", "u1", w2, r2); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got.ToolCalls != 1 || !got.LastAllowed.Equal(t1) || !slices.Equal(got.Steps, []int64{3}) || got.Windows.At(m0, "") != 1 {
		t.Fatalf("after giving back the second: calls %d last %v steps %v window %d; want 1 %v [3] 1", got.ToolCalls, got.LastAllowed, got.Steps, got.Windows.At(m0, ""), t1)
	}
	// Two calls counted; the first is given back after the second counted:
	// its tools/call goes, but LastAllowed and its new step are no longer
	// its own alone, and stay (the strict side).
	w3 := win(t3, session.Use{ToolCall: true, Step: 7, Declared: true})
	r3, _, err := b.Admit(c, "acme", "u1", "agent", t3, l, w3)
	if err != nil || r3.ToolCalls != 1 {
		t.Fatalf("third Admit = %+v, %v", r3, err)
	}
	w4 := win(t4, session.Use{ToolCall: true})
	r4, _, err := b.Admit(c, "acme", "u1", "agent", t4, l, w4)
	if err != nil || r4.ToolCalls != 2 || !r4.LastAllowed.Equal(t3) {
		t.Fatalf("fourth Admit = calls %d last %v, %v; want 2 %v", r4.ToolCalls, r4.LastAllowed, err, t3)
	}
	if err := b.GiveBack(c, "acme", "u1", w3, r3); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got.ToolCalls != 2 || !got.LastAllowed.Equal(t4) || !slices.Equal(got.Steps, []int64{3, 7}) {
		t.Fatalf("after giving back the third: calls %d last %v steps %v; want 2 %v [3 7]", got.ToolCalls, got.LastAllowed, got.Steps, t4)
	}
	// The session window holds 2: at a limit of 2 nothing is counted.
	w5 := win(t4, session.Use{ToolCall: true, Step: 9, Declared: true})
	w5.PerSession = 2
	if r, a, err := b.Admit(c, "acme", "u1", "agent", t4, l, w5); err != nil || !a.SessionFull || r.ToolCalls != 2 {
		t.Fatalf("Admit at the window's limit = calls %d, %+v, %v; want SessionFull and nothing counted", r.ToolCalls, a, err)
	}
	if got := stored(); got.ToolCalls != 2 || !slices.Equal(got.Steps, []int64{3, 7}) {
		t.Fatalf("after a refused Admit: calls %d steps %v; want 2 [3 7]", got.ToolCalls, got.Steps)
	}
	// A new step given back while still the Admit's own is removed, and
	// LastAllowed goes back to what it was; an Admit with no Use, given
	// back, leaves the counters.
	w6 := session.Window{Start: m0.Add(time.Minute), PerSession: 3, Use: session.Use{At: t4.Add(time.Minute), ToolCall: true, Step: 11, Declared: true}}
	r6, _, err := b.Admit(c, "acme", "u1", "agent", t4.Add(time.Minute), l, w6)
	if err != nil {
		t.Fatal(err)
	}
	plain := session.Window{Start: m0.Add(time.Minute), PerSession: 3}
	rp, _, err := b.Admit(c, "acme", "u1", "agent", t4.Add(time.Minute), l, plain)
	if err != nil || rp.ToolCalls != 3 {
		t.Fatalf("Admit with no Use = calls %d, %v; want 3 (counters untouched, as stored)", rp.ToolCalls, err)
	}
	if err := b.GiveBack(c, "acme", "u1", plain, rp); err != nil {
		t.Fatal(err)
	}
	if err := b.GiveBack(c, "acme", "u1", w6, r6); err != nil {
		t.Fatal(err)
	}
	if got := stored(); got.ToolCalls != 2 || !got.LastAllowed.Equal(t4) || !slices.Equal(got.Steps, []int64{3, 7}) || got.Windows.Calls != 0 {
		t.Fatalf("after giving back a new step: calls %d last %v steps %v window %d; want 2 %v [3 7] 0", got.ToolCalls, got.LastAllowed, got.Steps, got.Windows.Calls, t4)
	}

	// Concurrent Admits of tools/calls: each sees a distinct count before
	// its own; all given back, none is left.
	if err := b.Create(c, session.Record{ID: "u2", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var (
		mu    sync.Mutex
		seen  = map[int]bool{}
		found [n]session.Record
		wins  [n]session.Window
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			at := t1.Add(time.Duration(i) * time.Millisecond)
			wins[i] = session.Window{Start: m0, PerSession: 100, Use: session.Use{At: at, ToolCall: true}}
			r, a, err := b.Admit(c, "acme", "u2", "agent", at, l, wins[i])
			if err != nil || !a.Counted() {
				t.Errorf("concurrent Admit: %+v, %v", a, err)
				return
			}
			found[i] = r
			mu.Lock()
			seen[r.ToolCalls] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	for i := range n {
		wg.Go(func() {
			if err := b.GiveBack(c, "acme", "u2", wins[i], found[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Errorf("%d concurrent Admits saw %d distinct counts before theirs, want %d", n, len(seen), n)
	}
	got, err := b.Session(c, "acme", "u2", t1, l)
	if err != nil || got.ToolCalls != 0 || got.Windows.Calls != 0 {
		t.Errorf("after %d Admits given back: calls %d window %d, %v; want 0 0", n, got.ToolCalls, got.Windows.Calls, err)
	}
}
