package admin

import (
	"net/http"

	"github.com/aegis-gw/aegis/shared/correlation"
)

// Protect serves next only to requests the admin API would accept (the
// admin key, or IAM trust): `aegis serve` puts /metrics behind it, since
// its labels name tenants and servers. A refused request gets the admin
// API's 401.
func (h *Handler) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, fail := h.authenticate(r); fail != "" {
			corr := correlation.ID(r.Header.Get("traceparent"))
			w.Header().Set(correlation.Header, corr)
			w.Header().Set("WWW-Authenticate", `Bearer realm="aegis-admin"`)
			writeError(w, corr, http.StatusUnauthorized, "unauthorized", "unauthorized: "+fail, "")
			return
		}
		next.ServeHTTP(w, r)
	})
}
