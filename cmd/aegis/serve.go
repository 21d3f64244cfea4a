package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aegis-gw/aegis/examples"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/metrics"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
	statestore "github.com/aegis-gw/aegis/shared/store"
	"github.com/aegis-gw/aegis/shared/telemetry"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// store is what `aegis serve` runs on: one complete backend, and the
// registry cache its kind wants.
type store struct {
	backend.Backend
	// cacheTTL caches registry reads in process (0 for the embedded store,
	// which is already in process).
	cacheTTL time.Duration
	// mem is the embedded store when that is the kind (its session limits
	// are set from the settings).
	mem *memstore.Store
}

// openStore opens the --store kind; a DynamoDB store's operations are
// traced (tr) and timed (m) when those are on, each with the deadline
// opTimeout (--store-timeout; 0: the product's).
func openStore(ctx context.Context, kind string, opTimeout time.Duration, tr *telemetry.Tracer, m *metrics.Registry) (store, error) {
	switch kind {
	case "memory":
		m := memstore.New()
		return store{Backend: m, mem: m}, nil
	case "dynamodb":
		st, err := openDynamo(ctx, opTimeout, tr, m)
		if err != nil {
			return store{}, err
		}
		return store{Backend: st, cacheTTL: wiring.RegistryCacheTTL}, nil
	}
	return store{}, fmt.Errorf("--store %q: want memory or dynamodb", kind)
}

func runServe(args []string) int {
	fs := flag.NewFlagSet("aegis serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	demoMode := fs.Bool("demo", false, "start a demo upstream and the demo tenant")
	cfgPath := fs.String("config", "", "YAML configuration file (tenants, servers, keys)")
	storeKind := fs.String("store", "memory", "state store: memory or dynamodb")
	storeTimeout := fs.Duration("store-timeout", 0, "with --store dynamodb: each DynamoDB operation's deadline, each attempt waiting half of it for an answer (default 2s; a longer one is for a local emulator such as moto_server on a busy machine)")
	pprofAddr := fs.String("pprof", "", "serve Go's profiler on this loopback address (benchmarking)")
	if err := parseFlags(fs, "serve", args); err != nil {
		return exitOf(err)
	}
	// Telemetry as the Lambda functions read it (AEGIS_LOG_LEVEL,
	// AEGIS_TRACE*, AEGIS_METRICS), all of it on stderr: the same logger,
	// with correlation ids from the context and credential-named
	// attributes redacted. A bad value stops start-up, naming it.
	tel, stopTelemetry, err := telemetry.FromEnvLocal(os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aegis serve:", err)
		return 1
	}
	defer func() { _ = stopTelemetry(context.Background()) }()
	if *pprofAddr != "" {
		if err := startPprof(*pprofAddr); err != nil {
			fmt.Fprintln(os.Stderr, "aegis serve:", err)
			return 2
		}
	}
	if err := serve(*addr, *demoMode, *cfgPath, *storeKind, *storeTimeout, tel, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "aegis serve:", err)
		return 1
	}
	return 0
}

// maxStoreTimeout bounds --store-timeout.
const maxStoreTimeout = time.Minute

// serve runs the gateway until a signal. tel is the telemetry: its logger
// (nil: discard), tracer, EMF writer, and whether /metrics is served.
// storeTimeout is --store-timeout (0: the product's store deadlines).
func serve(addr string, demoMode bool, cfgPath, storeKind string, storeTimeout time.Duration, tel telemetry.Setup, out io.Writer) error {
	if demoMode == (cfgPath != "") {
		return errors.New("give exactly one of --demo or --config FILE")
	}
	if err := checkStoreTimeout(storeKind, storeTimeout); err != nil {
		return err
	}
	defer tel.Lines.Flush() // the access log's last lines
	log := tel.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	settings, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	settings.LocalMode = true
	tiers, err := quota.TiersFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	// The signal context ends start-up and starts the drain; it is never
	// the parent of a request's context (http.Server's BaseContext is
	// context.Background), so a signal does not cancel calls in flight.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var file *config.File
	var up *demo.Server
	if demoMode {
		up, err = demo.Start("127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("demo upstream: %w", err)
		}
		defer up.Close()
		getenv := func(k string) string {
			if k == "AEGIS_DEMO_UPSTREAM" {
				return up.URL
			}
			return os.Getenv(k)
		}
		if file, err = config.ParseFile(examples.Demo, getenv, true); err != nil {
			return fmt.Errorf("examples/demo.yaml: %w", err)
		}
	} else if file, err = config.LoadFile(cfgPath, true); err != nil {
		return err
	}

	var b store
	var prom *metrics.Registry
	if tel.Prometheus {
		// The circuits are read at each scrape, from the store opened below.
		prom = metrics.New(func(ctx context.Context) ([]metrics.Circuit, error) { return circuits(ctx, b.Backend, time.Now()) })
	}
	if b, err = openStore(ctx, storeKind, storeTimeout, tel.Tracer, prom); err != nil {
		return fmt.Errorf("--store %s: %w", storeKind, err)
	}
	auditKey, closeChain, err := chainAudit(&b, log)
	if err != nil {
		return err
	}
	defer closeChain()
	if b.mem != nil {
		// Stops are read from the process's own memory on every call: a
		// stop or resume is in force at once (docs/admin.md).
		settings.KillSwitchRefresh = 0
	}
	reg, err := registryOf(file, time.Now().UTC())
	if err != nil {
		return err
	}
	if demoMode && b.mem == nil {
		if err := demoUnclaimed(ctx, b, reg.servers); err != nil {
			return err
		}
	}
	if err := reg.load(ctx, b); err != nil {
		return err
	}
	if b.mem != nil {
		b.mem.SetSessionLimits(session.Limits{Lifetime: settings.SessionLifetime, Idle: settings.SessionIdle})
	}
	var demoKey string
	if demoMode {
		var rec registry.Key
		if demoKey, rec, err = demoKeyRecord(time.Now().UTC()); err != nil {
			return err
		}
		if err := b.PutKey(ctx, rec); err != nil {
			return err
		}
		reg.keys = append(reg.keys, rec)
		n, err := revokeOldDemoKeys(ctx, b, rec.ID)
		if err != nil {
			return fmt.Errorf("revoking the earlier demo keys: %w", err)
		}
		if n > 0 {
			log.Info("revoked the demo keys of earlier aegis serve --demo runs on this store", "count", n)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	listening := false
	defer func() {
		if !listening {
			ln.Close()
		}
	}()
	creds := wiring.Credentials(true)
	gopts := &gateway.Options{
		Settings: settings, Tiers: tiers, RegistryCacheTTL: b.cacheTTL, Tracer: tel.Tracer,
		Logger: log, Notifier: notifier(log), Version: version, Credentials: creds,
		HTTP: gateway.NewHTTPClient(true),
	}
	// Connections (docs/connections.md): links to this address unless
	// AEGIS_PUBLIC_URL says another; tokens sealed with a key derived
	// from the audit key file.
	kr, err := wiring.LocalKeyring(auditKey)
	if err != nil {
		return err
	}
	pub := cmp.Or(os.Getenv(wiring.EnvPublicURL), "http://"+ln.Addr().String())
	if gopts.Connections, err = wiring.Connections(b.Backend, kr, pub, creds, gopts.HTTP, true, log); err != nil {
		return fmt.Errorf("%s: %w", wiring.EnvPublicURL, err)
	}
	switch {
	case prom != nil:
		gopts.Metrics = prom
	case tel.Metrics != nil: // a nil *EMF in the interface would not be "off"
		gopts.Metrics = tel.Metrics
	}
	gw, err := gateway.New(b.Backend, gopts)
	if err != nil {
		return err
	}
	if b.mem != nil {
		// Sessions the embedded store forgets (expired, evicted) end their
		// upstream sessions; on DynamoDB a TTL deletion cannot call out.
		b.mem.OnSessionEnd(gw.EndUpstream)
	}
	listening = true
	o := ops{ready: readiness(b.Backend, reg, log), killSwitchRefresh: settings.KillSwitchRefresh, base: "http://" + ln.Addr().String()}
	if prom != nil {
		o.metrics = prom.Handler()
	}
	handler, adminLine, err := mountAdmin(gw, b.Backend, log, o)
	if err != nil {
		_ = ln.Close()
		return err
	}
	if prom != nil {
		handler = prom.InFlight(handler)
	}
	handler = telemetry.AccessLog(handler, tel.Lines, nil)
	// A slow client cannot hold a connection forever: the whole request
	// must arrive in 30 s; the answer may take as long as a call can.
	budget := settings.CallBudget()
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      budget,
		IdleTimeout:       120 * time.Second,
	}
	banner(out, o.base, up, demoKey, b.mem != nil)
	fmt.Fprintln(out, adminLine)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// On DynamoDB the configuration is kept in the store (the embedded
	// store cannot lose it while the process runs).
	var kept chan error
	kctx, kstop := context.WithCancel(context.Background())
	defer kstop()
	if b.mem == nil {
		k := &keeper{store: b, reg: reg, log: log, pending: map[string]bool{}}
		if demoMode {
			k.owned = reg.servers
		}
		kept = make(chan error, 1)
		go func() { kept <- k.run(kctx, restoreEvery) }()
	}
	var cause error
	select {
	case err := <-served:
		return err // not closed by us: the listener failed
	case <-ctx.Done():
		log.Info("signal received: no new connections, streams closed; finishing the calls in flight", "budget", budget.String())
		fmt.Fprintf(out, "stopping: no new connections, open streams closed; waiting up to %s for the calls in flight (send the signal again to stop at once)\n", budget)
	case cause = <-kept:
		log.Error("stopping", "err", cause)
	}
	// From here a second signal stops the process at once (drain).
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	stop()
	kstop()
	if err := drain(srv, gw, budget, again); err != nil {
		return err
	}
	return cause
}

// checkStoreTimeout refuses a --store-timeout (d, 0 when not given)
// without --store dynamodb, or outside dynamo.DefaultOpTimeout to
// maxStoreTimeout: the flag only lengthens the product's deadlines, for
// a local emulator; the request's own deadline (UPSTREAM_TIMEOUT_SECS
// plus the gateway's store margin) is not changed by it.
func checkStoreTimeout(kind string, d time.Duration) error {
	switch {
	case d == 0:
		return nil
	case kind != "dynamodb":
		return errors.New("--store-timeout applies to --store dynamodb only")
	case d < dynamo.DefaultOpTimeout || d > maxStoreTimeout:
		return fmt.Errorf("--store-timeout %s: want %s to %s", d, dynamo.DefaultOpTimeout, maxStoreTimeout)
	}
	return nil
}

// drain stops srv on SIGTERM or SIGINT: the listener is closed at once (new
// connections are refused), then gw's streams of notifications outside a
// call (GET and subscriptions/listen, which a connected MCP client holds
// open while idle) are ended as the protocol lets a server end them
// (gateway.CloseStreams), idle connections are closed, and every call in
// flight runs to its end, writing its audit record and releasing its
// concurrency lease on the way out, for up to budget. Calls still running
// then are cut and drain reports it (aegis serve exits 1). A signal on
// again cuts them at once, with an error that says so.
func drain(srv *http.Server, gw *gateway.Gateway, budget time.Duration, again <-chan os.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	srv.RegisterOnShutdown(gw.CloseStreams) // run once the listener is closed
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("shutdown: calls still running after %s were cut: %w", budget, err)
		}
		return nil
	case sig := <-again:
		_ = srv.Close()
		<-done
		return fmt.Errorf("second signal (%s): stopped at once; calls still in flight were cut, and their audit records may be missing", sig)
	}
}

// registryItems is a configuration's registry as `aegis serve` puts it in
// the store: at start, and again by the keeper if the store loses it.
type registryItems struct {
	tenants []registry.Tenant
	servers []registry.Server
	keys    []registry.Key
	// policies are the tenants' policy sets (every tenant has one; see
	// config.File.Policies).
	policies []registry.Policy
}

// registryOf takes f's registry, every record created at now.
func registryOf(f *config.File, now time.Time) (registryItems, error) {
	ts, ss, ks := f.Registry()
	ps, err := f.Policies()
	if err != nil {
		return registryItems{}, err
	}
	for i := range ps {
		ps[i].Updated = now
	}
	for i := range ts {
		ts[i].Created = now
	}
	for i := range ss {
		ss[i].Created = now
	}
	for i := range ks {
		ks[i].Created = now
	}
	return registryItems{tenants: ts, servers: ss, keys: ks, policies: ps}, nil
}

// load writes every tenant with its servers, keys and policy set.
func (r registryItems) load(ctx context.Context, w registry.Store) error {
	for _, t := range r.tenants {
		if err := r.loadTenant(ctx, w, t); err != nil {
			return err
		}
	}
	return nil
}

// loadTenant writes t, then its servers (which need it), keys and policy
// set. Every write is a whole put, so writing again what is there changes
// nothing.
func (r registryItems) loadTenant(ctx context.Context, w registry.Store, t registry.Tenant) error {
	if err := w.PutTenant(ctx, t); err != nil {
		return fmt.Errorf("loading tenant %s: %w", t.ID, err)
	}
	for _, s := range r.servers {
		if s.Tenant != t.ID {
			continue
		}
		if err := w.PutServer(ctx, s); err != nil {
			return fmt.Errorf("loading server %s/%s: %w", s.Tenant, s.Name, err)
		}
	}
	for _, k := range r.keys {
		if k.Tenant != t.ID {
			continue
		}
		if err := w.PutKey(ctx, k); err != nil {
			return fmt.Errorf("loading key %s: %w", k.ID, err)
		}
	}
	for _, p := range r.policies {
		if p.Tenant != t.ID {
			continue
		}
		if err := w.PutPolicy(ctx, p); err != nil {
			return fmt.Errorf("loading the policy of %s: %w", p.Tenant, err)
		}
	}
	return nil
}

// restoreEvery is how often the keeper of `aegis serve --store dynamodb`
// looks for the configuration's tenants in the store: one read per tenant
// (plus one server query per demo tenant under --demo) every 5 s. A
// registry put back is served within this period plus the registry cache's
// TTL (wiring.RegistryCacheTTL), during which its keys are still answered
// as unknown (401).
const restoreEvery = 5 * time.Second

// keeper keeps the configuration in the store while `aegis serve` runs on
// DynamoDB, which (unlike the embedded store) can lose it: tables deleted
// and created again, or emptied. The configuration is the source of truth
// for what it lists, so a tenant of it that is gone from the store is put
// back whole (tenant, servers, keys). A tenant is the marker because
// nothing else removes one (the admin API has no tenant delete): a server
// deleted or a key revoked through the admin API, with its tenant still
// there, is left as the operator made it. What is not in the configuration
// (tenants, servers and keys added through the admin API, sessions, kill
// switches, approvals, audit records) is not put back; docs/state.md
// ("Recovery") says what that means.
type keeper struct {
	store registry.Store
	reg   registryItems
	log   *slog.Logger
	// owned are the servers this process registered for its own demo
	// upstream (--demo); nil otherwise.
	owned []registry.Server
	// pending are tenants found gone whose restore has not completed; they
	// are written again on every pass until one succeeds, since the tenant
	// itself may be back before its servers and keys.
	pending map[string]bool
	failing bool // the last pass failed (logged once per outage)
}

// run checks every period until ctx ends (nil) or another process has
// taken this one's demo registration (that error).
func (k *keeper) run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, every)
		err := k.check(cctx)
		cancel()
		var taken *demoTaken
		switch {
		case errors.As(err, &taken):
			return err
		case err != nil && ctx.Err() == nil && !k.failing:
			k.log.Warn("registry check failed; retrying every "+every.String(), "err", err)
			k.failing = true
		case err == nil && k.failing:
			k.log.Info("registry check succeeds again")
			k.failing = false
		}
	}
}

// check is one pass: every configured tenant that is gone (or whose
// restore is pending) is written again; then, under --demo, the demo
// servers must still point at this process's upstream.
func (k *keeper) check(ctx context.Context) error {
	for _, t := range k.reg.tenants {
		if !k.pending[t.ID] {
			_, err := k.store.Tenant(ctx, t.ID)
			if err == nil {
				continue
			}
			if !errors.Is(err, statestore.ErrNotFound) {
				return err
			}
			k.pending[t.ID] = true
			k.log.Warn("tenant "+t.ID+" of the configuration is gone from the store (tables emptied or created again?); putting its registry back", "tenant", t.ID)
		}
		if err := k.reg.loadTenant(ctx, k.store, t); err != nil {
			return err
		}
		delete(k.pending, t.ID)
		k.log.Info("tenant "+t.ID+" restored from the configuration", "tenant", t.ID)
	}
	for _, s := range k.owned {
		ss, err := k.store.Servers(ctx, s.Tenant)
		if err != nil {
			return err
		}
		for _, r := range ss {
			if r.Name == s.Name && r.URL != s.URL {
				return &demoTaken{tenant: s.Tenant, server: s.Name, url: r.URL}
			}
		}
	}
	return nil
}

// demoTaken: another `aegis serve --demo` registered its own upstream for
// a demo server of this one (both started at the same moment, or the other
// runs elsewhere on the same tables).
type demoTaken struct{ tenant, server, url string }

func (e *demoTaken) Error() string {
	return fmt.Sprintf("tenant %s's server %s now points at %s: another aegis serve --demo registered it on this store; "+
		"this one stops, so that one demo serves the store", e.tenant, e.server, e.url)
}

// demoUnclaimed refuses a second `aegis serve --demo` on a store whose demo
// servers another one's upstream still serves: the two would register the
// same tenant and server, the last would win, and the other would forward
// to it. A registration whose upstream no longer answers (its process has
// ended) is taken over.
func demoUnclaimed(ctx context.Context, reg registry.Reader, mine []registry.Server) error {
	for _, s := range mine {
		ss, err := reg.Servers(ctx, s.Tenant)
		if err != nil {
			return fmt.Errorf("looking for another aegis serve --demo: %w", err)
		}
		for _, r := range ss {
			if r.Name != s.Name || r.URL == s.URL {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			alive := demo.Running(pctx, r.URL)
			cancel()
			if alive {
				t := dynamo.TablesFromEnv(os.Getenv)
				return fmt.Errorf("tenant %s's server %s is registered by another aegis serve --demo (its upstream %s answers); "+
					"stop it, or give this one its own tables (AEGIS_STATE_TABLE, AEGIS_AUDIT_TABLE; now %s, %s)",
					s.Tenant, s.Name, r.URL, t.State, t.Audit)
			}
		}
	}
	return nil
}

// demoCaller is the caller of the demo tenant's key.
const demoCaller = "demo-agent"

// demoKeyRecord is the demo tenant's key from AEGIS_DEMO_KEY, or a new one.
func demoKeyRecord(now time.Time) (string, registry.Key, error) {
	secret := os.Getenv("AEGIS_DEMO_KEY")
	if secret == "" {
		secret, rec := auth.NewKey("demo", demoCaller, now)
		return secret, rec, nil
	}
	rec, err := auth.KeyWithSecret("demo", demoCaller, secret, now)
	if err != nil {
		return "", registry.Key{}, fmt.Errorf("AEGIS_DEMO_KEY: %w", err)
	}
	return secret, rec, nil
}

// revokeOldDemoKeys revokes the demo tenant's other demo-agent keys: those
// that earlier `aegis serve --demo` runs on this store added and printed.
// One demo key is valid at a time.
func revokeOldDemoKeys(ctx context.Context, reg registry.Writer, keep string) (int, error) {
	ks, err := reg.ListKeys(ctx, "demo")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range ks {
		if k.Caller != demoCaller || k.Revoked || k.ID == keep {
			continue
		}
		if err := reg.RevokeKey(ctx, "demo", k.ID); err != nil && !errors.Is(err, statestore.ErrNotFound) {
			return n, err
		}
		n++
	}
	return n, nil
}

// banner is what aegis serve prints at start, on out: its address, the
// store's kind (the embedded one keeps nothing after the process), and
// under --demo the demo's upstream, key and two commands to paste.
func banner(out io.Writer, base string, up *demo.Server, key string, inMemory bool) {
	fmt.Fprintf(out, "aegis gateway listening on %s\n", base)
	if inMemory {
		fmt.Fprintln(out, "store: embedded, in memory: what the admin API or console changes is gone when this process stops (--store dynamodb keeps it)")
	}
	if up == nil {
		return
	}
	fmt.Fprintf(out, "demo upstream (tenant demo, server mock-primary): %s\n", up.URL)
	fmt.Fprintf(out, "demo API key: %s\n\n", key)
	fmt.Fprintf(out, "try:\n")
	fmt.Fprintf(out, "  curl -s %s/v1/invoke -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \\\n", base, key)
	fmt.Fprintf(out, "    -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}'\n")
	fmt.Fprintf(out, "  curl -s %s/v1/invoke -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \\\n", base, key)
	fmt.Fprintf(out, "    -d '{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"message\":\"hello\"}}}'\n")
}
