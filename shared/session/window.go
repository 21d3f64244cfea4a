package session

import (
	"context"
	"slices"
	"time"
)

// MaxToolWindows caps the tool windows a session's record keeps for one
// minute: the distinct tools it called in that minute. A call of one more
// tool in that minute is refused as at its tool limit (Admission.ToolsFull):
// the record, written on every call, stays about 1 KB (one DynamoDB write
// unit) whatever the session calls. Windows of earlier minutes are dropped
// by the first count of a new minute, in the same write.
const MaxToolWindows = 32

// Window names the rate windows (shared/ratelimit) a call counts in its own
// session's record: the session window and the tool window of the minute
// that starts at Start. A limit of 0 leaves that window uncounted.
type Window struct {
	Start      time.Time // the window's minute (UTC, whole minute)
	PerSession int64     // RATE_LIMIT_PER_SESSION; 0: not counted
	Tool       string    // the tool window's name (ratelimit.ToolName)
	PerTool    int64     // RATE_LIMIT_PER_TOOL; 0: not counted
	// Use, when its At is not zero, is the call counted in the session's
	// manifest counters (Counter's rule, Counted) by the same Admit, and
	// taken back by the same GiveBack (docs/design/cost.md, decision 8).
	Use Use
}

// Counts reports whether w counts the call in the manifest counters.
func (w Window) Counts() bool { return !w.Use.At.IsZero() }

// On reports whether w counts anything.
func (w Window) On() bool { return w.PerSession > 0 || w.PerTool > 0 }

// Windows are the counts of one minute that a Record carries, read-only to
// its holders: Start is their minute (zero: none counted yet), Calls the
// session window's count and Tools the tool windows' (at most
// MaxToolWindows).
type Windows struct {
	Start time.Time
	Calls int64
	Tools map[string]int64
}

// At is the count of the session window (tool == "") or of tool's window
// in the minute that starts at start.
func (w Windows) At(start time.Time, tool string) int64 {
	if !w.Start.Equal(start) {
		return 0
	}
	if tool == "" {
		return w.Calls
	}
	return w.Tools[tool]
}

// Admission is what Admit found: a window at its limit (nothing was then
// counted, and the record is the session's as it was), or every window
// counted and LastSeen moved.
type Admission struct {
	SessionFull bool // the session window was at PerSession
	ToolFull    bool // the tool window was at PerTool
	ToolsFull   bool // a new tool, and the minute already holds MaxToolWindows others
}

// Counted reports whether Admit counted the call.
func (a Admission) Counted() bool { return !a.SessionFull && !a.ToolFull && !a.ToolsFull }

// Admitter keeps a session's own rate windows in its record, so that a
// tools/call reads its session, touches it and counts it in one write
// (docs/design/cost.md, decision 4).
//
// Admit is Touch and the count of w in one conditional operation: when the
// session exists, belongs to caller and is not expired under l at now,
// and each counted window of w is below its limit, it adds one to each,
// counts w.Use in the manifest counters when w.Counts (Counted: no limit
// applies to them here; the policy stage decides on the counts before
// this call's), sets LastSeen to now and returns the record as the call
// is decided on: LastSeen and the windows as written, the manifest
// counters (LastAllowed, ToolCalls, Steps) as they were before this
// call's count. A window at its limit changes nothing (no window, no
// counter, no LastSeen) and is reported in the Admission, with the record
// as it is. A missing, expired or foreign session is store.ErrNotFound.
// Of any number of concurrent Admits, no window passes its limit, and
// each sees a distinct ToolCalls before its own. Counts of an earlier
// minute than w.Start are dropped; a window of a later minute (another
// instance's clock ahead) is counted in instead.
//
// GiveBack takes back what an Admit of w counted (a call refused after
// it), found being the record that Admit returned, by GivenBack's rule:
// a window of another minute than w.Start is left as it is (it was
// dropped), no count goes below zero, and LastAllowed and the step the
// Admit added are restored only while they are still its own. A missing
// session is not an error.
type Admitter interface {
	Admit(ctx context.Context, tenant, id, caller string, now time.Time, l Limits, w Window) (Record, Admission, error)
	GiveBack(ctx context.Context, tenant, id string, w Window, found Record) error
}

// Admitted is r with w counted by Admitter's rule, when it is: the
// minute's counts (an earlier minute's dropped; a later stored minute
// counted in), the admission, and r with LastSeen at now and w.Use
// counted (Counted) when counted: the record to store (Admit returns
// Found of it). r is not changed. The embedded store applies it under its
// lock; it is the rule DynamoDB's update expressions implement.
func Admitted(r Record, now time.Time, w Window) (Record, Admission) {
	cur := r.Windows
	if cur.Start.Before(w.Start) {
		cur = Windows{Start: w.Start}
	}
	var a Admission
	if w.PerSession > 0 && cur.Calls >= w.PerSession {
		a.SessionFull = true
	}
	if w.PerTool > 0 {
		n, ok := cur.Tools[w.Tool]
		a.ToolFull = n >= w.PerTool
		a.ToolsFull = !ok && len(cur.Tools) >= MaxToolWindows
	}
	if !a.Counted() {
		return r, a
	}
	next := Windows{Start: cur.Start, Calls: cur.Calls}
	if w.PerSession > 0 {
		next.Calls++
	}
	next.Tools = make(map[string]int64, len(cur.Tools)+1)
	for k, v := range cur.Tools {
		next.Tools[k] = v
	}
	if w.PerTool > 0 {
		next.Tools[w.Tool]++
	}
	r.Windows, r.LastSeen = next, now
	if w.Counts() {
		r = Counted(r, w.Use)
	}
	return r, a
}

// Found is the record Admit returns: stored (the record as Admit wrote
// it) with the manifest counters of before (the record before the
// write).
func Found(stored, before Record) Record {
	stored.LastAllowed, stored.ToolCalls, stored.Steps = before.LastAllowed, before.ToolCalls, before.Steps
	return stored
}

// Return is what a GiveBack of w takes back from a stored record: each
// part only while the record still holds it.
type Return struct {
	Calls     bool // the session window: of w's minute, above zero
	Tool      bool // the tool window: of w's minute, above zero
	ToolCalls bool // w.Use was a tools/call, and ToolCalls is above zero
	// LastAllowed: the stored LastAllowed is still w.Use's (no call
	// counted since), so it goes back to found's. Step: and w.Use's step
	// was new in found, so the Admit added it: it is removed.
	LastAllowed bool
	Step        bool
}

// Any reports whether there is anything to take back.
func (g Return) Any() bool { return g.Calls || g.Tool || g.ToolCalls || g.LastAllowed || g.Step }

// ReturnOf is what a GiveBack of w (found: the record its Admit
// returned) takes back from r, the record as stored now.
func ReturnOf(r Record, w Window, found Record) Return {
	var g Return
	if r.Windows.Start.Equal(w.Start) {
		g.Calls = w.PerSession > 0 && r.Windows.Calls > 0
		g.Tool = w.PerTool > 0 && r.Windows.Tools[w.Tool] > 0
	}
	if !w.Counts() {
		return g
	}
	g.ToolCalls = w.Use.ToolCall && r.ToolCalls > 0
	g.LastAllowed = r.LastAllowed.Equal(w.Use.At)
	g.Step = g.LastAllowed && w.Use.Declared && !slices.Contains(found.Steps, w.Use.Step) && slices.Contains(r.Steps, w.Use.Step)
	return g
}

// GivenBack is r with an Admit of w taken back by Admitter's rule (found:
// the record the Admit returned). r is not changed.
func GivenBack(r Record, w Window, found Record) Record {
	g := ReturnOf(r, w, found)
	if g.Calls || g.Tool {
		next := Windows{Start: r.Windows.Start, Calls: r.Windows.Calls, Tools: make(map[string]int64, len(r.Windows.Tools))}
		for k, v := range r.Windows.Tools {
			next.Tools[k] = v
		}
		if g.Calls {
			next.Calls--
		}
		if g.Tool {
			next.Tools[w.Tool]--
		}
		r.Windows = next
	}
	if g.ToolCalls {
		r.ToolCalls--
	}
	if g.LastAllowed {
		r.LastAllowed = found.LastAllowed
	}
	if g.Step {
		r.Steps = slices.DeleteFunc(slices.Clone(r.Steps), func(n int64) bool { return n == w.Use.Step })
	}
	return r
}

// AdmitResult is what the session check's Admit of a call's windows came to,
// as the call carries it to the rate-limit check
// (pipeline.Call.SessionWindows): the windows asked for, what Admit found,
// and its error when the store could not answer.
type AdmitResult struct {
	Window    Window
	Admission Admission
	Err       error
	// Used: Admit counted Window.Use in the session's manifest counters
	// (the call's record holds them as they were before it), so the
	// policy stage neither reserves nor counts the call itself.
	Used bool
}
