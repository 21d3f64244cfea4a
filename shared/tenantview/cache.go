package tenantview

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// Part is a cache that keeps a part of tenants' views (the kill switch's
// stops, the rug-pull check's pins) with its own lifetime.
type Part interface {
	// Due reports whether the part's copy of tenant is absent or older
	// than the part's lifetime at now.
	Due(tenant string, now time.Time) bool
	// Fill hands the part tenant's view as read at at. A view without
	// pins (PinsRead false) says that the tenant's pins are as they were
	// when the part was last filled with pins, plus the writes made
	// through the Cache since: the part keeps its pins and counts them as
	// read at at.
	Fill(tenant string, v *View, at time.Time)
}

// Store is what the Cache reads and writes through: keys and views, and
// the pins (whose writes it counts, see Cache.PinIfAbsent).
type Store interface {
	registry.Reader
	Reader
	registry.PinStore
}

// Options configure NewCache.
type Options struct {
	// TTL is how long a key, a tenant's record and its servers are used
	// as read (the registry cache's lifetime); MaxStale how long past it
	// the last ones read are served while the store cannot be read.
	TTL, MaxStale time.Duration
	Now           func() time.Time // nil: time.Now
	// MaxTenants bounds the tenants kept (0: DefaultMaxTenants); past it
	// every tenant is dropped and read again when next used.
	MaxTenants int
}

// DefaultMaxTenants bounds the tenants a Cache keeps.
const DefaultMaxTenants = 10_000

// Cache is a registry.Reader and registry.PinStore over a Store that reads
// each tenant's view in one TenantView call whenever its record and
// servers are older than TTL or any Part of it is due, and fills every
// Part with it. A key that is read again because it is older than TTL,
// of a tenant whose view is due, is read in parallel with the view (a key
// never moves to another tenant): one round trip for both. It is safe
// for concurrent use.
type Cache struct {
	s     Store
	keys  *registry.Cache
	o     Options
	parts []Part

	mu      sync.Mutex
	tenants map[string]*entry
}

// entry is one tenant's view. mu is held while the view is read (one
// read at a time per tenant); the fields below it are guarded by the
// Cache's mu.
type entry struct {
	mu sync.Mutex

	view   View // without pins
	at     time.Time
	loaded bool
	failed time.Time // when a read last failed; zero after a good one

	// The pins the parts hold are those of version pinVersion (when
	// pinsKnown) plus mine writes made through the Cache since; writes
	// counts the writes begun, done those finished, so that a read made
	// while one was in flight is not taken for current.
	pinsKnown   bool
	pinVersion  int64
	mine        int64
	writes      int64
	done        int64
	unsureWrite bool // a write failed without saying whether it landed
}

// NewCache returns a cache over s that fills parts.
func NewCache(s Store, o Options, parts ...Part) *Cache {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxTenants <= 0 {
		o.MaxTenants = DefaultMaxTenants
	}
	return &Cache{s: s, keys: registry.NewCache(s, o.TTL, o.MaxStale, o.Now), o: o, parts: parts, tenants: map[string]*entry{}}
}

// AddPart adds p to the parts the cache fills; it is for wiring, before
// the cache is used.
func (c *Cache) AddPart(p Part) { c.parts = append(c.parts, p) }

func (c *Cache) entry(tenant string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.tenants[tenant]
	if e == nil {
		if len(c.tenants) >= c.o.MaxTenants {
			clear(c.tenants)
		}
		e = &entry{}
		c.tenants[tenant] = e
	}
	return e
}

// due reports whether tenant's view is to be read again at now.
func (c *Cache) due(tenant string, e *entry, now time.Time) bool {
	c.mu.Lock()
	stale := !e.loaded || now.Sub(e.at) >= c.o.TTL
	resting := !e.failed.IsZero() && now.Sub(e.failed) < c.retryAfterFailure()
	c.mu.Unlock()
	if resting {
		return false
	}
	if stale {
		return true
	}
	for _, p := range c.parts {
		if p.Due(tenant, now) {
			return true
		}
	}
	return false
}

// retryAfterFailure is how long a failed read is not tried again (the
// parts read for themselves meanwhile, as they would without the Cache).
func (c *Cache) retryAfterFailure() time.Duration { return time.Second }

// refresh reads tenant's view when it is due and fills the parts.
func (c *Cache) refresh(ctx context.Context, tenant string) {
	e := c.entry(tenant)
	e.mu.Lock()
	defer e.mu.Unlock()
	now := c.o.Now()
	if !c.due(tenant, e, now) {
		return
	}
	v, err := c.read(ctx, tenant, e)
	c.mu.Lock()
	if err != nil {
		e.failed = now
		c.mu.Unlock()
		return
	}
	e.failed = time.Time{}
	kept := v
	kept.Pins = nil // the parts keep them; the entry needs only the tally
	e.view, e.at, e.loaded = kept, now, true
	c.mu.Unlock()
	if v.Found {
		for _, p := range c.parts {
			p.Fill(tenant, &v, now)
		}
	}
}

// read reads tenant's view: without its pins when the parts hold them
// and the tally says they are unchanged, else with them (a second read
// when the first showed a change).
func (c *Cache) read(ctx context.Context, tenant string, e *entry) (View, error) {
	c.mu.Lock()
	withPins := !e.pinsKnown || e.unsureWrite
	want, started, quiet := e.pinVersion+e.mine, e.writes, e.writes == e.done
	c.mu.Unlock()
	v, err := c.s.TenantView(ctx, tenant, withPins)
	if err != nil || !v.Found {
		return v, err
	}
	c.mu.Lock()
	current := quiet && e.writes == started && v.Tally.Version == want
	c.mu.Unlock()
	if !withPins && !current {
		c.mu.Lock()
		started, quiet = e.writes, e.writes == e.done
		c.mu.Unlock()
		if v, err = c.s.TenantView(ctx, tenant, true); err != nil || !v.Found {
			return v, err
		}
	}
	if v.PinsRead {
		c.mu.Lock()
		// Pins read while a write of this process was in flight may or
		// may not hold it: read them again next time.
		e.pinsKnown = quiet && e.writes == started
		e.pinVersion, e.mine, e.unsureWrite = v.Tally.Version, 0, false
		c.mu.Unlock()
	}
	return v, nil
}

// view returns tenant's view, read again when due.
func (c *Cache) view(ctx context.Context, tenant string) (View, error) {
	c.refresh(ctx, tenant)
	e := c.entry(tenant)
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !e.loaded:
		return View{}, store.ErrUnavailable
	case e.failed.IsZero() || now.Sub(e.at) < c.o.TTL+c.o.MaxStale:
		return e.view, nil
	}
	return View{}, store.ErrUnavailable
}

// Key implements registry.Reader. A key older than TTL whose tenant's view
// is due is read in parallel with the view.
func (c *Cache) Key(ctx context.Context, id string) (registry.Key, error) {
	if c.keys.KeyFresh(id) {
		return c.keys.Key(ctx, id)
	}
	tenant, ok := c.keys.KnownTenant(id)
	if !ok {
		return c.keys.Key(ctx, id)
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.refresh(ctx, tenant) })
	k, err := c.keys.Key(ctx, id)
	wg.Wait()
	return k, err
}

// Tenant implements registry.Reader.
func (c *Cache) Tenant(ctx context.Context, id string) (registry.Tenant, error) {
	v, err := c.view(ctx, id)
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return c.s.Tenant(ctx, id) // says why, or finds it after all
	case err != nil:
		return registry.Tenant{}, err
	case !v.Found:
		return registry.Tenant{}, store.ErrNotFound
	}
	return v.Tenant, nil
}

// Servers implements registry.Reader.
func (c *Cache) Servers(ctx context.Context, tenant string) ([]registry.Server, error) {
	v, err := c.view(ctx, tenant)
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return c.s.Servers(ctx, tenant)
	case err != nil:
		return nil, err
	}
	return v.Servers, nil
}

// Pins implements registry.PinStore: read from the store (a part that
// reads its own pins, when it was not filled).
func (c *Cache) Pins(ctx context.Context, tenant, server string) ([]registry.Pin, error) {
	return c.s.Pins(ctx, tenant, server)
}

// PinTally implements registry.PinStore.
func (c *Cache) PinTally(ctx context.Context, tenant string) (registry.PinTally, error) {
	return c.s.PinTally(ctx, tenant)
}

// counted runs one pin write of tenant, counting it: landed reports
// whether it changed the pins (and so moved the tally's version on).
func (c *Cache) counted(tenant string, write func() (landed bool, err error)) error {
	e := c.entry(tenant)
	c.mu.Lock()
	e.writes++
	c.mu.Unlock()
	landed, err := write()
	c.mu.Lock()
	defer c.mu.Unlock()
	e.done++
	switch {
	case landed:
		e.mine++
	case err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound):
		e.unsureWrite = true // it may have landed: read the pins again
	}
	return err
}

// PinIfAbsent implements registry.PinStore.
func (c *Cache) PinIfAbsent(ctx context.Context, p registry.Pin) (registry.Pin, error) {
	var got registry.Pin
	err := c.counted(p.Tenant, func() (bool, error) {
		var err error
		got, err = c.s.PinIfAbsent(ctx, p)
		return err == nil && samePin(got, p), err
	})
	return got, err
}

// SwapPin implements registry.PinStore.
func (c *Cache) SwapPin(ctx context.Context, old, p registry.Pin) (registry.Pin, error) {
	var got registry.Pin
	err := c.counted(p.Tenant, func() (bool, error) {
		var err error
		got, err = c.s.SwapPin(ctx, old, p)
		return err == nil && samePin(got, p), err
	})
	return got, err
}

// PutPin implements registry.PinStore.
func (c *Cache) PutPin(ctx context.Context, p registry.Pin) error {
	return c.counted(p.Tenant, func() (bool, error) {
		err := c.s.PutPin(ctx, p)
		return err == nil, err
	})
}

// DeletePin implements registry.PinStore.
func (c *Cache) DeletePin(ctx context.Context, tenant, server, kind, name string) error {
	return c.counted(tenant, func() (bool, error) {
		err := c.s.DeletePin(ctx, tenant, server, kind, name)
		return err == nil, err
	})
}

// samePin reports whether got is p as written (not another writer's pin
// of the same entry).
func samePin(got, p registry.Pin) bool {
	return got.Hash == p.Hash && got.By == p.By && got.At.Equal(p.At) && string(got.Def) == string(p.Def)
}

var (
	_ registry.Reader   = (*Cache)(nil)
	_ registry.PinStore = (*Cache)(nil)
)
