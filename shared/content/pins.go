package content

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/route"
)

// DefaultPinRefresh is how long the rug-pull check trusts the pins it read
// of one server before it reads them again: an operator's re-pin on any
// gateway instance is in force everywhere within it.
const DefaultPinRefresh = 5 * time.Second

// Audit findings of the rug-pull check (at audit.AtTool): a definition
// that changed since it was pinned, and a tool held for review (new under
// new_tools "hold", or a suspected rename).
const (
	KindRugPull     = "rug-pull"
	RuleChangedSpec = "definition-changed"
	RuleHeld        = "held-for-review"
)

// Bounds of the pins a process keeps: past either, every server's pins
// are dropped and read again when next needed.
const (
	maxPinServers   = 10_000
	maxPinBytes     = 32 << 20 // of pinned definitions
	maxRenameChecks = 1_000    // rename checks kept per server
)

// pins is the rug-pull check's view of the pin store: the pins of each
// tenant's server (tools, prompts, resources and templates), read at most
// every refresh, and those this process made since (trust on first use).
// It is safe for concurrent use.
type pins struct {
	store   registry.PinStore
	refresh time.Duration
	now     func() time.Time
	// listed reports which tools tenant's server lists now (the rename
	// check's "disappeared"); nil: no rename check.
	listed func(ctx context.Context, tenant, server string) (func(tool string) bool, error)
	// maxServers bounds servers (0: maxPinServers).
	maxServers int

	mu       sync.Mutex
	servers  map[serverKey]*serverPins
	filled   map[string]time.Time // when each tenant's pins were last filled (fill)
	bytes    int                  // of the pinned definitions in servers
	reported map[reportKey]bool   // changed or held definitions already logged
}

type serverKey struct{ tenant, server string }

// entryKey names one entry of a server's lists: its kind
// (registry.PinKinds) and its name there.
type entryKey struct{ kind, name string }

type reportKey struct {
	tenant, server string
	entry          entryKey
	hash           string
}

// serverPins is one server's pins as last read. Its maps are guarded by
// pins.mu.
type serverPins struct {
	read   time.Time
	failed time.Time // when a re-read last failed; zero after a good one
	pins   map[entryKey]registry.Pin
	bytes  int
	// renames are the rename checks of tools without a pin, by tool and
	// hash: the pinned tool each looks like renamed, "" for none. Dropped
	// with the pins at every re-read, so an operator's pin is met within
	// refresh.
	renames map[[2]string]string
}

// pinState is what the rug-pull check says of one definition.
type pinState int

const (
	pinOK      pinState = iota // pinned at this definition, or not judged
	pinChanged                 // pinned at another definition
	pinHeld                    // no pin, and held for review
)

// pinVerdict is the rug-pull check's verdict on one definition.
type pinVerdict struct {
	state       pinState
	pinned      string // the pin's hash (pinChanged)
	renamedFrom string // pinHeld: the pinned tool it looks like, "" for none
	atLimit     bool   // pinHeld: the tenant's pins are at their bounds (registry.ErrPinLimit)
}

// check judges v, the definition of e as listed now, against its pin. A
// pin of the legacy format (registry.PinApproves) that approves v is
// rewritten in the current format (SwapPin) and approves it. A tool
// without a pin is held for review when hold is set (the tenant's
// new_tools "hold") or when it looks like a pinned tool its server no
// longer lists, renamed (registry.RenameOf); otherwise, and for the other
// kinds always, it is pinned at v (trust on first use). A poisoned
// definition is never pinned nor held: the poisoning check answers for
// it. err is the store's when the pins could not be read and none were
// read before, or the first-use pin (or the upgrade) could not be written
// (the last pins read stay in force through an outage); callers then go
// on without the comparison.
func (p *pins) check(ctx context.Context, tenant, server string, e entryKey, v *route.Verdict, hold bool) (pinVerdict, error) {
	if p == nil || v.PinHash == "" {
		return pinVerdict{}, nil
	}
	sp, err := p.server(ctx, tenant, server)
	if err != nil {
		return pinVerdict{}, err
	}
	tool := e.name
	p.mu.Lock()
	pin, ok := sp.pins[e]
	from, checked := sp.renames[[2]string{tool, v.PinHash}]
	p.mu.Unlock()
	if ok {
		same, upgrade := registry.PinApproves(pin.Hash, v.PinHash, v.LegacyHash)
		switch {
		case upgrade:
			return pinVerdict{}, p.upgrade(ctx, sp, e, pin, v)
		case same:
			return pinVerdict{}, nil
		}
		return pinVerdict{state: pinChanged, pinned: pin.Hash}, nil
	}
	if v.Poisoned() {
		return pinVerdict{}, nil
	}
	if e.kind != registry.PinTool {
		hold, checked = false, true // hold and the rename check are for tools
	}
	if !checked {
		from = p.renameOf(ctx, tenant, server, tool, v, sp)
		p.mu.Lock()
		if len(sp.renames) < maxRenameChecks {
			sp.renames[[2]string{tool, v.PinHash}] = from
		}
		p.mu.Unlock()
	}
	if from != "" || hold {
		return pinVerdict{state: pinHeld, renamedFrom: from}, nil
	}
	pin, err = p.store.PinIfAbsent(ctx, registry.Pin{Tenant: tenant, Server: server, Kind: e.kind, Tool: tool, Hash: v.PinHash, Def: v.Canon, By: registry.PinnedOnFirstUse, At: p.now()})
	if errors.Is(err, registry.ErrPinLimit) {
		// No room to pin it: held, never let on unpinned.
		return pinVerdict{state: pinHeld, atLimit: true}, nil
	}
	if err != nil {
		return pinVerdict{}, err
	}
	p.keep(sp, e, pin, false)
	if same, _ := registry.PinApproves(pin.Hash, v.PinHash, v.LegacyHash); !same { // another instance pinned another definition first
		return pinVerdict{state: pinChanged, pinned: pin.Hash}, nil
	}
	return pinVerdict{}, nil
}

// upgrade rewrites old, a legacy pin of e that approves v, in the current
// format: v's hash and canonical form, pinned by the same person at the
// same time (the approval is the same; only its form changes). The
// store keeps an operator's pin made meanwhile (SwapPin), and whichever
// pin is in force then is kept for sp.
func (p *pins) upgrade(ctx context.Context, sp *serverPins, e entryKey, old registry.Pin, v *route.Verdict) error {
	pin := old
	pin.Hash, pin.Def = v.PinHash, v.Canon
	got, err := p.store.SwapPin(ctx, old, pin)
	if err != nil {
		return fmt.Errorf("upgrading the legacy pin of %s: %w", e.name, err)
	}
	p.keep(sp, e, got, true)
	return nil
}

// keep records pin as e's in sp: when e has none there yet, or over the
// one there when replace is set; within the bytes bound.
func (p *pins) keep(sp *serverPins, e entryKey, pin registry.Pin, replace bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, had := sp.pins[e]
	if had && !replace || p.bytes-len(old.Def)+len(pin.Def) > maxPinBytes {
		return
	}
	sp.pins[e] = pin
	sp.bytes += len(pin.Def) - len(old.Def)
	p.bytes += len(pin.Def) - len(old.Def)
}

// renameOf returns the pinned tool of sp that tool, without a pin, looks
// like renamed: one its server no longer lists with a near-identical
// definition (registry.RenameOf); "" for none. Without a way to know what
// the server lists now, or when that cannot be read, there is none.
func (p *pins) renameOf(ctx context.Context, tenant, server, tool string, v *route.Verdict, sp *serverPins) string {
	if p.listed == nil || len(v.Canon) == 0 {
		return ""
	}
	p.mu.Lock()
	list := make([]registry.Pin, 0, len(sp.pins))
	for _, pin := range sp.pins {
		if pin.Kind == registry.PinTool {
			list = append(list, pin)
		}
	}
	p.mu.Unlock()
	if len(list) == 0 {
		return ""
	}
	listed, err := p.listed(ctx, tenant, server)
	if err != nil {
		return ""
	}
	// Map order is random: sort for one answer on a tie.
	sortPins(list)
	from, _, _ := registry.RenameOf(v.Canon, tool, list, listed)
	return from.Tool
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
	read := newServerPins(list, now)
	p.mu.Lock()
	p.install(k, read)
	p.mu.Unlock()
	return read, nil
}

func newServerPins(list []registry.Pin, at time.Time) *serverPins {
	read := &serverPins{read: at, pins: make(map[entryKey]registry.Pin, len(list)), renames: map[[2]string]string{}}
	for _, pin := range list {
		read.pins[entryKey{pin.Kind, pin.Tool}] = pin
		read.bytes += len(pin.Def)
	}
	return read
}

// install keeps read as k's pins, within the bounds; p.mu is held.
func (p *pins) install(k serverKey, read *serverPins) {
	if old := p.servers[k]; old != nil {
		p.bytes -= old.bytes
	}
	if len(p.servers) >= cmp.Or(p.maxServers, maxPinServers) || p.bytes+read.bytes > maxPinBytes {
		clear(p.servers)
		clear(p.filled)
		p.bytes = 0
	}
	if read.bytes > maxPinBytes {
		// One server's definitions over the whole budget: keep the
		// hashes only (no rename check against them).
		for tool, pin := range read.pins {
			pin.Def = nil
			read.pins[tool] = pin
		}
		read.bytes = 0
	}
	p.servers[k] = read
	p.bytes += read.bytes
}

// due reports whether tenant's pins were never filled or were filled
// longer than refresh before now (Check.PinsDue).
func (p *pins) due(tenant string, now time.Time) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.filled[tenant]
	return !ok || now.Sub(at) >= p.refresh
}

// fill takes tenant's pins as read at at by someone else (Check.FillPins):
// with read, list is every pin of the tenant and servers its servers, and
// each server's pins are replaced (unless read later than at); without,
// the pins held are current as of at, and are counted as read then.
func (p *pins) fill(tenant string, servers []string, list []registry.Pin, read bool, at time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !read {
		for _, name := range servers {
			if sp := p.servers[serverKey{tenant, name}]; sp != nil && sp.read.Before(at) {
				sp.read, sp.failed = at, time.Time{}
			}
		}
	} else {
		by := make(map[string][]registry.Pin, len(servers))
		for _, name := range servers {
			by[name] = nil
		}
		for _, pin := range list {
			by[pin.Server] = append(by[pin.Server], pin)
		}
		for name, list := range by {
			k := serverKey{tenant, name}
			if sp := p.servers[k]; sp != nil && sp.read.After(at) {
				continue
			}
			p.install(k, newServerPins(list, at))
		}
	}
	if len(p.filled) >= cmp.Or(p.maxServers, maxPinServers) {
		clear(p.filled)
	}
	p.filled[tenant] = at
}

// firstReport reports true the first time a changed or held definition is
// met.
func (p *pins) firstReport(tenant, server string, e entryKey, hash string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := reportKey{tenant, server, e, hash}
	if p.reported[k] {
		return false
	}
	if len(p.reported) >= 10_000 {
		clear(p.reported)
	}
	p.reported[k] = true
	return true
}

// sortPins sorts pins as the store lists them.
func sortPins(list []registry.Pin) {
	slices.SortFunc(list, registry.ComparePins)
}
