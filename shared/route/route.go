// Package route knows which tools each tenant has and on which server: the
// tool catalog (each server's tools/list, cached per process and per
// client capability set) and the pipeline's "route" slot, which answers
// -32601 for a tool the tenant does not have. A tenant's catalog is built
// only from that tenant's servers, so another tenant's tool is unknown,
// never forbidden; and a server's list is the one it gives a client of the
// call's capabilities (upstream.Caps), so a tool a server offers only to
// clients that can be asked (sampling, elicitation, roots) is listed and
// routed for those clients, and unknown to the others.
package route

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/aegis-gw/aegis/shared/pipeline"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/sessioncheck"
	"github.com/aegis-gw/aegis/shared/upstream"
)

// Tool is one tool definition as its server lists it.
type Tool struct {
	Name string
	Def  json.RawMessage // the exact definition object from tools/list
}

// Lister fetches a server's whole tool list (all pages), as the server
// lists it to a client that declared caps: the listing session announces
// caps (upstream.Caps.JSON) as a call's session of such a client does.
type Lister interface {
	ListTools(ctx context.Context, srv *registry.Server, caps upstream.Caps) ([]Tool, error)
}

// Entry is a tool as a tenant sees it.
type Entry struct {
	Name   string // exposed name: the tool's own, or "server.tool" on a collision (see expose)
	Server *registry.Server
	Tool   Tool
}

// Catalog caches each server's tool list for TTL, one list per client
// capability set that asked for it (at most MaxSets per server, at most
// MaxBytes of definitions in all, see store). Safe for concurrent use.
type Catalog struct {
	reg    registry.Reader
	lister Lister
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[serverKey]cached
	views   map[viewKey]*view
	listing map[serverKey]*listing // in flight, one per server and set
	bytes   int                    // of the definitions in entries
	gen     uint64                 // lists stored so far: each list's own number
}

// Bounds of a Catalog. A server lists one catalog per capability set that
// clients declared (upstream.Caps has 40, real clients a handful); past
// MaxSets sets of one server, or MaxBytes of definitions in all, the list
// fetched longest ago is dropped (another set's, never the one being
// stored), and is listed again when next asked for. One list larger than
// MaxBytes on its own is still kept: it is the only one.
const (
	MaxSets  = 8
	MaxBytes = 32 << 20
	// maxViews bounds the built namespaces kept (one per tenant, endpoint
	// and set): past it they are all dropped, and rebuilt when asked for.
	maxViews = 4096
)

type serverKey struct {
	tenant, name, url string
	caps              upstream.Caps
	// caller is set for a server with auth: oauth only: it is listed with
	// each caller's own connection, and one caller's list (or failure) is
	// never served to another.
	caller string
}

type viewKey struct {
	tenant, only string
	caps         upstream.Caps
	caller       string // set when a server of the view has auth: oauth
}

type callerKey struct{}

// WithCaller returns ctx naming the caller a catalog lookup is for: the
// lists of servers with auth: oauth are kept per caller (listed with that
// caller's connection, upstream.WithTokens).
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

func callerOf(ctx context.Context) string {
	c, _ := ctx.Value(callerKey{}).(string)
	return c
}

// view is a built tool namespace, reused while its servers and their tool
// lists are unchanged (sig), so a call resolves its tool with one map
// lookup instead of rebuilding the namespace.
type view struct {
	sig     uint64
	entries []Entry
	index   map[string]int // exposed name → entries index
}

type cached struct {
	tools   []Tool
	bytes   int       // of the tools' definitions
	gen     uint64    // which list this is (Catalog.gen when stored): a view's signature
	fetched time.Time // when tools were listed
	// failed is when the last re-list failed, err its error: until
	// MinRefresh has passed, nobody lists again, and the last good tools
	// (if any) keep being served.
	failed time.Time
	err    error
}

// MinRefresh bounds how often a miss may refetch one server's list.
const MinRefresh = 5 * time.Second

// NewCatalog returns a catalog over reg, fetching with lister.
func NewCatalog(reg registry.Reader, lister Lister, ttl time.Duration, now func() time.Time) *Catalog {
	return &Catalog{reg: reg, lister: lister, ttl: ttl, now: now, entries: map[serverKey]cached{}, views: map[viewKey]*view{}, listing: map[serverKey]*listing{}}
}

func cacheKey(s *registry.Server, caps upstream.Caps, caller string) serverKey {
	if !s.PerCaller() {
		caller = ""
	}
	return serverKey{s.Tenant, s.Name, s.URL, caps, caller}
}

// tools returns srv's tools, from cache unless older than maxAge. When a
// re-list fails, the last good list is kept and served (stale beats none:
// an upstream that cannot list its tools is down, and the breaker, not
// routing, is the check that answers for a down upstream), and no listing
// is tried again for MinRefresh, so a dead upstream is not hit by every
// call. With no good list yet, the failure is returned for MinRefresh.
// One listing per server runs at a time: while it runs, other callers get
// the last good list, or wait for it when there is none. The listing does
// not die with the caller that started it (it is bounded by the upstream
// client's own deadline), so a client giving up is never taken for the
// server failing.
func (c *Catalog) tools(ctx context.Context, srv *registry.Server, caps upstream.Caps, maxAge time.Duration) ([]Tool, error) {
	k := cacheKey(srv, caps, callerOf(ctx))
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[k]
	switch {
	case ok && e.tools != nil && now.Sub(e.fetched) < maxAge:
		c.mu.Unlock()
		return e.tools, nil
	case ok && !e.failed.IsZero() && now.Sub(e.failed) < MinRefresh:
		c.mu.Unlock()
		if e.tools != nil {
			return e.tools, nil
		}
		return nil, e.err
	}
	f := c.listing[k]
	if f != nil && e.tools != nil {
		c.mu.Unlock()
		return e.tools, nil // someone is re-listing; the last list will do
	}
	if f == nil {
		f = &listing{done: make(chan struct{})}
		c.listing[k] = f
		go c.list(context.WithoutCancel(ctx), srv, k, f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.tools, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// listing is one listing of a server's tools in flight.
type listing struct {
	done  chan struct{}
	tools []Tool // set before done is closed
	err   error
}

// list lists srv's tools for f and records the outcome (see tools).
func (c *Catalog) list(ctx context.Context, srv *registry.Server, k serverKey, f *listing) {
	tools, err := c.lister.ListTools(ctx, srv, k.caps)
	c.mu.Lock()
	defer close(f.done)
	defer c.mu.Unlock()
	delete(c.listing, k)
	e := c.entries[k]
	var te *upstream.TokenError
	if errors.As(err, &te) {
		// The caller has no working connection: nothing is wrong with
		// the server, and the caller may connect a moment later.
		f.tools, f.err = e.tools, nil
		if e.tools == nil {
			f.err = err
		}
		return
	}
	if err != nil {
		e.failed, e.err = c.now(), err
		c.entries[k] = e
		f.tools, f.err = e.tools, nil
		if e.tools == nil {
			f.err = err
		}
		return
	}
	if tools == nil {
		tools = []Tool{}
	}
	c.store(k, cached{tools: tools, fetched: c.now()})
	f.tools = tools
}

// store caches e as k's list, within MaxSets and MaxBytes (see them):
// other lists are dropped, fetched longest ago first, until both hold.
// c.mu is held.
func (c *Catalog) store(k serverKey, e cached) {
	for _, t := range e.tools {
		e.bytes += len(t.Def) + len(t.Name)
	}
	c.bytes += e.bytes - c.entries[k].bytes
	c.gen++
	e.gen = c.gen
	c.entries[k] = e
	for {
		sets := 0
		var oldest, oldestSame *serverKey
		for ok, oe := range c.entries {
			if ok == k {
				continue
			}
			if ok.tenant == k.tenant && ok.name == k.name && ok.url == k.url {
				sets++
				if oldestSame == nil || oe.fetched.Before(c.entries[*oldestSame].fetched) {
					oldestSame = &ok
				}
			}
			if oldest == nil || oe.fetched.Before(c.entries[*oldest].fetched) {
				oldest = &ok
			}
		}
		switch {
		case sets+1 > MaxSets:
			c.drop(*oldestSame)
		case c.bytes > MaxBytes && oldest != nil:
			c.drop(*oldest)
		default:
			return
		}
	}
}

// drop forgets k's list. c.mu is held.
func (c *Catalog) drop(k serverKey) {
	c.bytes -= c.entries[k].bytes
	delete(c.entries, k)
}

// ServerError is a server whose tools could not be listed.
type ServerError struct {
	Server string
	Err    error
}

func (e *ServerError) Error() string { return fmt.Sprintf("server %s: %v", e.Server, e.Err) }
func (e *ServerError) Unwrap() error { return e.Err }

// ViewFor lists the tools of tenant as its servers list them to a client
// that declared caps, over all servers or only the one named only. Names
// colliding across servers, and names that are another tool's
// "server.tool", are exposed as "server.tool" (see expose); every exposed
// name is one tool. Servers that cannot be listed are skipped and
// reported in errs.
func (c *Catalog) ViewFor(ctx context.Context, tenant, only string, caps upstream.Caps) (out []Entry, errs []error, err error) {
	v, errs, err := c.built(ctx, tenant, only, caps, c.ttl)
	if v == nil {
		return nil, errs, err
	}
	return v.entries, errs, nil
}

// View is ViewFor a client that declared no capabilities: the tools every
// client is offered, the names the admin API resolves kill switches and
// pins in.
func (c *Catalog) View(ctx context.Context, tenant, only string) (out []Entry, errs []error, err error) {
	return c.ViewFor(ctx, tenant, only, 0)
}

// built returns the namespace of tenant (or of its server only) for caps,
// reusing the last one built when no server and no tool list changed
// since.
func (c *Catalog) built(ctx context.Context, tenant, only string, caps upstream.Caps, maxAge time.Duration) (*view, []error, error) {
	servers, err := c.reg.Servers(ctx, tenant)
	if err != nil {
		return nil, nil, err
	}
	vk := viewKey{tenant, only, caps, ""}
	caller := callerOf(ctx)
	for i := range servers {
		if servers[i].PerCaller() {
			vk.caller = caller
		}
	}
	if sig, fresh := c.signature(servers, only, caps, caller, maxAge); fresh {
		c.mu.Lock()
		v := c.views[vk]
		c.mu.Unlock()
		if v != nil && v.sig == sig {
			return v, nil, nil
		}
	}
	v := &view{index: map[string]int{}}
	var errs []error
	count := map[string]int{}
	for i := range servers {
		srv := &servers[i]
		if only != "" && srv.Name != only {
			continue
		}
		tools, err := c.tools(ctx, srv, caps, maxAge)
		if err != nil {
			errs = append(errs, &ServerError{Server: srv.Name, Err: err})
			continue
		}
		for _, t := range tools {
			v.entries = append(v.entries, Entry{Name: t.Name, Server: srv, Tool: t})
			count[t.Name]++
		}
	}
	v.entries = expose(v.entries, count)
	for i := range v.entries {
		v.index[v.entries[i].Name] = i
	}
	if sig, fresh := c.signature(servers, only, caps, caller, maxAge); fresh && len(errs) == 0 {
		v.sig = sig
		c.mu.Lock()
		if _, ok := c.views[vk]; !ok && len(c.views) >= maxViews {
			clear(c.views)
		}
		c.views[vk] = v
		c.mu.Unlock()
	}
	return v, errs, nil
}

// expose names each of entries (all with their tool's own name, counted in
// count) so that every exposed name is one (server, tool). A tool's
// qualified name, "server.tool", is reserved for it: the tool always
// answers to it (view.match), and server names hold no dot
// (registry.ValidateServerName), so no two tools share one. A tool keeps
// its own name unless another tool in the view has the same name, or its
// name is another tool's qualified name (server b listing "a.transfer"
// while server a has "transfer"); then it is exposed as its own qualified
// name ("b.a.transfer"), so that a literal name never shadows a qualified
// one (issue 16, item 6). A name listed twice by one server is kept once,
// the first time it is listed.
func expose(entries []Entry, count map[string]int) []Entry {
	qualified := make(map[string]bool, len(entries))
	for i := range entries {
		qualified[entries[i].Server.Name+"."+entries[i].Tool.Name] = true
	}
	seen := make(map[string]bool, len(entries))
	out := entries[:0]
	for _, e := range entries {
		if count[e.Name] > 1 || qualified[e.Name] {
			e.Name = e.Server.Name + "." + e.Tool.Name
		}
		if seen[e.Name] {
			continue // a server listing one name twice
		}
		seen[e.Name] = true
		out = append(out, e)
	}
	return out
}

// signature hashes the servers of a view and which list of each one's
// tools it has (its gen: two listings at one instant are still two);
// fresh is false when a list is missing or older than maxAge.
func (c *Catalog) signature(servers []registry.Server, only string, caps upstream.Caps, caller string, maxAge time.Duration) (uint64, bool) {
	h := fnv.New64a()
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var b [8]byte
	for i := range servers {
		srv := &servers[i]
		if only != "" && srv.Name != only {
			continue
		}
		e, ok := c.entries[cacheKey(srv, caps, caller)]
		if !ok || now.Sub(e.fetched) >= maxAge {
			return 0, false
		}
		h.Write([]byte(srv.Name))
		h.Write([]byte{0})
		h.Write([]byte(srv.URL))
		binary.LittleEndian.PutUint64(b[:], e.gen)
		h.Write(b[:])
		if cr := srv.Credential; cr != nil {
			h.Write([]byte(cr.Header))
			h.Write([]byte{0})
			h.Write([]byte(cr.Ref))
		}
		h.Write([]byte{0})
		h.Write([]byte(srv.Auth))
		var settings uint64 // order-independent: map iteration is random
		for name, ts := range srv.Tools {
			th := fnv.New64a()
			th.Write([]byte(name))
			if ts.RequiresApproval {
				th.Write([]byte{1})
			}
			settings ^= th.Sum64()
		}
		binary.LittleEndian.PutUint64(b[:], settings)
		h.Write(b[:])
	}
	return h.Sum64(), true
}

// HasServer reports whether tenant has a server called name.
func (c *Catalog) HasServer(ctx context.Context, tenant, name string) (bool, error) {
	servers, err := c.reg.Servers(ctx, tenant)
	if err != nil {
		return false, err
	}
	for _, s := range servers {
		if s.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// ResolveFor finds the tool a tenant's client that declared caps asked
// for: by exposed name, or by "server.tool", limited to server when it is
// not empty. ok is false when the tenant has no such tool for that client.
// A miss refetches the lists once (at most every MinRefresh), so a newly
// added tool is found.
func (c *Catalog) ResolveFor(ctx context.Context, tenant, server, name string, caps upstream.Caps) (e Entry, ok bool, errs []error, err error) {
	for _, maxAge := range []time.Duration{c.ttl, MinRefresh} {
		var v *view
		v, errs, err = c.built(ctx, tenant, server, caps, maxAge)
		if err != nil {
			return Entry{}, false, nil, err
		}
		if e, ok := v.match(name); ok {
			return e, true, nil, nil
		}
	}
	return Entry{}, false, errs, nil
}

// Resolve is ResolveFor a client that declared no capabilities (see View).
func (c *Catalog) Resolve(ctx context.Context, tenant, server, name string) (e Entry, ok bool, errs []error, err error) {
	return c.ResolveFor(ctx, tenant, server, name, 0)
}

func (v *view) match(name string) (Entry, bool) {
	if i, ok := v.index[name]; ok {
		return v.entries[i], true
	}
	if srv, tool, ok := strings.Cut(name, "."); ok {
		for _, e := range v.entries {
			if e.Server.Name == srv && e.Tool.Name == tool {
				return e, true
			}
		}
	}
	return Entry{}, false
}

// Check is the pipeline's "route" slot: tools/call resolves its tool,
// the reads and subscriptions their prompt or resource (targets.go).
type Check struct {
	cat  *Catalog
	cats Catalogs
}

// NewCheck returns the route check over the tool catalog cat, for a
// gateway that carries tools only: a read or subscription names its
// target on /mcp/{server} and is refused with -32601 on /mcp.
func NewCheck(cat *Catalog) *Check { return &Check{cat: cat, cats: Catalogs{Tools: cat}} }

// NewCheckAll returns the route check over every catalog of cats (Tools
// must be set; a nil catalog has no entries).
func NewCheckAll(cats Catalogs) *Check { return &Check{cat: cats.Tools, cats: cats} }

// Check implements pipeline.Check: a server named by the path
// (/mcp/{server}) or by params.server must be one of the tenant's (-32601),
// for every request; a tools/call's c.Tool is resolved to its server and
// upstream name, or refused with -32601. When the tool is not found and a
// server could not be listed, the answer is -32000 naming that server, since
// the tool may well exist there.
func (k *Check) Check(ctx context.Context, c *pipeline.Call) error {
	return k.resolve(ctx, c)
}

// Prefetch implements pipeline.Prefetcher. Routing is resolved at once
// (from the cached catalog; in steady state no I/O), so that the breaker
// can start its store work for the resolved server in the same wave as the
// session, rate-limit and quota checks. Its verdict is still reported in
// its own place in the order.
func (k *Check) Prefetch(ctx context.Context, c *pipeline.Call) (func() error, func()) {
	err := k.resolve(ctx, c)
	return func() error { return err }, nil
}

// Resolves implements pipeline.Resolver.
func (*Check) Resolves() {}

var _ pipeline.Resolver = (*Check)(nil)

func (k *Check) resolve(ctx context.Context, c *pipeline.Call) error {
	if c.RequestedServer != "" {
		ok, err := k.cat.HasServer(ctx, c.Tenant.ID, c.RequestedServer)
		if err != nil {
			return err
		}
		if !ok {
			return refusal.Unknown("server " + c.RequestedServer)
		}
	}
	switch c.Method {
	case "tools/call":
	case "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe", "completion/complete":
		return k.resolveTarget(ctx, c)
	case "logging/setLevel":
		// On /mcp/{server}, sent to that server: the kill switch and the
		// policy decide it there. On /mcp the gateway sends it to each
		// server they let it reach (pipeline.Visible).
		if c.RequestedServer != "" {
			srv, err := k.cat.server(ctx, c.Tenant.ID, c.RequestedServer)
			if err != nil {
				return err
			}
			c.Server = srv
		}
		return nil
	default:
		return nil // other requests name a server (/mcp/{server}) or none
	}
	e, ok, errs, err := k.cat.ResolveFor(ctx, c.Tenant.ID, c.RequestedServer, c.Tool, sessioncheck.Caps(c))
	if err != nil {
		return err
	}
	if !ok {
		if len(errs) > 0 {
			var se *ServerError
			if x, ok := errs[0].(*ServerError); ok {
				se = x
			}
			var te *upstream.TokenError
			if errors.As(errs[0], &te) {
				// The caller must connect first: a refusal naming the
				// server, whose link the gateway adds (it makes links).
				return refusal.Connection(te.Server, "", "", false)
			}
			if se != nil {
				return refusal.Upstream("could not list the tools of " + se.Server)
			}
		}
		return unknown(ctx, k.cat, c, "tool", c.Tool)
	}
	c.Server = e.Server
	c.UpstreamTool = e.Tool.Name
	c.ToolDef = e.Tool.Def
	c.Settings = e.Server.Tools[e.Tool.Name]
	return nil
}

var _ pipeline.Prefetcher = (*Check)(nil)
