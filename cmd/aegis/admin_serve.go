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
)

// envAdminKey is the variable holding the local admin API's key.
const envAdminKey = "AEGIS_ADMIN_KEY"

// notifier tells approvers of held calls: tenant webhooks, signed with
// secrets resolved from env:/file: references.
func notifier(log *slog.Logger) approval.Notifier {
	return &approval.Async{N: &approval.Webhook{Secrets: credentials.New(credentials.Options{Local: true}), Logger: log, Local: true}}
}

// mountAdmin serves the gateway at / and the admin API at /admin/ on one
// listener; the admin API resolves kill-switch names with the gateway's
// tool catalog. Without AEGIS_ADMIN_KEY the admin routes answer 401 with
// how to enable them; the returned line goes in the banner.
func mountAdmin(gw *gateway.Gateway, b backend.Backend, refresh time.Duration, log *slog.Logger) (http.Handler, string, error) {
	mux := http.NewServeMux()
	mux.Handle("/", gw)
	key := os.Getenv(envAdminKey)
	if key == "" {
		mux.Handle("/admin/", adminDisabled{})
		return mux, "admin API off: set " + envAdminKey + " (24+ characters, e.g. `aegis admin new-key`) to serve it under /admin/v1/", nil
	}
	h, err := admin.New(b, &admin.Options{AdminKey: key, Catalog: gw.Catalog(), KillSwitchRefresh: refresh, LocalMode: true, Logger: log})
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", envAdminKey, err)
	}
	mux.Handle("/admin/", h)
	return mux, "admin API on /admin/v1/ (key from " + envAdminKey + "), console on /admin/console/", nil
}

// adminDisabled answers every admin route while no admin key is set.
type adminDisabled struct{}

func (adminDisabled) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", `Bearer realm="aegis-admin"`)
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = io.WriteString(w, `{"error":{"code":"unauthorized","message":"unauthorized: the admin API is off; start aegis serve with `+envAdminKey+` set to enable it"}}`+"\n")
}
