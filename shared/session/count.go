package session

import (
	"context"
	"slices"
	"time"
)

// MaxSteps bounds the distinct steps a session record keeps: past it a
// new step is not recorded. The cap never weakens a manifest's max_steps:
// a declared step must be below max_steps, so the distinct steps of a
// session can only reach max_steps once every smaller step was seen, and a
// new one would then be at or past the limit anyway.
const MaxSteps = 1024

// Use is one call to count against a session's manifest counters: a call
// the whole pipeline allowed and the gateway forwarded. ToolCall counts a
// tools/call; Step, when Declared, is its declared step.
type Use struct {
	At       time.Time
	ToolCall bool
	Step     int64
	Declared bool
}

// Counter keeps the manifest counters of a session (policy.Session). Count
// applies u to the session in one conditional write: LastAllowed = u.At
// (of concurrent Counts, one's time), ToolCalls + 1 for a tools/call, and u.Step added to
// Steps when declared, new and fewer than MaxSteps are kept. The session
// must exist (store.ErrNotFound otherwise). Concurrent Counts of one
// session never lose an update.
//
// Reserve and Release make max_tool_calls a bound that holds under
// concurrency: the policy stage reserves a tools/call before the call is
// sent, and gives it back when the call is then not sent. Reserve adds
// one to ToolCalls, in one conditional write, only while ToolCalls is
// below limit (limit > 0), and returns the count before it with ok true;
// at the limit it changes nothing and returns the count with ok false. Of
// any number of concurrent Reserves of one session, at most limit minus
// the count succeed. Release takes back one reserved call (never below
// zero). Both return store.ErrNotFound when the session does not exist.
// A call counted by Reserve is counted by Count with Use.ToolCall false.
type Counter interface {
	Count(ctx context.Context, tenant, id string, u Use) error
	Reserve(ctx context.Context, tenant, id string, limit int) (before int, ok bool, err error)
	Release(ctx context.Context, tenant, id string) error
}

// Counted is r with u applied, by Counter's rule; r is not changed. The
// embedded store applies it under its lock; it is the rule DynamoDB's
// update expression implements.
func Counted(r Record, u Use) Record {
	r.LastAllowed = u.At
	if u.ToolCall {
		r.ToolCalls++
	}
	if u.Declared && !slices.Contains(r.Steps, u.Step) && len(r.Steps) < MaxSteps {
		r.Steps = append(slices.Clip(r.Steps), u.Step)
	}
	return r
}
