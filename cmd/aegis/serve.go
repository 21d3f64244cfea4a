package main

import (
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
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/quota"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/session"
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

// openStore opens the --store kind.
func openStore(ctx context.Context, kind string) (store, error) {
	switch kind {
	case "memory":
		m := memstore.New()
		return store{Backend: m, mem: m}, nil
	case "dynamodb":
		st, err := openDynamo(ctx)
		if err != nil {
			return store{}, err
		}
		return store{Backend: st, cacheTTL: wiring.RegistryCacheTTL}, nil
	}
	return store{}, fmt.Errorf("--store %q: want memory or dynamodb", kind)
}

func runServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	demoMode := fs.Bool("demo", false, "start a demo upstream and the demo tenant")
	cfgPath := fs.String("config", "", "YAML configuration file (tenants, servers, keys)")
	storeKind := fs.String("store", "memory", "state store: memory or dynamodb")
	pprofAddr := fs.String("pprof", "", "serve Go's profiler on this loopback address (benchmarking)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// The same logger as the Lambda functions: correlation ids from the
	// context, and credential-named attributes redacted.
	log := telemetry.NewLogger(os.Stderr, slog.LevelInfo)
	if *pprofAddr != "" {
		if err := startPprof(*pprofAddr); err != nil {
			fmt.Fprintln(os.Stderr, "aegis serve:", err)
			return 2
		}
	}
	if err := serve(*addr, *demoMode, *cfgPath, *storeKind, log, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "aegis serve:", err)
		return 1
	}
	return 0
}

func serve(addr string, demoMode bool, cfgPath, storeKind string, log *slog.Logger, out io.Writer) error {
	if demoMode == (cfgPath != "") {
		return errors.New("give exactly one of --demo or --config FILE")
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

	b, err := openStore(ctx, storeKind)
	if err != nil {
		return fmt.Errorf("--store %s: %w", storeKind, err)
	}
	if err := load(ctx, b, file); err != nil {
		return err
	}
	if b.mem != nil {
		b.mem.SetSessionLimits(session.Limits{Lifetime: settings.SessionLifetime, Idle: settings.SessionIdle})
	}
	var demoKey string
	if demoMode {
		if demoKey, err = addDemoKey(ctx, b); err != nil {
			return err
		}
	}
	gw, err := gateway.New(b.Backend, &gateway.Options{
		Settings: settings, Tiers: tiers, RegistryCacheTTL: b.cacheTTL,
		Logger: log, Notifier: notifier(log), Version: version, Credentials: wiring.Credentials(true),
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	handler, adminLine, err := mountAdmin(gw, b.Backend, log)
	if err != nil {
		_ = ln.Close()
		return err
	}
	// A slow client cannot hold a connection forever: the whole request
	// must arrive in 30 s; the answer may take as long as an upstream call
	// can (initialize and call, each with its deadline, plus retries).
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      time.Duration(settings.UpstreamMaxRetries+3)*settings.UpstreamTimeout + 30*time.Second,
		IdleTimeout:       120 * time.Second,
	}
	banner(out, "http://"+ln.Addr().String(), up, demoKey)
	fmt.Fprintln(out, adminLine)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// load writes a config file's registry into the store.
func load(ctx context.Context, reg registry.Store, f *config.File) error {
	now := time.Now().UTC()
	ts, ss, ks := f.Registry()
	for _, t := range ts {
		t.Created = now
		if err := reg.PutTenant(ctx, t); err != nil {
			return fmt.Errorf("loading tenant %s: %w", t.ID, err)
		}
	}
	for _, s := range ss {
		s.Created = now
		if err := reg.PutServer(ctx, s); err != nil {
			return fmt.Errorf("loading server %s/%s: %w", s.Tenant, s.Name, err)
		}
	}
	for _, k := range ks {
		k.Created = now
		if err := reg.PutKey(ctx, k); err != nil {
			return fmt.Errorf("loading key %s: %w", k.ID, err)
		}
	}
	return nil
}

// addDemoKey gives the demo tenant the key from AEGIS_DEMO_KEY, or a new one.
func addDemoKey(ctx context.Context, reg registry.Writer) (string, error) {
	now := time.Now().UTC()
	secret := os.Getenv("AEGIS_DEMO_KEY")
	var rec registry.Key
	if secret == "" {
		secret, rec = auth.NewKey("demo", "demo-agent", now)
	} else {
		var err error
		if rec, err = auth.KeyWithSecret("demo", "demo-agent", secret, now); err != nil {
			return "", fmt.Errorf("AEGIS_DEMO_KEY: %w", err)
		}
	}
	return secret, reg.PutKey(ctx, rec)
}

func banner(out io.Writer, base string, up *demo.Server, key string) {
	fmt.Fprintf(out, "aegis gateway listening on %s\n", base)
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
