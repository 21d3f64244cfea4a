package session

import (
	"context"
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
}

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
// sets LastSeen to now and returns the updated record. A window at its
// limit changes nothing (no window, no LastSeen) and is reported in the
// Admission, with the record as it is. A missing, expired or foreign
// session is store.ErrNotFound. Of any number of concurrent Admits, no
// window passes its limit. Counts of an earlier minute than w.Start are
// dropped; a window of a later minute (another instance's clock ahead)
// is counted in instead.
//
// GiveBack takes back what an Admit of w counted (a call refused after
// it), in one write; a window of another minute than w.Start is left as
// it is (it was dropped), and no count goes below zero. A missing session
// is not an error.
type Admitter interface {
	Admit(ctx context.Context, tenant, id, caller string, now time.Time, l Limits, w Window) (Record, Admission, error)
	GiveBack(ctx context.Context, tenant, id string, w Window) error
}

// Admitted is r with w counted by Admitter's rule, when it is: the
// minute's counts (an earlier minute's dropped; a later stored minute
// counted in), the admission, and r with LastSeen at now when counted. r
// is not changed. The embedded store applies it under its lock; it is the
// rule DynamoDB's update expressions implement.
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
	return r, a
}

// GivenBack is r with an Admit of w taken back by Admitter's rule.
func GivenBack(r Record, w Window) Record {
	if !r.Windows.Start.Equal(w.Start) {
		return r
	}
	next := Windows{Start: r.Windows.Start, Calls: r.Windows.Calls, Tools: make(map[string]int64, len(r.Windows.Tools))}
	for k, v := range r.Windows.Tools {
		next.Tools[k] = v
	}
	if w.PerSession > 0 && next.Calls > 0 {
		next.Calls--
	}
	if w.PerTool > 0 && next.Tools[w.Tool] > 0 {
		next.Tools[w.Tool]--
	}
	r.Windows = next
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
}
