package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/approval"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/credentials"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/health"
)

// envAdminKey is the variable holding the local admin API's key.
const envAdminKey = "AEGIS_ADMIN_KEY"

// notifier tells approvers of held calls: tenant webhooks, signed with
// secrets resolved from env:/file: references.
func notifier(log *slog.Logger) approval.Notifier {
	return &approval.Async{N: &approval.Webhook{Secrets: credentials.New(credentials.Options{Local: true}), Logger: log, Local: true}}
}

// ops are the operators' endpoints beside the gateway and the admin API.
type ops struct {
	ready   http.Handler // GET /readyz; nil: not served
	metrics http.Handler // GET /metrics, behind the admin key; nil: not served (AEGIS_METRICS)
	// killSwitchRefresh is how long a stop takes to be in force on every
	// instance (KILL_SWITCH_REFRESH_SECS; 0 on the embedded store).
	killSwitchRefresh time.Duration
}

// mountAdmin serves the gateway at /, the admin API at /admin/, and the
// operators' endpoints (docs/operations.md) on one listener: GET /healthz,
// GET /readyz and, behind the admin key, GET /metrics. The admin API
// resolves kill-switch names with the gateway's tool catalog. Without
// AEGIS_ADMIN_KEY the admin routes and /metrics answer 401 with how to
// enable them; the returned line goes in the banner.
func mountAdmin(gw *gateway.Gateway, b backend.Backend, log *slog.Logger, o ops) (http.Handler, string, error) {
	mux := http.NewServeMux()
	mux.Handle("/", gw)
	mux.Handle("GET /healthz", health.Live())
	if o.ready != nil {
		mux.Handle("GET /readyz", o.ready)
	}
	key := os.Getenv(envAdminKey)
	if key == "" {
		mux.Handle("/admin/", adminDisabled{})
		if o.metrics != nil {
			mux.Handle("GET /metrics", adminDisabled{})
		}
		return mux, "admin API and /metrics off: set " + envAdminKey + " (24+ characters, e.g. `aegis admin new-key`) to serve them", nil
	}
	h, err := admin.New(b, &admin.Options{AdminKey: key, Catalog: gw.Catalog(), Listings: admin.ListingsOf(gw.Catalogs()), LocalMode: true, Logger: log, KillSwitchRefresh: o.killSwitchRefresh})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", envAdminKey, err)
	}
	mux.Handle("/admin/", h)
	line := "admin API on /admin/v1/ (key from " + envAdminKey + "), console on /admin/console/"
	if o.metrics != nil {
		mux.Handle("GET /metrics", h.Protect(o.metrics))
		line += "; Prometheus metrics on /metrics (same key)"
	}
	return mux, line, nil
}

// adminDisabled answers every admin route while no admin key is set.
type adminDisabled struct{}

func (adminDisabled) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", `Bearer realm="aegis-admin"`)
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"unauthorized: the admin API (and /metrics) is off; start aegis serve with `+envAdminKey+` set to enable it"}}`+"\n")
}
