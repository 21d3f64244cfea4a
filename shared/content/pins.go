package content

import (
	"context"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
)

// DefaultPinRefresh is how long the rug-pull check trusts the pins it read
// of one server before it reads them again: an operator's re-pin on any
// gateway instance is in force everywhere within it.
const DefaultPinRefresh = 5 * time.Second

// Audit finding of a definition that changed since it was pinned (at
// audit.AtTool).
const (
	KindRugPull     = "rug-pull"
	RuleChangedSpec = "definition-changed"
)

// pins is the rug-pull check's view of the pin store: the pins of each
// tenant's server, read at most every refresh, and those this process
// made since (trust on first use). It is safe for concurrent use.
type pins struct {
	store   registry.PinStore
	refresh time.Duration
	now     func() time.Time

	mu       sync.Mutex
	servers  map[serverKey]*serverPins
	reported map[reportKey]bool // changed definitions already logged
}

type serverKey struct{ tenant, server string }

type reportKey struct{ tenant, server, tool, hash string }

// serverPins is one server's pins as last read: tool → pinned hash.
type serverPins struct {
	read   time.Time
	failed time.Time // when a re-read last failed; zero after a good one
	hash   map[string]string
}

// check returns the hash tool is pinned at and whether v, its definition
// as listed now, differs from it. A tool without a pin is pinned at v on
// first use, unless v is poisoned (a poisoned definition is never
// trusted; it stays unpinned). err is the store's when the pins could not
// be read and none were read before, or the first-use pin could not be
// written (the last pins read stay in force through an outage); callers
// then go on without the comparison.
func (p *pins) check(ctx context.Context, tenant, server, tool string, v *route.Verdict) (pinned string, changed bool, err error) {
	if p == nil || v.PinHash == "" {
		return "", false, nil
	}
	sp, err := p.server(ctx, tenant, server)
	if err != nil {
		return "", false, err
	}
	p.mu.Lock()
	h, ok := sp.hash[tool]
	p.mu.Unlock()
	if !ok && v.Poisoned() {
		return "", false, nil
	}
	if !ok {
		pin, err := p.store.PinIfAbsent(ctx, registry.Pin{Tenant: tenant, Server: server, Tool: tool, Hash: v.PinHash, Def: v.Canon, By: registry.PinnedOnFirstUse, At: p.now()})
		if err != nil {
			return "", false, err
		}
		h = pin.Hash
		p.mu.Lock()
		sp.hash[tool] = h
		p.mu.Unlock()
	}
	return h, h != v.PinHash, nil
}

// server returns the pins of tenant's server, read again when older than
// refresh (as the kill switch reads its stops: one read per server per
// refresh on the path of the call that finds them old). When a re-read
// fails, the last pins read stay in force, and no re-read is tried for
// another refresh.
func (p *pins) server(ctx context.Context, tenant, server string) (*serverPins, error) {
	k := serverKey{tenant, server}
	now := p.now()
	p.mu.Lock()
	sp := p.servers[k]
	fresh := sp != nil && (now.Sub(sp.read) < p.refresh || !sp.failed.IsZero() && now.Sub(sp.failed) < p.refresh)
	p.mu.Unlock()
	if fresh {
		return sp, nil
	}
	list, err := p.store.Pins(ctx, tenant, server)
	if err != nil {
		if sp == nil {
			return nil, err
		}
		p.mu.Lock()
		sp.failed = now
		p.mu.Unlock()
		return sp, nil
	}
	read := &serverPins{read: now, hash: make(map[string]string, len(list))}
	for _, pin := range list {
		read.hash[pin.Tool] = pin.Hash
	}
	p.mu.Lock()
	p.servers[k] = read
	p.mu.Unlock()
	return read, nil
}

// firstReport reports true the first time a changed definition is met.
func (p *pins) firstReport(tenant, server, tool, hash string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := reportKey{tenant, server, tool, hash}
	if p.reported[k] {
		return false
	}
	if len(p.reported) >= 10_000 {
		clear(p.reported)
	}
	p.reported[k] = true
	return true
}
