package sessioncheck_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func mintCall(key string, inline bool) *pipeline.Call {
	return &pipeline.Call{Tenant: registry.Tenant{ID: "acme"}, Caller: "agent", KeyID: key, Method: "tools/call", Inline: inline}
}

// One API key opens at most MaxNewSessionsPerMinute sessions a minute; the
// next is refused -32004 with scope new_session and nothing is kept for
// it. Another key, the next minute and calls on an existing session are
// not affected. In process and against a remote store (Inline false: the
// count and the write overlap, and the write is taken back).
func TestNewSessionCeiling(t *testing.T) {
	for _, inline := range []bool{true, false} {
		name := map[bool]string{true: "in process", false: "remote"}[inline]
		t.Run(name, func(t *testing.T) {
			st := memstore.New()
			now := time.Date(2026, 11, 30, 12, 0, 30, 0, time.UTC)
			k := sessioncheck.New(st, session.Limits{Lifetime: time.Hour, Idle: time.Hour}, sessioncheck.Windows{}, func() time.Time { return now }, quiet)
			ctx := context.Background()
			var first string
			for i := range sessioncheck.MaxNewSessionsPerMinute {
				c := mintCall("k1", inline)
				if err := k.Check(ctx, c); err != nil {
					t.Fatalf("session %d: %v", i+1, err)
				}
				if i == 0 {
					first = c.SessionID
				}
			}
			c := mintCall("k1", inline)
			err := k.Check(ctx, c)
			var ref *refusal.Refusal
			if !errors.As(err, &ref) || ref.Code != refusal.CodeRateLimited {
				t.Fatalf("session %d: %v; want -32004", sessioncheck.MaxNewSessionsPerMinute+1, err)
			}
			if ref.Fields["scope"] != sessioncheck.ScopeNewSession || ref.Fields["limit"] != sessioncheck.MaxNewSessionsPerMinute || ref.Fields["retry_after_ms"] != int64(30000) {
				t.Errorf("refusal data = %v", ref.Fields)
			}
			if c.SessionID != "" || c.Session.ID != "" || c.NewSession {
				t.Errorf("refused call carries session %q", c.SessionID)
			}
			if n := st.Usage().Sessions; n != sessioncheck.MaxNewSessionsPerMinute {
				t.Errorf("%d sessions stored; want %d (none for the refused call)", n, sessioncheck.MaxNewSessionsPerMinute)
			}
			// An existing session goes on.
			old := mintCall("k1", inline)
			old.SessionID = first
			if err := k.Check(ctx, old); err != nil {
				t.Errorf("call on an existing session: %v", err)
			}
			// Another key has its own ceiling.
			if err := k.Check(ctx, mintCall("k2", inline)); err != nil {
				t.Errorf("another key: %v", err)
			}
			// The next minute, the key may open sessions again.
			now = now.Add(30 * time.Second)
			if err := k.Check(ctx, mintCall("k1", inline)); err != nil {
				t.Errorf("the next minute: %v", err)
			}
		})
	}
}

// A session id longer than MaxIDBytes is an unknown session, and the call
// carries it cut, for the checks after this one and the audit record.
func TestLongSessionID(t *testing.T) {
	st := memstore.New()
	k := sessioncheck.New(st, session.Limits{}, sessioncheck.Windows{}, time.Now, quiet)
	c := mintCall("k1", true)
	c.SessionID = strings.Repeat("s", 1<<20)
	err := k.Check(context.Background(), c)
	var ref *refusal.Refusal
	if !errors.As(err, &ref) || ref.Word != refusal.SessionError {
		t.Fatalf("err = %v; want the session error", err)
	}
	if want := strings.Repeat("s", sessioncheck.MaxIDBytes) + "…[cut 1048448 bytes]"; c.SessionID != want {
		t.Errorf("call carries a session id of %d bytes; want %d", len(c.SessionID), len(want))
	}
}

// A tools/call reads its session and touches it only once its LastSeen is
// Refresh old, after the call (Finish); a tools/list touches it at once.
// In process and against a remote store.
func TestDecidedCallTouchesWhenStale(t *testing.T) {
	for _, inline := range []bool{true, false} {
		st := memstore.New()
		t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		now := t0
		l := session.NewLimits(time.Hour, 30*time.Minute) // Refresh: a minute
		k := sessioncheck.New(st, l, sessioncheck.Windows{}, func() time.Time { return now }, quiet)
		ctx := context.Background()
		if err := st.Create(ctx, session.Record{ID: "s1", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
			t.Fatal(err)
		}
		lastSeen := func() time.Time {
			r, err := st.Session(ctx, "acme", "s1", now, l)
			if err != nil {
				t.Fatal(err)
			}
			return r.LastSeen
		}
		run := func(method string) {
			t.Helper()
			c := mintCall("k1", inline)
			c.Method, c.SessionID = method, "s1"
			if err := k.Check(ctx, c); err != nil {
				t.Fatalf("%s at +%v: %v", method, now.Sub(t0), err)
			}
			c.Finish(audit.OutcomeAllowed)
		}
		for _, tc := range []struct {
			at     time.Duration
			method string
			want   time.Duration // LastSeen after the call, from t0
		}{
			{59 * time.Second, "tools/call", 0},                                        // fresh: read only
			{time.Minute, "tools/call", time.Minute},                                   // stale: touched
			{time.Minute + 30*time.Second, "tools/call", time.Minute},                  // fresh again
			{time.Minute + 31*time.Second, "tools/list", time.Minute + 31*time.Second}, // not decided: touched
		} {
			now = t0.Add(tc.at)
			run(tc.method)
			if got := lastSeen(); !got.Equal(t0.Add(tc.want)) {
				t.Errorf("inline %v: after %s at +%v LastSeen = +%v, want +%v", inline, tc.method, tc.at, got.Sub(t0), tc.want)
			}
		}
	}
}

// A decided call on an existing session counts its manifest counters in
// the session's one write (session.Window.Use): the call carries the
// counters as they were before it (AdmitResult.Used), and undo gives them
// back; a call that is not decided (tools/list) counts none.
func TestAdmitCountsTheManifestCounters(t *testing.T) {
	st := memstore.New()
	now := time.Date(2026, 11, 30, 12, 0, 30, 0, time.UTC)
	l := session.Limits{Lifetime: time.Hour, Idle: time.Hour}
	k := sessioncheck.New(st, l, sessioncheck.Windows{PerSession: 10, Scope: pipeline.Decided | pipeline.InSession}, func() time.Time { return now }, quiet)
	ctx := context.Background()
	if err := st.Create(ctx, session.Record{ID: "s1", Tenant: "acme", Caller: "agent", Created: now, LastSeen: now}); err != nil {
		t.Fatal(err)
	}
	call := func(method, params string) *pipeline.Call {
		return &pipeline.Call{Tenant: registry.Tenant{ID: "acme"}, Caller: "agent", SessionID: "s1", Method: method, Params: []byte(params), Inline: true}
	}
	stored := func() session.Record {
		t.Helper()
		r, err := st.Session(ctx, "acme", "s1", now, l)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	c := call("tools/call", `{"name":"echo","_meta":{"aegis/step":4}}`)
	decide, undo := k.Prefetch(ctx, c)
	if err := decide(); err != nil || c.SessionWindows == nil || !c.SessionWindows.Used || c.Session.ToolCalls != 0 || !c.Session.LastAllowed.IsZero() {
		t.Fatalf("tools/call: %v, windows %+v, session %+v; want counted, the counters before it", err, c.SessionWindows, c.Session)
	}
	if r := stored(); r.ToolCalls != 1 || !r.LastAllowed.Equal(now) || len(r.Steps) != 1 || r.Steps[0] != 4 {
		t.Fatalf("stored after the tools/call: %+v", r)
	}
	undo()
	if r := stored(); r.ToolCalls != 0 || !r.LastAllowed.IsZero() || len(r.Steps) != 0 || r.Windows.Calls != 0 {
		t.Fatalf("stored after its undo: %+v; want nothing counted", r)
	}
	c = call("tools/list", `{}`)
	if err := k.Check(ctx, c); err != nil || (c.SessionWindows != nil && c.SessionWindows.Used) {
		t.Fatalf("tools/list: %v, %+v; want the manifest counters not counted", err, c.SessionWindows)
	}
	if r := stored(); r.ToolCalls != 0 || !r.LastAllowed.IsZero() {
		t.Fatalf("stored after tools/list: %+v", r)
	}
}

// Peek says whether the session stage, and the session's own rate
// windows, would refuse a call, writing nothing: a session at its window's
// limit is reported full and stays as it was; a session with room is not
// counted in; an unknown session is the session error; a stale session is
// touched after the call (Finish) and a fresh one is not. A call with no
// session still opens one (the answer carries it), with nothing counted in
// its windows. In process and against a remote store.
func TestPeekCountsNothing(t *testing.T) {
	for _, inline := range []bool{true, false} {
		st := memstore.New()
		t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		now := t0
		l := session.NewLimits(time.Hour, 30*time.Minute)
		w := sessioncheck.Windows{PerSession: 2, PerTool: 5, Scope: pipeline.Decided}
		k := sessioncheck.New(st, l, w, func() time.Time { return now }, quiet)
		ctx := context.Background()
		if err := st.Create(ctx, session.Record{ID: "s1", Tenant: "acme", Caller: "agent", Created: t0, LastSeen: t0}); err != nil {
			t.Fatal(err)
		}
		record := func() session.Record {
			r, err := st.Session(ctx, "acme", "s1", now, l)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		peek := func(id string) (*pipeline.Call, error) {
			c := mintCall("k1", inline)
			c.SessionID, c.Tool = id, "echo"
			err := k.Peek(ctx, c)()
			c.Finish(audit.OutcomeRefused)
			return c, err
		}
		c, err := peek("s1")
		if err != nil || c.SessionWindows == nil || c.SessionWindows.Admission.SessionFull || c.Session.ID != "s1" {
			t.Fatalf("inline %v: peek with room: %v, %+v", inline, err, c.SessionWindows)
		}
		if got := record().Windows.At(t0, ""); got != 0 {
			t.Fatalf("inline %v: peek counted %d in the session window", inline, got)
		}
		for range 2 { // fill the window by counting
			c := mintCall("k1", inline)
			c.SessionID, c.Tool = "s1", "echo"
			if err := k.Check(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		before := record()
		now = t0.Add(2 * time.Minute) // stale: a touch after the call, windows of an earlier minute
		if c, err = peek("s1"); err != nil || c.SessionWindows.Admission.SessionFull {
			t.Fatalf("inline %v: a new minute: %v, %+v", inline, err, c.SessionWindows)
		}
		after := record()
		if !after.LastSeen.Equal(now) || after.Windows.Calls != before.Windows.Calls || !after.Windows.Start.Equal(before.Windows.Start) {
			t.Fatalf("inline %v: stale session after a peek: %+v, was %+v; want only LastSeen moved", inline, after, before)
		}
		now = t0.Add(2*time.Minute + time.Second)
		for range 2 {
			c := mintCall("k1", inline)
			c.SessionID, c.Tool = "s1", "echo"
			if err := k.Check(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		before = record()
		if c, err = peek("s1"); err != nil || !c.SessionWindows.Admission.SessionFull {
			t.Fatalf("inline %v: at the limit: %v, %+v; want full", inline, err, c.SessionWindows)
		}
		if after := record(); !after.LastSeen.Equal(before.LastSeen) || after.Windows.Calls != 2 {
			t.Fatalf("inline %v: a fresh session at its limit after a peek: %+v", inline, after)
		}
		var ref *refusal.Refusal
		if _, err := peek("unknown"); !errors.As(err, &ref) || ref.Word != refusal.SessionError {
			t.Fatalf("inline %v: unknown session: %v", inline, err)
		}
		sessions := st.Usage().Sessions
		c, err = peek("")
		if err != nil || !c.NewSession || c.Session.ID == "" || st.Usage().Sessions != sessions+1 {
			t.Fatalf("inline %v: no session: %v, %+v", inline, err, c.Session)
		}
		minted, err := st.Session(ctx, "acme", c.SessionID, now, l)
		if err != nil || minted.Windows.Calls != 0 {
			t.Fatalf("inline %v: the opened session: %+v, %v; want nothing counted", inline, minted.Windows, err)
		}
	}
}
