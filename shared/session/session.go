// Package session keeps gateway sessions: one per X-Session-ID (and the
// Mcp-Session-Id of /mcp, which is the same id), with the upstream servers'
// own session ids, so any Lambda instance can continue any session.
package session

import (
	"context"
	"time"
)

// Record is one gateway session. A Record a Store returns may share its
// Upstream map with the store: read it, never write to it (SetUpstream
// changes it).
type Record struct {
	ID       string            `json:"id"`
	Tenant   string            `json:"tenant"`
	Caller   string            `json:"caller"`
	Protocol string            `json:"protocol,omitempty"` // MCP protocol version negotiated on /mcp
	Created  time.Time         `json:"created"`
	LastSeen time.Time         `json:"last_seen"`
	Upstream map[string]string `json:"upstream,omitempty"` // server name → upstream Mcp-Session-Id

	// The session manifest's counters (count.go): what the calls the
	// whole pipeline allowed and forwarded have spent. LastAllowed is the
	// last such call (zero: none yet); ToolCalls counts the tools/calls;
	// Steps are the distinct declared steps, at most MaxSteps.
	LastAllowed time.Time `json:"last_allowed,omitzero"`
	ToolCalls   int       `json:"tool_calls,omitempty"`
	Steps       []int64   `json:"steps,omitempty"`

	// Windows are the session's own rate windows of its current minute
	// (window.go), counted by Admitter.Admit; not part of the record's
	// JSON.
	Windows Windows `json:"-"`

	// Capabilities are, on a 2026-07-28 request's record (never stored),
	// the capabilities its _meta declares, as the gateway relays them
	// (upstream.Caps.JSON). A stored session's set is not here: its id
	// carries it (sessioncheck.Caps), because routing needs it before the
	// record is read. Sessions stored by earlier versions may hold their
	// client's whole object; nothing reads it.
	Capabilities string `json:"capabilities,omitempty"`

	// Manifest is the session's own manifest (policy.Manifest as JSON, at
	// most policy.MaxSessionManifestBytes; "" when none), declared by the
	// request that opened the session in _meta["aegis/manifest"]. It can
	// only narrow the tenant's and the API key's (policy.Merge).
	Manifest string `json:"manifest,omitempty"`
}

// Limits are the two session clocks, and how fresh a call keeps LastSeen.
type Limits struct {
	Lifetime time.Duration // from Created
	Idle     time.Duration // from LastSeen
	// Refresh: a call that reads its session (Store.Session) touches it
	// only once its LastSeen is at least Refresh old (Stale). Between two
	// touches a session's stored LastSeen lags its last call by less than
	// Refresh, so an idle session expires up to Refresh before Idle has
	// passed since its last call, never after (docs/design/cost.md).
	Refresh time.Duration
}

// MaxRefresh caps Limits.Refresh as NewLimits sets it.
const MaxRefresh = time.Minute

// NewLimits returns the session clocks with the Refresh every gateway
// uses: a tenth of the idle clock, at most MaxRefresh (MaxRefresh when
// there is no idle clock: LastSeen then only moves the item's TTL).
func NewLimits(lifetime, idle time.Duration) Limits {
	r := MaxRefresh
	if idle > 0 {
		r = min(idle/10, MaxRefresh)
	}
	return Limits{Lifetime: lifetime, Idle: idle, Refresh: r}
}

// Expired reports whether r is past either clock at now.
func (l Limits) Expired(r Record, now time.Time) bool {
	return (l.Lifetime > 0 && !now.Before(r.Created.Add(l.Lifetime))) ||
		(l.Idle > 0 && !now.Before(r.LastSeen.Add(l.Idle)))
}

// Stale reports whether r's LastSeen is at least Refresh old at now: a
// call that read r then touches it.
func (l Limits) Stale(r Record, now time.Time) bool {
	return !now.Before(r.LastSeen.Add(l.Refresh))
}

// Store keeps session records. Implementations check expiry inside the
// operation (a DynamoDB condition), never relying on TTL deletion.
type Store interface {
	// Create stores a new record; store.ErrConflict if the id exists.
	Create(ctx context.Context, r Record) error
	// Session returns the record if the session exists and is not
	// expired under l at now; store.ErrNotFound otherwise. It writes
	// nothing (on DynamoDB: one consistent read). A tools/call reads its
	// session so, and touches it only when l.Stale (sessioncheck).
	Session(ctx context.Context, tenant, id string, now time.Time, l Limits) (Record, error)
	// Touch sets LastSeen to now if the session exists and is not expired
	// under l at now, and returns the updated record; store.ErrNotFound
	// otherwise.
	Touch(ctx context.Context, tenant, id string, now time.Time, l Limits) (Record, error)
	// SetUpstream records the upstream session id for server ("" removes it).
	SetUpstream(ctx context.Context, tenant, id, server, upstreamID string) error
	// Delete ends a session; deleting an absent one is not an error.
	Delete(ctx context.Context, tenant, id string) error
}
