package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/aegis-gw/aegis/shared/refusal"
)

var viewRuns atomic.Int64

// consolePages are the console's pages, in the order of its top bar.
var consolePages = []string{"overview", "approvals", "stops", "audit", "registry", "upstreams", "pins", "connections"}

// meaningColours are the console's colours by meaning (console.css), as
// the browser computes them: the same in every view.
var meaningColours = map[string]string{
	"allowed":       "rgb(46, 125, 50)",
	"held":          "rgb(21, 101, 192)",
	"refused":       "rgb(198, 40, 40)",
	"error":         "rgb(230, 81, 0)",
	"indeterminate": "rgb(97, 97, 97)",
}

// TestConsoleViews is issue 33's console: with calls of three meanings in
// the audit (allowed, held, refused), every page at 1280 and at 420 pixels
// has no horizontal overflow (a screenshot of each is written: -shots, or
// $TMPDIR/aegis-console-shots, as PAGE-WIDTH.png); each meaning has one
// colour in the audit's badges, its chart and legend and the overview's
// legend; the overview's figures are the audit's (calls counted once,
// refusals by word); the stop form resets after a stop, explains an
// unknown tool in plain words and offers "Not listed yet"; a bad audit
// filter says what is wrong; times carry their relative form.
func TestConsoleViews(t *testing.T) {
	n := viewRuns.Add(1)
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelT()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	wait := func(what, expr string) {
		t.Helper()
		for {
			_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr))
			if err == nil {
				return
			}
			if ctx.Err() == nil && navigated(err) {
				continue
			}
			t.Fatalf("waiting for %s (%s): %v", what, expr, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return s
	}
	open := func(page string) {
		t.Helper()
		do("open "+page, chromedp.Navigate(base+"/admin/console/#"+page))
		wait(page+" drawn", `!document.getElementById("page-`+page+`").hidden && document.body.getAttribute("data-loaded") === "`+page+`"`)
	}
	problems := watchProblems(ctx)

	do("open the console", chromedp.EmulateViewport(1280, 1000), chromedp.Navigate(base+"/admin/console/"), chromedp.WaitVisible(chromedp.ID("key")))
	do("log in", chromedp.SendKeys(chromedp.ID("key"), adminKey), chromedp.KeyEvent("\r"))
	wait("the console", `document.body.getAttribute("data-ready") === "true"`)
	wait("the overview first", `document.body.getAttribute("data-loaded") === "overview"`)

	// The stop form: an unknown tool (with markup in its name) is
	// explained in plain words, with the choice the form offers.
	open("stops")
	do("stop an unknown tool", chromedp.SetValue(chromedp.ID("stop-server"), "mock-primary"),
		chromedp.SendKeys(chromedp.ID("stop-tool"), fmt.Sprintf("<b>later-%d", n)), chromedp.SendKeys(chromedp.ID("stop-reason"), "not there yet"),
		chromedp.Click(chromedp.ID("stop-do")))
	wait("the explanation", `document.getElementById("error").textContent !== ""`)
	msg := eval(`document.getElementById("error").textContent`)
	if want := fmt.Sprintf(`Server mock-primary lists no tool "<b>later-%d". Check the name; if it is a tool the server will list later, tick "Not listed yet" and press Stop again.`, n); msg != want {
		t.Fatalf("unknown tool: %q, want %q", msg, want)
	}
	do("tick Not listed yet and stop again", chromedp.Click(chromedp.ID("stop-unlisted")), chromedp.Click(chromedp.ID("stop-do")))
	later := fmt.Sprintf(`document.querySelector('#stops-table tr[data-server="mock-primary"][data-tool="<b>later-%d"]')`, n)
	wait("the unlisted stop listed", later+` !== null`)
	wait("the form reset", `document.getElementById("stop-tool").value === "" && document.getElementById("stop-reason").value === "" && !document.getElementById("stop-unlisted").checked && document.getElementById("stop-server").value === "mock-primary"`)
	if e := eval(`document.getElementById("error").textContent`); e != "" {
		t.Fatalf("the error stays after the stop: %q", e)
	}
	do("resume it", chromedp.Click(chromedp.JSPath(later+`.querySelector("button")`)))
	wait("the unlisted stop gone", later+` === null`)

	// Stop leak with the form (reset again), so that a call of it is refused.
	do("stop leak", chromedp.SendKeys(chromedp.ID("stop-tool"), "leak"), chromedp.SendKeys(chromedp.ID("stop-reason"), "views test"), chromedp.Click(chromedp.ID("stop-do")))
	leakRow := `document.querySelector('#stops-table tr[data-server="mock-primary"][data-tool="leak"]')`
	wait("leak stopped", leakRow+` !== null`)
	wait("the form reset", `document.getElementById("stop-tool").value === "" && document.getElementById("stop-reason").value === ""`)

	// Calls of three meanings.
	ag := newAgent(t, ctx)
	for range 2 {
		if _, _, err := ag.call(ctx, "echo", map[string]any{"message": "views"}); err != nil {
			t.Fatal(err)
		}
	}
	var werr *jsonrpc.Error
	if _, _, err := ag.call(ctx, "leak", map[string]any{}); !errors.As(err, &werr) || werr.Code != ag.wire(refusal.CodeToolStopped) {
		t.Fatalf("leak while stopped: %v; want %d", err, ag.wire(refusal.CodeToolStopped))
	}
	if _, _, err := ag.call(ctx, "transfer", map[string]any{"to": fmt.Sprintf("views-%d-%d", n, time.Now().UnixNano()), "amount": 1.0}); !errors.As(err, &werr) || werr.Code != ag.wire(refusal.CodeApprovalRequired) {
		t.Fatalf("transfer: %v; want %d", err, ag.wire(refusal.CodeApprovalRequired))
	}
	do("resume leak", chromedp.Navigate(base+"/admin/console/#stops"))
	wait("leak listed", leakRow+` !== null`)
	do("resume leak", chromedp.Click(chromedp.JSPath(leakRow+`.querySelector("button")`)))
	wait("leak resumed", leakRow+` === null`)

	// The overview's figures are the audit's, read here through the API.
	open("overview")
	var want overviewFigures
	for {
		want = auditFigures(t)
		got := pageFigures(t, eval)
		if got.String() == want.String() {
			break
		}
		if ctx.Err() != nil || time.Until(deadlineOf(ctx)) < 30*time.Second {
			t.Fatalf("overview shows %s; the audit has %s", got, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if want.calls == 0 || want.words["TOOL_STOPPED"] == 0 || want.words["APPROVAL_REQUIRED"] == 0 {
		t.Fatalf("the audit lacks the test's calls: %s", want)
	}
	if got := eval(`document.querySelector('#ov-upstreams li[data-server="mock-primary"]').getAttribute("data-circuit")`); got != "closed" {
		t.Fatalf("overview: mock-primary's circuit %q", got)
	}
	if got := eval(`document.querySelector('#ov-stops').textContent`); got != "Nothing is stopped." {
		t.Fatalf("overview stops: %q", got)
	}
	for _, link := range []string{"audit", "upstreams", "approvals", "stops"} {
		if got := eval(`String(document.querySelectorAll('#page-overview .box h3 a[href="#` + link + `"]').length)`); got == "0" {
			t.Fatalf("no overview box links to %s", link)
		}
	}

	// Colours by meaning, the same in every view.
	colour := func(sel, prop string) string {
		return eval(`(() => { const e = document.querySelector('` + sel + `'); return e ? getComputedStyle(e).` + prop + ` : "(none)"; })()`)
	}
	for _, m := range []string{"allowed", "held", "refused"} {
		if got := colour(`#ov-legend li[data-series="`+m+`"] .swatch`, "backgroundColor"); got != meaningColours[m] {
			t.Errorf("overview legend %s: %s, want %s", m, got, meaningColours[m])
		}
		if got := colour(`#ov-svg rect.bar.m-`+m, "fill"); got != meaningColours[m] {
			t.Errorf("overview chart %s: %s, want %s", m, got, meaningColours[m])
		}
	}
	open("audit")
	wait("the chart", `document.querySelectorAll("#audit-svg rect.bar").length > 0`)
	for _, m := range []string{"allowed", "held", "refused"} {
		for _, v := range []struct{ where, sel, prop string }{
			{"audit badge", `#audit-table tr[data-meaning="` + m + `"] .badge`, "backgroundColor"},
			{"audit legend", `#audit-legend li[data-series="` + m + `"] .swatch`, "backgroundColor"},
			{"audit chart", `#audit-svg rect.bar.m-` + m, "fill"},
		} {
			if got := colour(v.sel, v.prop); got != meaningColours[m] {
				t.Errorf("%s %s: %s, want %s", v.where, m, got, meaningColours[m])
			}
		}
	}
	// Every meaning's rule, and no two alike.
	seen := map[string]string{}
	for m, want := range meaningColours {
		got := eval(`(() => { const e = document.createElement("span"); e.className = "badge m-` + m + `"; document.body.append(e); const c = getComputedStyle(e).backgroundColor; e.remove(); return c; })()`)
		if got != want {
			t.Errorf("the %s badge is %s, want %s", m, got, want)
		}
		if o, dup := seen[got]; dup {
			t.Errorf("%s and %s share the colour %s", m, o, got)
		}
		seen[got] = m
	}
	// A held call is held, once: its approval.held event is not a call.
	if got := eval(`String([...document.querySelectorAll("#audit-table tr.rec")].filter(r => r.dataset.method === "approval.held").every(r => r.dataset.meaning === "event"))`); got != "true" {
		t.Fatal("an approval.held event is shown as a call")
	}
	// Relative times beside the absolute ones.
	if got := eval(`document.querySelector("#audit-table tr.rec td time").textContent`); !strings.HasSuffix(got, "(just now)") && !strings.HasSuffix(got, "min ago)") {
		t.Fatalf("an audit time: %q, want the absolute time and (just now) or (N min ago)", got)
	}
	// A bad filter says what is wrong.
	do("filter by a bad code", chromedp.SendKeys(chromedp.ID("audit-code"), "abc"), chromedp.Click(chromedp.ID("audit-do")))
	wait("the filter's error", `document.getElementById("error").textContent.startsWith("Code must be a JSON-RPC error code")`)
	do("clear the code", chromedp.Evaluate[chromedp.Void](`void (document.getElementById("audit-code").value = "")`), chromedp.Click(chromedp.ID("audit-do")))
	wait("the error gone", `document.getElementById("error").textContent === ""`)
	open("approvals")
	if got := eval(`[...document.querySelectorAll("#approvals-list article p.help span.rel")].map(e => e.textContent).join(" ")`); !strings.Contains(got, "(in 60 min)") && !strings.Contains(got, "(in 59 min)") {
		t.Fatalf("approvals' relative times %q lack an expiry (in 60 min)", got)
	}

	// Each page at 1280 and at 420 pixels: no horizontal overflow.
	for _, w := range []int64{1280, 420} {
		do(fmt.Sprintf("a %d px window", w), chromedp.EmulateViewport(w, 1000))
		for _, page := range consolePages {
			open(page)
			over := eval(`(() => { const W = document.documentElement.clientWidth; if (document.documentElement.scrollWidth <= W) return "";
				return [...document.querySelectorAll("body *")].filter(e => e.getClientRects().length && e.getBoundingClientRect().right > W + 1)
					.slice(0, 5).map(e => e.tagName + (e.id ? "#" + e.id : "") + "." + e.className + " right " + Math.round(e.getBoundingClientRect().right)).join("; ") || "scrollWidth " + document.documentElement.scrollWidth; })()`)
			if over != "" {
				t.Errorf("%s at %d px overflows a %d px window: %s", page, w, w, over)
			}
			viewShot(t, ctx, n, fmt.Sprintf("%s-%d", page, w))
		}
	}
	do("back to 1280", chromedp.EmulateViewport(1280, 1000))
	if got := problems.all(); len(got) > 0 {
		t.Fatalf("the pages logged problems: %q", got)
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// overviewFigures are what the overview counts in its 15 minutes.
type overviewFigures struct {
	calls int
	words map[string]int
}

func (f overviewFigures) String() string {
	var ws []string
	for w, n := range f.words {
		ws = append(ws, fmt.Sprintf("%s=%d", w, n))
	}
	sort.Strings(ws)
	return fmt.Sprintf("%d calls, refusals %v", f.calls, ws)
}

// auditFigures counts the demo tenant's audit of the last 15 minutes as
// the overview must: a record is a call unless its method is an event's
// (a dotted name without "/": approval.held, killswitch.stop), and a
// refused or held call counts under its word.
func auditFigures(t *testing.T) overviewFigures {
	t.Helper()
	now := time.Now().UTC()
	q := url.Values{"from": {now.Add(-15 * time.Minute).Format(time.RFC3339Nano)}, "to": {now.Add(time.Second).Format(time.RFC3339Nano)}, "limit": {"1000"}}
	f := overviewFigures{words: map[string]int{}}
	for {
		req, _ := http.NewRequest(http.MethodGet, base+"/admin/v1/tenants/demo/audit?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+adminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Records []struct {
				Method, Outcome, Word string
			} `json:"records"`
			Next string `json:"next_cursor"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("audit: HTTP %d %v", resp.StatusCode, err)
		}
		for _, r := range page.Records {
			if strings.Contains(r.Method, ".") && !strings.Contains(r.Method, "/") {
				continue
			}
			f.calls++
			if r.Outcome == "refused" && r.Word != "" {
				f.words[r.Word]++
			}
		}
		if page.Next == "" {
			return f
		}
		q.Set("cursor", page.Next)
	}
}

// pageFigures reads the overview's figures.
func pageFigures(t *testing.T, eval func(string) string) overviewFigures {
	t.Helper()
	var raw struct {
		Calls int            `json:"calls"`
		Words map[string]int `json:"words"`
	}
	s := eval(`JSON.stringify({calls: Number(document.getElementById("ov-total").getAttribute("data-count")),
		words: Object.fromEntries([...document.querySelectorAll("#ov-words li[data-word]")].map(e => [e.dataset.word, Number(e.dataset.count)]))})`)
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		t.Fatalf("overview figures %s: %v", s, err)
	}
	return overviewFigures{calls: raw.Calls, words: raw.Words}
}

// viewShot writes a screenshot of the page as NAME.png in the screenshots
// folder (the first run only), as PNG (FullScreenshot gives JPEG below
// quality 100).
func viewShot(t *testing.T, ctx context.Context, n int64, name string) {
	t.Helper()
	if n != 1 {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := shotsFolder()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
