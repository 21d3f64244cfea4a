// Package killswitch is the pipeline's "killswitch" check (-32062): an
// operator stops a tool, or a whole server, for a tenant, and every call to
// it is refused whatever the policy says, on every instance within one
// refresh period. The same decision hides the tool from tools/list
// (pipeline.Filter).
//
// A stop names a tool by its server and its upstream name, never by the
// name a catalog exposes it under ("a.echo" when two servers list echo):
// exposed names change as servers come and go, the tool a call was routed
// to does not. Whoever stores a stop resolves the name the operator gave
// to that pair when the stop is made (shared/admin, with the gateway's
// catalog), and refuses a name that matches no tool (Near lists what the
// operator may have meant); docs/admin.md gives the rules.
//
// Each instance caches a tenant's stops and re-reads them from the Store when
// the cached copy is older than the refresh period (KILL_SWITCH_REFRESH_SECS),
// so a stop or resume written at time T is in force everywhere by
// T + refresh. When the store cannot be reached the last known stops stay in
// force (logged); if a tenant's stops were never loaded, the check fails
// closed with -32603 rather than guess.
package killswitch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
)

// Stop is one kill switch: Server is the server's name, Tool the tool's
// upstream name (as its server lists it); Tool "" stops the whole server.
type Stop struct {
	Tenant string    `json:"tenant"`
	Server string    `json:"server"`
	Tool   string    `json:"tool,omitempty"`
	Reason string    `json:"reason,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
}

// Reader is what the check needs: every stop of a tenant.
type Reader interface {
	Stops(ctx context.Context, tenant string) ([]Stop, error)
}

// Store is what operators need besides Reader. PutStop stores (or replaces)
// the stop for its tenant, server and tool; DeleteStop resumes it (absent is
// not an error). Last writer wins: no race between operators matters.
type Store interface {
	Reader
	PutStop(ctx context.Context, s Stop) error
	DeleteStop(ctx context.Context, tenant, server, tool string) error
}

// Check is the kill-switch check and filter. It is safe for concurrent use.
type Check struct {
	store   Reader
	refresh time.Duration
	now     func() time.Time
	log     *slog.Logger

	mu      sync.Mutex
	tenants map[string]*entry
}

type entry struct {
	mu       sync.Mutex // held while (re)loading
	loaded   bool
	fetched  time.Time // when stops were read
	failedAt time.Time // last failed reload (zero if none since)
	stops    map[[2]string]bool
}

// New returns the check. refresh is KillSwitchRefresh (<= 0 means re-read on
// every decision); now and log default to time.Now and slog.Default.
func New(st Reader, refresh time.Duration, now func() time.Time, log *slog.Logger) *Check {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Check{store: st, refresh: refresh, now: now, log: log, tenants: map[string]*entry{}}
}

// Check implements pipeline.Check: tools/call to a stopped tool or server is
// refused with -32062.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	if c.Server == nil {
		return nil
	}
	tool := c.UpstreamTool
	if tool == "" {
		tool = c.Tool
	}
	stops, err := k.load(ctx, c.Tenant.ID)
	if err != nil {
		return err // never loaded and unreadable now: the stage fails closed
	}
	switch {
	case stops[[2]string{c.Server.Name, ""}]:
		return refusal.ServerStopped(c.Server.Name)
	case stops[[2]string{c.Server.Name, tool}]:
		return refusal.Stopped(c.Tool, c.Server.Name)
	}
	return nil
}

// Visible implements pipeline.Filter with the same decision as Check; a
// tenant whose stops cannot be known shows no tools.
func (k *Check) Visible(ctx context.Context, c *pipeline.Call, server *registry.Server, tool string) bool {
	stopped, err := k.Stopped(ctx, c.Tenant.ID, server.Name, tool)
	return err == nil && !stopped
}

// Stopped is the one decision: is tool (or its whole server) stopped for
// tenant? It errors only when the tenant's stops were never loaded and cannot
// be read now.
func (k *Check) Stopped(ctx context.Context, tenant, server, tool string) (bool, error) {
	stops, err := k.load(ctx, tenant)
	if err != nil {
		return false, err
	}
	return stops[[2]string{server, ""}] || stops[[2]string{server, tool}], nil
}

func (k *Check) load(ctx context.Context, tenant string) (map[[2]string]bool, error) {
	e := k.entry(tenant)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := k.now()
	if e.loaded && now.Sub(e.fetched) < k.refresh {
		return e.stops, nil
	}
	// After a failed reload, serve the last known state for a while rather
	// than put a failing round trip on every call.
	if e.loaded && !e.failedAt.IsZero() && now.Sub(e.failedAt) < k.retryAfterFailure() {
		return e.stops, nil
	}
	list, err := k.store.Stops(ctx, tenant)
	if err != nil {
		if !e.loaded {
			return nil, err
		}
		e.failedAt = now
		k.log.WarnContext(ctx, "kill switch store unavailable; last known stops stay in force",
			"tenant", tenant, "age", now.Sub(e.fetched).String(), "err", err)
		return e.stops, nil
	}
	m := stopSet(list)
	e.stops, e.loaded, e.fetched, e.failedAt = m, true, now, time.Time{}
	return m, nil
}

// Due reports whether tenant's stops were never read or are older than
// the refresh period at now: the next decision would read them.
func (k *Check) Due(tenant string, now time.Time) bool {
	e := k.entry(tenant)
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.loaded || now.Sub(e.fetched) >= k.refresh
}

// Fill sets tenant's stops to list, read from the store at at by someone
// else (shared/tenantview reads them with the tenant's other state), unless
// the copy held was read later. The refresh period counts from at.
func (k *Check) Fill(tenant string, list []Stop, at time.Time) {
	e := k.entry(tenant)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loaded && e.fetched.After(at) {
		return
	}
	e.stops, e.loaded, e.fetched, e.failedAt = stopSet(list), true, at, time.Time{}
}

func stopSet(list []Stop) map[[2]string]bool {
	m := make(map[[2]string]bool, len(list))
	for _, s := range list {
		m[[2]string{s.Server, s.Tool}] = true
	}
	return m
}

// entry returns tenant's entry, made empty when there is none.
func (k *Check) entry(tenant string) *entry {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.tenants[tenant]
	if e == nil {
		e = &entry{}
		k.tenants[tenant] = e
	}
	return e
}

func (k *Check) retryAfterFailure() time.Duration {
	if k.refresh > 0 {
		return k.refresh
	}
	return time.Second
}

var (
	_ pipeline.Check  = (*Check)(nil)
	_ pipeline.Filter = (*Check)(nil)
)
