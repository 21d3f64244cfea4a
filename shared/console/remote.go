package console

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Signer signs a request to a deployed admin API (SigV4 for API Gateway's
// IAM authorization, `aegis admin console`), whose body is body.
type Signer func(ctx context.Context, req *http.Request, body []byte) error

// RemoteOptions configure a Remote.
type RemoteOptions struct {
	// Target is the deployed gateway's base URL (the admin API is under
	// Target + /admin/v1/). Required, https unless loopback (for tests).
	Target string
	// Sign signs each forwarded request with the operator's own
	// credentials. Required.
	Sign Signer
	// Key is the one-time key the login form takes (admin.NewKey()),
	// printed to the operator's terminal only. Required, 24+ characters.
	Key string
	// KillSwitchRefresh: as Options.
	KillSwitchRefresh time.Duration
	Client            *http.Client // nil: 30 s timeout, no redirects
	Logger            *slog.Logger
}

// Remote serves the console on the operator's machine for a deployed
// stack: the pages and the session as Console does, and every admin API
// request of a live session (CSRF checked on changes) forwarded to Target,
// signed with the operator's credentials. The browser never holds those
// credentials: it holds a session cookie of this local process. Cookies,
// the CSRF token and any Authorization header from the browser are never
// forwarded.
type Remote struct {
	o       RemoteOptions
	target  *url.URL
	console *Console
}

// maxForward bounds a forwarded request body (the admin API's own limit
// is 64 KiB).
const maxForward = 1 << 20

// NewRemote returns a Remote; o is copied.
func NewRemote(o *RemoteOptions) (*Remote, error) {
	if o == nil || o.Sign == nil || o.Target == "" {
		return nil, errors.New("console: a target URL and a signer are required")
	}
	if len(o.Key) < 24 {
		return nil, errors.New("console: the login key must be at least 24 characters")
	}
	u, err := url.Parse(strings.TrimRight(o.Target, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) {
		return nil, errors.New("console: the target must be an https URL of the deployed gateway")
	}
	r := &Remote{o: *o, target: u}
	if r.o.Client == nil {
		r.o.Client = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if r.o.Logger == nil {
		r.o.Logger = slog.Default()
	}
	key := []byte(o.Key)
	r.console, err = New(&Options{
		CheckKey:          func(k string) bool { return constantEqual([]byte(k), key) },
		Principal:         "console (your AWS credentials)",
		KillSwitchRefresh: o.KillSwitchRefresh, Logger: r.o.Logger,
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func isLoopback(host string) bool {
	return host == "127.0.0.1" || host == "::1" || host == "localhost"
}

// ServeHTTP implements http.Handler.
func (rm *Remote) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/" || r.URL.Path == "/admin/" || r.URL.Path+"/" == Prefix:
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	case strings.HasPrefix(r.URL.Path, Prefix):
		rm.console.ServeHTTP(w, r)
	case strings.HasPrefix(r.URL.Path, "/admin/v1/"):
		rm.forward(w, r)
	default:
		SecurityHeaders(w.Header())
		http.NotFound(w, r)
	}
}

func (rm *Remote) forward(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(w.Header())
	if _, fail, used := rm.console.Authenticate(r); !used || fail != "" {
		if !used {
			fail = "log in to the console first (" + Prefix + ")"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":` + jsonString("unauthorized: "+fail) + `}}` + "\n"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxForward))
	if err != nil {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	u := *rm.target
	u.Path = rm.target.Path + r.URL.Path
	u.RawQuery = r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	// Only what the admin API reads: never the browser's cookie, CSRF
	// token or Authorization.
	for _, h := range []string{"Content-Type", "Accept", "traceparent"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	if err := rm.o.Sign(r.Context(), req, body); err != nil {
		rm.o.Logger.Error("console: signing a forwarded request", "path", r.URL.Path, "err", err)
		http.Error(w, "could not sign the request with your AWS credentials (see the terminal)", http.StatusBadGateway)
		return
	}
	resp, err := rm.o.Client.Do(req)
	if err != nil {
		rm.o.Logger.Error("console: forwarding", "path", r.URL.Path, "err", err)
		http.Error(w, "the deployed admin API could not be reached (see the terminal)", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "X-Correlation-ID"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 64<<20))
}

var _ http.Handler = (*Remote)(nil)
