package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/breaker"
	"github.com/aegis-gw/aegis/shared/health"
	"github.com/aegis-gw/aegis/shared/metrics"
	statestore "github.com/aegis-gw/aegis/shared/store"
)

// readyTimeout bounds one /readyz answer: every probe together.
const readyTimeout = 3 * time.Second

// probeKeyID is a key id no key has (key ids are 16 lower-case
// characters): reading it is the store probe, answered "not found" by a
// store that can be reached.
const probeKeyID = "readiness-probe"

// readiness is GET /readyz: the store answers a read; every tenant of the
// configuration is in the store with its servers (the registry is loaded:
// on DynamoDB the keeper may be putting it back); every such tenant's
// policy set is stored (aegis serve stores one for each, empty or not).
func readiness(b backend.Backend, reg registryItems, log *slog.Logger) http.Handler {
	return health.Ready(log, readyTimeout,
		health.Probe{Name: "store", Check: func(ctx context.Context) error {
			if _, err := b.Key(ctx, probeKeyID); err != nil && !errors.Is(err, statestore.ErrNotFound) {
				return err
			}
			return nil
		}},
		health.Probe{Name: "registry", Check: func(ctx context.Context) error {
			for _, t := range reg.tenants {
				if _, err := b.Tenant(ctx, t.ID); err != nil {
					return fmt.Errorf("tenant %s: %w", t.ID, err)
				}
				have, err := b.Servers(ctx, t.ID)
				if err != nil {
					return fmt.Errorf("servers of %s: %w", t.ID, err)
				}
				names := map[string]bool{}
				for _, s := range have {
					names[s.Name] = true
				}
				for _, s := range reg.servers {
					if s.Tenant == t.ID && !names[s.Name] {
						return fmt.Errorf("server %s/%s is not in the store", t.ID, s.Name)
					}
				}
			}
			return nil
		}},
		health.Probe{Name: "policies", Check: func(ctx context.Context) error {
			for _, p := range reg.policies {
				if _, err := b.Policy(ctx, p.Tenant); err != nil {
					return fmt.Errorf("policy set of %s: %w", p.Tenant, err)
				}
			}
			return nil
		}},
	)
}

// maxCircuits bounds the circuits one scrape reports (and so its store
// reads: one per tenant, one per tenant's server list, one per circuit).
const maxCircuits = 1000

// circuits is every registered server's circuit state at now, read from
// the store (the state every instance shares), for aegis_circuit_state.
func circuits(ctx context.Context, b backend.Backend, now time.Time) ([]metrics.Circuit, error) {
	ts, err := b.ListTenants(ctx)
	if err != nil {
		return nil, err
	}
	var out []metrics.Circuit
	for _, t := range ts {
		ss, err := b.Servers(ctx, t.ID)
		if err != nil {
			return out, err
		}
		for _, s := range ss {
			if len(out) == maxCircuits {
				return out, nil
			}
			c, err := b.Circuit(ctx, breaker.Key(t.ID, s.Name))
			if err != nil {
				return out, err
			}
			out = append(out, metrics.Circuit{Tenant: t.ID, Server: s.Name, State: breaker.StateAt(c, now)})
		}
	}
	return out, nil
}
