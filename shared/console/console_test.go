package console_test

import (
	"crypto/tls"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/console"
	"github.com/aegis-gw/aegis/shared/display"
)

const key = "the-admin-key-0123456789abcdef"

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newConsole(t *testing.T, o console.Options) (*console.Console, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	o.CheckKey = func(k string) bool { return k == key }
	o.Now = clk.Now
	o.Logger = slog.New(slog.DiscardHandler)
	c, err := console.New(&o)
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

func serve(c http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

func login(t *testing.T, c http.Handler, k string, tlsOn bool) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, console.Prefix+"login", strings.NewReader(url.Values{"key": {k}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	if tlsOn {
		r.TLS = &tls.ConnectionState{}
	}
	return serve(c, r)
}

func sessionCookie(t *testing.T, w *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, ck := range w.Result().Cookies() {
		if ck.Name == console.CookieName {
			return ck
		}
	}
	t.Fatalf("no session cookie; status %d", w.Code)
	return nil
}

func withCookie(r *http.Request, ck *http.Cookie) *http.Request {
	r.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	return r
}

// TestHeaders: every console answer, the login form and the assets and
// the errors alike, carries the strict policy.
func TestHeaders(t *testing.T) {
	c, _ := newConsole(t, console.Options{})
	for _, p := range []string{console.Prefix, console.Prefix + "console.js", console.Prefix + "console.css", console.Prefix + "nothing", console.Prefix + "session"} {
		w := serve(c, httptest.NewRequest(http.MethodGet, p, nil))
		h := w.Result().Header
		for k, want := range map[string]string{
			"Content-Security-Policy": console.CSP, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
			"Cache-Control": "no-store", "Referrer-Policy": "same-origin",
		} {
			if got := h.Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", p, k, got, want)
			}
		}
	}
	if !strings.Contains(console.CSP, "script-src 'self';") || strings.Contains(console.CSP, "unsafe") {
		t.Fatalf("CSP %q allows more than this origin's scripts", console.CSP)
	}
	w := serve(c, httptest.NewRequest(http.MethodGet, console.Prefix+"console.js", nil))
	if ct := w.Result().Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
		t.Fatalf("console.js served as %q", ct)
	}
}

// TestLogin: a wrong key gets no cookie; the right one a cookie that
// holds a random id (never the key), HttpOnly, SameSite=Strict, Secure
// over TLS, and opens the console page; a cross-site form is refused.
func TestLogin(t *testing.T) {
	c, _ := newConsole(t, console.Options{})
	for _, k := range []string{"", "wrong", key + "x", strings.Repeat("k", 1000)} {
		w := login(t, c, k, false)
		if w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 || !strings.Contains(w.Body.String(), "That is not the admin key.") {
			t.Fatalf("key %q: %d %v", k, w.Code, w.Result().Cookies())
		}
	}
	if c.Sessions() != 0 {
		t.Fatal("a refused login made a session")
	}
	for _, site := range []string{"cross-site", "same-site"} {
		r := httptest.NewRequest(http.MethodPost, console.Prefix+"login", strings.NewReader("key="+key))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Sec-Fetch-Site", site)
		if w := serve(c, r); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
			t.Fatalf("%s login: %d", site, w.Code)
		}
	}
	for _, tlsOn := range []bool{false, true} {
		w := login(t, c, key, tlsOn)
		ck := sessionCookie(t, w)
		if w.Code != http.StatusSeeOther || w.Result().Header.Get("Location") != console.Prefix {
			t.Fatalf("login: %d to %q", w.Code, w.Result().Header.Get("Location"))
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure != tlsOn || ck.Path != "/admin/" ||
			strings.Contains(ck.Value, key) || len(ck.Value) < 43 {
			t.Fatalf("cookie (TLS %v): %+v", tlsOn, ck)
		}
		page := serve(c, withCookie(httptest.NewRequest(http.MethodGet, console.Prefix, nil), ck))
		if !strings.Contains(page.Body.String(), `<script src="/admin/console/console.js"`) {
			t.Fatal("the session does not open the console page")
		}
	}
	// Without a session the page is the login form.
	if page := serve(c, httptest.NewRequest(http.MethodGet, console.Prefix, nil)); !strings.Contains(page.Body.String(), `action="/admin/console/login"`) {
		t.Fatal("no login form without a session")
	}
}

// TestAuthenticate: what the admin API asks of a request with the cookie.
func TestAuthenticate(t *testing.T) {
	c, _ := newConsole(t, console.Options{Principal: "p"})
	ck := sessionCookie(t, login(t, c, key, false))
	var info console.Info
	w := serve(c, withCookie(httptest.NewRequest(http.MethodGet, console.Prefix+"session", nil), ck))
	if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil || len(info.CSRF) < 43 || info.Principal != "p" {
		t.Fatalf("session: %s", w.Body)
	}
	if _, _, used := c.Authenticate(httptest.NewRequest(http.MethodGet, "/admin/v1/tenants", nil)); used {
		t.Fatal("a request without the cookie used the console")
	}
	for _, tc := range []struct {
		name, method, csrf string
		hdr                map[string]string
		ok                 bool
	}{
		{"GET", http.MethodGet, "", nil, true},
		{"POST with the token", http.MethodPost, info.CSRF, nil, true},
		{"POST same-origin", http.MethodPost, info.CSRF, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://example.com"}, true},
		{"POST without the token", http.MethodPost, "", nil, false},
		{"DELETE with a wrong token", http.MethodDelete, info.CSRF[1:] + "A", nil, false},
		{"POST cross-site", http.MethodPost, info.CSRF, map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{"POST from another origin", http.MethodPost, info.CSRF, map[string]string{"Origin": "http://evil.example"}, false},
		{"POST from a null origin", http.MethodPost, info.CSRF, map[string]string{"Origin": "null"}, false},
	} {
		r := withCookie(httptest.NewRequest(tc.method, "http://example.com/admin/v1/tenants", nil), ck)
		if tc.csrf != "" {
			r.Header.Set(console.CSRFHeader, tc.csrf)
		}
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		p, fail, used := c.Authenticate(r)
		if !used || (p == "p") != tc.ok || (fail == "") != tc.ok {
			t.Errorf("%s: principal %q fail %q used %v; want ok %v", tc.name, p, fail, used, tc.ok)
		}
	}
	r := withCookie(httptest.NewRequest(http.MethodGet, "/admin/v1/tenants", nil), &http.Cookie{Name: console.CookieName, Value: "forged"})
	if p, fail, used := c.Authenticate(r); !used || p != "" || fail == "" {
		t.Fatalf("a forged cookie: %q %q %v", p, fail, used)
	}
}

// TestSessionLifetimes: a session ends after its idle time and after its
// lifetime, however busy.
func TestSessionLifetimes(t *testing.T) {
	c, clk := newConsole(t, console.Options{Idle: time.Minute, Lifetime: 3 * time.Minute})
	ck := sessionCookie(t, login(t, c, key, false))
	live := func() bool {
		p, _, _ := c.Authenticate(withCookie(httptest.NewRequest(http.MethodGet, "/admin/v1/tenants", nil), ck))
		return p != ""
	}
	for range 5 { // busy: within the idle time each step, until the lifetime
		clk.Advance(50 * time.Second)
		if want := clk.Now().Before(time.Date(2026, 12, 1, 9, 3, 0, 0, time.UTC)); live() != want {
			t.Fatalf("at %s: live %v, want %v", clk.Now(), !want, want)
		}
	}
	ck = sessionCookie(t, login(t, c, key, false))
	clk.Advance(time.Minute)
	if live() {
		t.Fatal("alive after its idle time")
	}
}

// TestSessionBound: at most MaxSessions live; a new login evicts the
// least recently used.
func TestSessionBound(t *testing.T) {
	c, clk := newConsole(t, console.Options{MaxSessions: 3})
	var cks []*http.Cookie
	for range 5 {
		clk.Advance(time.Second)
		cks = append(cks, sessionCookie(t, login(t, c, key, false)))
	}
	if n := c.Sessions(); n != 3 {
		t.Fatalf("%d sessions, want 3", n)
	}
	for i, ck := range cks {
		p, _, _ := c.Authenticate(withCookie(httptest.NewRequest(http.MethodGet, "/admin/v1/tenants", nil), ck))
		if (p != "") != (i >= 2) {
			t.Errorf("session %d live %v", i, p != "")
		}
	}
}

// TestHiddenIsDisplayHidden: the script's list of characters to spell out
// is display.Hidden, exactly.
func TestHiddenIsDisplayHidden(t *testing.T) {
	c, _ := newConsole(t, console.Options{})
	w := serve(c, httptest.NewRequest(http.MethodGet, console.Prefix+"hidden.json", nil))
	var v struct{ Ranges [][2]rune }
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || len(v.Ranges) == 0 {
		t.Fatalf("hidden.json: %v %s", err, w.Body)
	}
	in := func(r rune) bool {
		for _, rg := range v.Ranges {
			if r >= rg[0] && r <= rg[1] {
				return true
			}
		}
		return false
	}
	i := 0 // the ranges are sorted: walk them with every rune
	for r := rune(0); r <= 0x10FFFF; r++ {
		for i < len(v.Ranges) && v.Ranges[i][1] < r {
			i++
		}
		listed := i < len(v.Ranges) && v.Ranges[i][0] <= r
		if listed != display.Hidden(r) {
			t.Fatalf("U+%04X: in the list %v, display.Hidden %v", r, listed, display.Hidden(r))
		}
	}
	for _, r := range []rune{0x1b, 0x202e, 0x200b, 0xfeff, 0xe0041, 0x2800, 0x2028} {
		if !in(r) {
			t.Fatalf("U+%04X not in the list", r)
		}
	}
}

// TestAssetsAreInert: the pages hold no inline script, event handler or
// style attribute (the CSP would block them), and the script never hands
// text to the HTML parser or to eval.
func TestAssetsAreInert(t *testing.T) {
	fsys := console.Assets()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		s := string(b)
		switch {
		case strings.HasSuffix(p, ".html"):
			for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(s, -1) {
				if !strings.Contains(tag, ` src="/admin/console/`) {
					t.Errorf("%s holds an inline script: %s", p, tag)
				}
			}
			for _, re := range []string{`\son[a-z]+=`, `\sstyle=`, `javascript:`, `<style`} {
				if m := regexp.MustCompile(re).FindString(s); m != "" {
					t.Errorf("%s holds %q", p, m)
				}
			}
		case strings.HasSuffix(p, ".js"):
			for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setTimeout('", `setTimeout("`, ".style.", "setAttribute('style'"} {
				if strings.Contains(s, bad) {
					t.Errorf("%s uses %s", p, bad)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLoginNotices: the login form says why it is shown when the script
// sent the browser back after a log-out or an ended session; any other
// ?notice= value shows nothing and is never echoed.
func TestLoginNotices(t *testing.T) {
	c, _ := newConsole(t, console.Options{})
	for _, tc := range []struct{ query, want string }{
		{"notice=logged-out", "You are logged out."},
		{"notice=ended", "Your session ended"},
		{"notice=%3Cb%3Ehi", ""},
		{"", ""},
	} {
		body := serve(c, httptest.NewRequest(http.MethodGet, console.Prefix+"?"+tc.query, nil)).Body.String()
		has := strings.Contains(body, `id="login-notice"`)
		if tc.want == "" {
			if has || strings.Contains(body, "hi") && strings.Contains(body, "<b>") {
				t.Errorf("?%s: a notice shown:\n%s", tc.query, body)
			}
			continue
		}
		if !has || !strings.Contains(body, tc.want) {
			t.Errorf("?%s: no notice %q:\n%s", tc.query, tc.want, body)
		}
	}
}
