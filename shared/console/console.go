// Package console is the operators' web console: a few static pages and
// one script, embedded in the binary (no CDN, nothing fetched at run time),
// served by the admin API under /admin/console/ and talking to the admin
// API's own JSON routes (/admin/v1/) from the browser.
//
// Authentication is the admin API's: the login form takes the admin key
// (AEGIS_ADMIN_KEY), the admin handler checks it in constant time (the
// CheckKey option), and the console answers with a session cookie that
// holds a random session id, never the key. The session lives in this
// process (bounded by count, with an absolute and an idle lifetime).
// Every request that changes something (any method but GET and HEAD)
// must carry the session's CSRF token in the X-CSRF-Token header,
// compared in constant time, and must not come from another site
// (Sec-Fetch-Site, Origin). Every console response carries a strict
// Content-Security-Policy: scripts only from this origin, no inline
// script, no eval. The script writes agent-supplied text with textContent
// only. docs/console.md is the user's guide, docs/design/console.md the
// reasons.
package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/aegis-gw/aegis/shared/display"
)

// Prefix is where the console is served.
const Prefix = "/admin/console/"

// CookieName is the session cookie.
const CookieName = "aegis_console"

// CSRFHeader is the header every state-changing request carries.
const CSRFHeader = "X-CSRF-Token"

// Defaults of Options.
const (
	DefaultMaxSessions = 64
	DefaultLifetime    = 8 * time.Hour
	DefaultIdle        = 30 * time.Minute
)

// CSP is the Content-Security-Policy of every console response: nothing
// but this origin's own script, style and requests; no inline script, no
// eval, no plugins, no framing, forms post only here.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

//go:embed assets
var assets embed.FS

var pages = template.Must(template.ParseFS(assets, "assets/*.html"))

// Options configure a Console.
type Options struct {
	// CheckKey reports whether key is the admin key, in constant time
	// (the admin handler's own check). Required.
	CheckKey func(key string) bool
	// Principal is what the admin API records as the principal of
	// requests made through the console ("admin-key (console)" when "").
	Principal string
	// KillSwitchRefresh is KILL_SWITCH_REFRESH_SECS as the gateways that
	// share the store run with: a stop written at T is in force on every
	// instance by T + KillSwitchRefresh. 0: at once (the embedded store
	// of aegis serve, which every call reads).
	KillSwitchRefresh time.Duration
	MaxSessions       int           // 0: DefaultMaxSessions
	Lifetime          time.Duration // 0: DefaultLifetime
	Idle              time.Duration // 0: DefaultIdle
	Now               func() time.Time
	Logger            *slog.Logger
}

// Console serves the console's pages and sessions. It is safe for
// concurrent use.
type Console struct {
	o      Options
	static http.Handler

	mu       sync.Mutex
	sessions map[[32]byte]*session // by SHA-256 of the cookie's id
}

type session struct {
	csrf     string
	created  time.Time
	lastSeen time.Time
}

// New returns a console; o is copied and defaults filled.
func New(o *Options) (*Console, error) {
	if o == nil || o.CheckKey == nil {
		return nil, errors.New("console: CheckKey is required")
	}
	c := &Console{o: *o, sessions: map[[32]byte]*session{}}
	if c.o.Principal == "" {
		c.o.Principal = "admin-key (console)"
	}
	if c.o.MaxSessions <= 0 {
		c.o.MaxSessions = DefaultMaxSessions
	}
	if c.o.Lifetime <= 0 {
		c.o.Lifetime = DefaultLifetime
	}
	if c.o.Idle <= 0 {
		c.o.Idle = DefaultIdle
	}
	if c.o.Now == nil {
		c.o.Now = time.Now
	}
	if c.o.Logger == nil {
		c.o.Logger = slog.Default()
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix(Prefix, http.FileServerFS(sub))
	return c, nil
}

// Assets is the embedded pages, script and style (for tests).
func Assets() fs.FS {
	sub, _ := fs.Sub(assets, "assets")
	return sub
}

// SecurityHeaders sets the headers every console response carries.
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with the console's own form posts.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// ServeHTTP serves everything under Prefix: the page (the console with a
// session, else the login form), its script and style, login, logout and
// the session's CSRF token.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(w.Header())
	p := strings.TrimPrefix(r.URL.Path, Prefix)
	switch {
	case r.URL.Path+"/" == Prefix:
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
	case p == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		if _, ok := c.session(r); ok {
			c.page(w, "console.html", http.StatusOK, nil)
			return
		}
		c.page(w, "login.html", http.StatusOK, loginData{Notice: notices[r.URL.Query().Get("notice")]})
	case p == "login" && r.Method == http.MethodPost:
		c.login(w, r)
	case p == "logout" && r.Method == http.MethodPost:
		c.logout(w, r)
	case p == "session" && r.Method == http.MethodGet:
		c.sessionInfo(w, r)
	case p == "hidden.json" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(hiddenJSON())
	case (p == "console.js" || p == "console.css" || p == "login.css") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		c.static.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// loginData fills the login form: a refusal of the key, or a notice of
// why the form is shown.
type loginData struct{ Error, Notice string }

// notices are the login form's notices by the ?notice= the console's
// script sends the browser back with; any other value shows none (the
// query is never echoed).
var notices = map[string]string{
	"logged-out": "You are logged out. The session is gone on the gateway too; log in again to continue.",
	"ended":      "Your session ended (8 hours after log-in, 30 minutes without use, or the gateway restarted). Log in again to continue.",
}

func (c *Console) page(w http.ResponseWriter, name string, status int, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, name, data); err != nil {
		c.o.Logger.Error("console: page", "page", name, "err", err)
	}
}

// crossSite reports whether r comes from a page of another origin: a
// browser says so in Sec-Fetch-Site, or in an Origin that is not this
// host's.
func crossSite(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s != "same-origin" && s != "none" // none: typed by the user, not sent by a page
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return true
		}
	}
	return false
}

const maxKey = 512

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		http.Error(w, "cross-site login refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		c.page(w, "login.html", http.StatusBadRequest, loginData{Error: "The form could not be read."})
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if key == "" || len(key) > maxKey || !c.o.CheckKey(key) {
		c.o.Logger.Warn("console: login refused", "remote", r.RemoteAddr)
		c.page(w, "login.html", http.StatusUnauthorized, loginData{Error: "That is not the admin key."})
		return
	}
	id, err := token()
	if err != nil {
		http.Error(w, "no randomness", http.StatusInternalServerError)
		return
	}
	csrf, err := token()
	if err != nil {
		http.Error(w, "no randomness", http.StatusInternalServerError)
		return
	}
	now := c.o.Now()
	c.mu.Lock()
	c.sweep(now)
	for len(c.sessions) >= c.o.MaxSessions {
		c.evictOldest()
	}
	c.sessions[sha256.Sum256([]byte(id))] = &session{csrf: csrf, created: now, lastSeen: now}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: id, Path: "/admin/", MaxAge: int(c.o.Lifetime / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if _, fail, _ := c.Authenticate(r); fail != "" {
		http.Error(w, fail, http.StatusForbidden)
		return
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		c.mu.Lock()
		delete(c.sessions, sha256.Sum256([]byte(ck.Value)))
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/admin/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// Info is the answer of GET /admin/console/session: what the script needs
// besides the admin API.
type Info struct {
	CSRF      string `json:"csrf"`
	Principal string `json:"principal"`
	// KillSwitchRefreshSecs is Options.KillSwitchRefresh in seconds (0:
	// a stop is in force at once).
	KillSwitchRefreshSecs float64   `json:"kill_switch_refresh_secs"`
	Expires               time.Time `json:"expires"`
}

func (c *Console) sessionInfo(w http.ResponseWriter, r *http.Request) {
	s, ok := c.session(r)
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"unauthorized: no console session; log in again"}}` + "\n"))
		return
	}
	b, _ := json.Marshal(Info{CSRF: s.csrf, Principal: c.o.Principal,
		KillSwitchRefreshSecs: c.o.KillSwitchRefresh.Seconds(), Expires: s.created.Add(c.o.Lifetime).UTC()})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

// Authenticate checks a request that carries the console's session cookie
// (the admin handler asks before it looks for a bearer key). used is
// false when r has no such cookie. Otherwise principal is set when the
// session is live and, for any method but GET and HEAD, the request is
// same-site and carries the session's CSRF token; fail says why not.
func (c *Console) Authenticate(r *http.Request) (principal, fail string, used bool) {
	if _, err := r.Cookie(CookieName); err != nil {
		return "", "", false
	}
	s, ok := c.session(r)
	if !ok {
		return "", "console session expired or unknown; log in again at " + Prefix, true
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if crossSite(r) {
			return "", "cross-site request refused", true
		}
		got := r.Header.Get(CSRFHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
			return "", "missing or wrong " + CSRFHeader + " header (the console sends it; reload the page)", true
		}
	}
	return c.o.Principal, "", true
}

// session returns r's live session (a copy), touching it.
func (c *Console) session(r *http.Request) (session, bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return session{}, false
	}
	k := sha256.Sum256([]byte(ck.Value))
	now := c.o.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.sessions[k]
	if s == nil {
		return session{}, false
	}
	if !c.live(s, now) {
		delete(c.sessions, k)
		return session{}, false
	}
	s.lastSeen = now
	return *s, true
}

func (c *Console) live(s *session, now time.Time) bool {
	return now.Before(s.created.Add(c.o.Lifetime)) && now.Before(s.lastSeen.Add(c.o.Idle))
}

// sweep drops dead sessions; c.mu is held.
func (c *Console) sweep(now time.Time) {
	for k, s := range c.sessions {
		if !c.live(s, now) {
			delete(c.sessions, k)
		}
	}
}

// evictOldest drops the least recently used session; c.mu is held.
func (c *Console) evictOldest() {
	var oldest [32]byte
	var at time.Time
	first := true
	for k, s := range c.sessions {
		if first || s.lastSeen.Before(at) {
			oldest, at, first = k, s.lastSeen, false
		}
	}
	delete(c.sessions, oldest)
}

// Sessions counts the sessions held (for tests of the bound).
func (c *Console) Sessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// hiddenJSON is {"ranges":[[lo,hi],...]}: the code points display.Hidden
// spells out, for the script's shown() (one list, the server's).
var hiddenJSON = sync.OnceValue(func() []byte {
	var ranges [][2]rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !display.Hidden(r) {
			continue
		}
		if n := len(ranges); n > 0 && ranges[n-1][1] == r-1 {
			ranges[n-1][1] = r
		} else {
			ranges = append(ranges, [2]rune{r, r})
		}
	}
	b, _ := json.Marshal(map[string]any{"ranges": ranges})
	return append(b, '\n')
})

func token() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

var _ http.Handler = (*Console)(nil)

// constantEqual compares a and b in constant time (their SHA-256 sums, so
// that the length of b does not show either).
func constantEqual(a, b []byte) bool {
	x, y := sha256.Sum256(a), sha256.Sum256(b)
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
