package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	// base is the listener's http://ADDR, for the banner's console address.
	base string
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
	mux.Handle("GET /{$}", home{admin: key != ""})
	if key == "" {
		mux.Handle("/admin/", adminDisabled{})
		if o.metrics != nil {
			mux.Handle("GET /metrics", adminDisabled{})
		}
		self := selfCommand()
		return mux, "admin API, console and /metrics off: to serve them, stop this (Ctrl-C) and start it again with a key:\n  " +
			envAdminKey + "=$(" + self + " admin new-key) " + self + " " + strings.Join(os.Args[1:], " "), nil
	}
	ao := &admin.Options{AdminKey: key, Catalog: gw.Catalog(), Listings: admin.ListingsOf(gw.Catalogs()), LocalMode: true, Logger: log, KillSwitchRefresh: o.killSwitchRefresh}
	if br := gw.Connections(); br != nil {
		ao.Connections = br
	}
	h, err := admin.New(b, ao)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", envAdminKey, err)
	}
	mux.Handle("/admin/", h)
	line := "admin API on /admin/v1/ (key from " + envAdminKey + "), console on " + o.base + "/admin/console/ (sign in with that key)"
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

// selfCommand is how the user started this aegis, for commands the banner
// suggests: "aegis" when that is this executable on PATH (installed with
// go install), "go run ./cmd/aegis" when it runs from go run's build
// cache, else the path it was started by.
func selfCommand() string {
	exe, err := os.Executable()
	if err != nil {
		return "aegis"
	}
	if p, err := exec.LookPath("aegis"); err == nil {
		if a, b := samePath(p), samePath(exe); a != "" && a == b {
			return "aegis"
		}
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/aegis"
	}
	return os.Args[0]
}

// samePath is p with its symbolic links resolved, or "".
func samePath(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

// home answers GET / of aegis serve: where the console, the MCP endpoints
// and the docs are, for whoever opens the address in a browser or with
// curl (the gateway itself has nothing at /).
type home struct{ admin bool }

func (h home) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	console := "/admin/console/ (sign in with the admin key, AEGIS_ADMIN_KEY)"
	if !h.admin {
		console = "/admin/console/ is off: start aegis serve with " + envAdminKey + " set (aegis admin new-key prints one)"
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // "<API key>" as written
	enc.SetIndent("", "  ")
	_ = enc.Encode(map[string]string{
		"service": "aegis gateway",
		"console": console,
		"mcp":     "POST /mcp or /mcp/{server} with Authorization: Bearer <API key> (MCP Streamable HTTP)",
		"invoke":  "POST /v1/invoke with Authorization: Bearer <API key> (one JSON-RPC request)",
		"health":  "/healthz, /readyz",
		"docs":    "README.md and docs/ of the source: https://github.com/aegis-gw/aegis",
	})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body.Bytes())
}
