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
type Counter interface {
	Count(ctx context.Context, tenant, id string, u Use) error
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
