package storetest

import (
	"errors"
	"fmt"
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
	if err := b.GiveBack(c, "acme", "w1", other); err != nil {
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
	if err := b.GiveBack(c, "acme", "w1", w); err != nil {
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
	if err := b.GiveBack(c, "acme", "nope", w); err != nil {
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
