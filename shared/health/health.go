// Package health answers the liveness and readiness probes of `aegis
// serve`: GET /healthz (the process serves HTTP) and GET /readyz (every
// probe passes: the store answers, the registry and the policy sets are
// loaded). The answers name the probes and whether each passed, never why
// one failed: they are on the public listener, and a failure's detail
// (a store error, a tenant's name) goes to the log instead.
package health

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"
)

// Probe is one readiness check: Check returns nil when it passes. Checks
// run one after the other, within the Ready handler's timeout together.
type Probe struct {
	Name  string
	Check func(ctx context.Context) error
}

// Answer is the JSON body of both endpoints.
type Answer struct {
	Status string            `json:"status"`           // "alive", "ready" or "not ready"
	Checks map[string]string `json:"checks,omitempty"` // probe name → "ok" or "failing"
}

// Live answers 200 {"status":"alive"} to every request: the process is up
// and serving HTTP.
func Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		write(w, http.StatusOK, Answer{Status: "alive"})
	})
}

// Ready answers 200 "ready" when every probe passes within timeout, else
// 503 "not ready"; each failure is logged at WARN with its error. A probe
// not reached before the deadline counts as failing.
func Ready(log *slog.Logger, timeout time.Duration, probes ...Probe) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		a := Answer{Status: "ready", Checks: make(map[string]string, len(probes))}
		for _, p := range probes {
			err := ctx.Err()
			if err == nil {
				err = p.Check(ctx)
			}
			if err != nil {
				a.Status, a.Checks[p.Name] = "not ready", "failing"
				log.WarnContext(ctx, "readiness probe failing", "probe", p.Name, "err", err)
				continue
			}
			a.Checks[p.Name] = "ok"
		}
		status := http.StatusOK
		if a.Status != "ready" {
			status = http.StatusServiceUnavailable
		}
		write(w, status, a)
	})
}

func write(w http.ResponseWriter, status int, a Answer) {
	b, _ := json.Marshal(a)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
