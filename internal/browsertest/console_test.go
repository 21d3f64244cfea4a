package browsertest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/testtools"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/upstream"
)

var shotsDir = flag.String("shots", "", "write a PNG screenshot of each console page here (default: $TMPDIR/aegis-console-shots)")

// The gateway and the browser, started once by TestMain for every run of
// the test (-count=N runs it N times against them, each run in a fresh
// browser context: no cookie or storage is shared between runs).
var (
	base, adminKey, demoKey string
	browser                 context.Context
	runs                    atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(mainRun(m)) }

func mainRun(m *testing.M) int {
	flag.Parse()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		fmt.Fprintln(os.Stderr, testtools.Missing("chromium", err))
		return 1
	}
	dir, err := os.MkdirTemp("", "aegis-browsertest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "aegis")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/aegis-gw/aegis/cmd/aegis").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/aegis: %v\n%s", err, out)
		return 1
	}
	adminKey = "console-test-admin-key-0123456789"
	stop, err := startServe(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "aegis serve --demo:", err)
		return 1
	}
	defer stop()

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.WindowSize(1280, 1000))...)
	defer cancelAlloc()
	b, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(b); err != nil {
		fmt.Fprintln(os.Stderr, "start chromium:", err)
		return 1
	}
	browser = b
	return m.Run()
}

// startServe runs `aegis serve --demo` on a free loopback port and reads
// its address and demo key from the banner; stop ends it by its PID.
func startServe(bin string) (stop func(), err error) {
	cmd := exec.Command(bin, "serve", "--demo", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "AEGIS_ADMIN_KEY="+adminKey, "AEGIS_DEMO_KEY=")
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	banner := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		listen := regexp.MustCompile(`^aegis gateway listening on (http://\S+)$`)
		key := regexp.MustCompile(`^demo API key: (\S+)$`)
		for sc.Scan() {
			l := sc.Text()
			if m := listen.FindStringSubmatch(l); m != nil {
				base = m[1]
			}
			if m := key.FindStringSubmatch(l); m != nil {
				demoKey = m[1]
			}
			if strings.HasPrefix(l, "admin API on") {
				banner <- nil
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		banner <- errors.New("exited before its banner")
	}()
	select {
	case err = <-banner:
	case <-time.After(2 * time.Minute):
		err = errors.New("no banner in 2 minutes")
	}
	if err == nil && (base == "" || demoKey == "") {
		err = errors.New("the banner has no address or demo key")
	}
	if err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// TestConsole is issue 17's walk through the console: log in with the
// keyboard, see the demo agent's call held, approve it from the keyboard,
// see the agent's retry run, stop a tool, find both in the audit trail,
// make a key (shown once), read the upstreams and the pins, resume the
// tool, and check that every control of every page has a label.
func TestConsole(t *testing.T) {
	n := runs.Add(1)
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// wait polls expr in the page until it is true. A navigation (a form
	// post, a redirect) ends the page the poll ran in: poll the new one.
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

	problems := watchProblems(ctx)

	// Log in from the keyboard: the key field has the focus and its label.
	do("open the console", chromedp.Navigate(base+"/admin/console/"), chromedp.WaitVisible(chromedp.ID("key")))
	wait("the focus on the key field", `document.activeElement && document.activeElement.id === "key"`)
	if got := focusedName(t, ctx); got != "Admin key" {
		t.Fatalf("the login field's accessible name is %q, want %q", got, "Admin key")
	}
	shot(t, ctx, n, "login")
	do("type a wrong key", chromedp.KeyEvent("not-the-admin-key-at-all-0000\r"))
	wait("the refusal", `document.getElementById("login-error") !== null`)
	if got := eval(`document.getElementById("login-error").textContent`); got != "That is not the admin key." {
		t.Fatalf("wrong key: %q", got)
	}
	do("log in", chromedp.SendKeys(chromedp.ID("key"), adminKey), chromedp.KeyEvent("\r"))
	wait("the console", `document.body.getAttribute("data-ready") === "true"`)
	if c := eval(`document.cookie`); c != "" {
		t.Fatalf("the session cookie is readable from the page (not HttpOnly): %q", c)
	}

	// The demo agent calls transfer: held for approval.
	ag := newAgent(t, ctx)
	args := map[string]any{"to": fmt.Sprintf("acct-%d-%d", n, time.Now().UnixNano()), "amount": float64(n)}
	_, _, err := ag.call(ctx, "transfer", args)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != ag.wire(refusal.CodeApprovalRequired) {
		t.Fatalf("transfer before approval: %v; want %d", err, ag.wire(refusal.CodeApprovalRequired))
	}
	var held struct {
		ApprovalID string `json:"approval_id"`
		Status     string `json:"status"`
	}
	if err := json.Unmarshal(werr.Data, &held); err != nil || held.ApprovalID == "" || held.Status != "pending" {
		t.Fatalf("held data %s: %v", werr.Data, err)
	}
	card := `document.querySelector('article[data-approval="` + held.ApprovalID + `"]')`
	do("open the approvals", chromedp.Navigate(base+"/admin/console/#approvals"))
	wait("the held call on the approvals page", card+` !== null`)
	// The params exactly as the approvers' view holds them.
	want := adminParams(t, held.ApprovalID)
	if got := eval(card + `.querySelector("pre.params").textContent`); got != want {
		t.Fatalf("params shown %q, want the masked view %q", got, want)
	}

	// A call whose params carry markup (sent raw: the SDK's encoder would
	// escape the angle brackets) is shown as the masked view has it (which
	// writes < as \u003c), never as elements, and denied.
	hostile := heldRaw(t, fmt.Sprintf(`{"to":"<img src=x id=injected-%d><b>acct</b>","amount":0.5}`, n))
	card2 := `document.querySelector('article[data-approval="` + hostile + `"]')`
	wait("the second held call", card2+` !== null`)
	want2 := adminParams(t, hostile)
	if got := eval(card2 + `.querySelector("pre.params").textContent`); got != want2 || !strings.Contains(got, "img src=x id=injected-") {
		t.Fatalf("params with markup shown %q, want the masked view %q with the markup as text", got, want2)
	}
	if got := eval(`String(document.querySelectorAll("img, b").length)`); got != "0" {
		t.Fatalf("the agent's markup became %s element(s) in the page", got)
	}
	do("deny it", chromedp.SendKeys(chromedp.JSPath(card2+`.querySelector("input.reason")`), "markup in a destination"),
		chromedp.Click(chromedp.JSPath(card2+`.querySelector("button.deny")`)))
	wait("the denied card gone", card2+` === null`)
	wait("the denial confirmed", `document.getElementById("status").textContent.startsWith("Denied transfer")`)
	shot(t, ctx, n, "approvals")

	// Approve from the keyboard: Reason, then Your name, then Approve,
	// each with its name.
	do("focus the reason", chromedp.Focus(chromedp.JSPath(card+`.querySelector("input.reason")`)))
	for _, step := range []struct{ tag, name, keys string }{
		{"INPUT", "Reason", "looks right " + held.ApprovalID[:8]},
		{"INPUT", "Your name", "console-test"},
		{"BUTTON", "Approve", ""},
	} {
		if got := eval(`document.activeElement.tagName`); got != step.tag {
			t.Fatalf("focus is on a %s, want the %s %q", got, step.tag, step.name)
		}
		if got := focusedName(t, ctx); got != step.name {
			t.Fatalf("the focused control's accessible name is %q, want %q", got, step.name)
		}
		if step.keys != "" {
			do("type "+step.name, chromedp.KeyEvent(step.keys), chromedp.KeyEvent("\t"))
		}
	}
	if got := eval(`document.activeElement.nextElementSibling ? document.activeElement.nextElementSibling.textContent : ""`); got != "Deny" {
		t.Fatalf("after Approve comes %q, want Deny", got)
	}
	do("approve", chromedp.KeyEvent("\r"))
	wait("the card gone", card+` === null`)
	wait("the confirmation", `document.getElementById("status").textContent.startsWith("Approved transfer")`)

	// The agent's retry runs.
	res, corr, err := ag.call(ctx, "transfer", args)
	if err != nil || res.IsError {
		t.Fatalf("transfer after approval: %v %+v", err, res)
	}
	if corr == "" {
		t.Fatal("the retry's answer had no X-Correlation-ID")
	}

	// Stop echo.
	do("open the kill switches", chromedp.Navigate(base+"/admin/console/#stops"))
	wait("the stop form", `document.querySelector('#stop-server option[value="mock-primary"]') !== null`)
	do("stop echo", chromedp.SetValue(chromedp.ID("stop-server"), "mock-primary"),
		chromedp.SendKeys(chromedp.ID("stop-tool"), "echo"), chromedp.SendKeys(chromedp.ID("stop-reason"), "browser test"),
		chromedp.Click(chromedp.ID("stop-do")))
	row := `document.querySelector('#stops-table tr[data-server="mock-primary"][data-tool="echo"]')`
	wait("the stop listed", row+` !== null && `+row+`.querySelector("td.everywhere").textContent !== ""`)
	if got := eval(row + `.querySelector("td.everywhere").textContent`); !strings.HasPrefix(got, "by ") && !strings.HasPrefix(got, "in force since ") {
		t.Fatalf("when the stop is in force everywhere: %q", got)
	}
	wait("the stop confirmed", `document.getElementById("status").textContent === "Tool echo on mock-primary stopped: in force on every instance at once."`)
	wait("the stop in force everywhere", row+`.querySelector("td.everywhere").textContent.startsWith("in force since ")`)
	shot(t, ctx, n, "stops")

	// Both in the audit trail: the approved call (by its correlation id)
	// and the stop; then only refusals of transfer, and the chart.
	do("open the audit", chromedp.Navigate(base+"/admin/console/#audit"))
	wait("the approved call in the audit", `[...document.querySelectorAll("#audit-table tr.rec")].some(r => r.dataset.method === "tools/call" && r.dataset.tool === "transfer" && r.dataset.outcome === "allowed" && r.lastElementChild.textContent === "`+corr+`")`)
	wait("the stop in the audit", `[...document.querySelectorAll("#audit-table tr.rec")].some(r => r.dataset.method === "killswitch.stop" && r.dataset.tool === "echo")`)
	wait("the chart", `document.querySelectorAll("#audit-svg rect.bar").length > 0`)
	shot(t, ctx, n, "audit")
	do("filter held transfers", chromedp.SetValue(chromedp.ID("audit-outcome"), "held"),
		chromedp.SendKeys(chromedp.ID("audit-tool"), "transfer"), chromedp.SendKeys(chromedp.ID("audit-code"), "-32061"),
		chromedp.Click(chromedp.ID("audit-do")))
	wait("only held transfer calls", `(() => { const rs = [...document.querySelectorAll("#audit-table tr.rec")]; return rs.length > 0 && rs.every(r => r.dataset.meaning === "held" && r.dataset.outcome === "refused" && r.dataset.tool === "transfer" && r.children[2].textContent === "-32061"); })()`)
	if got := eval(`[...document.querySelectorAll("#audit-svg rect.bar")].map(r => r.dataset.series).filter((v, i, a) => a.indexOf(v) === i).join("|")`); got != "held" {
		t.Fatalf("chart series after the filter: %q", got)
	}

	// A new key, shown once.
	do("open the registry", chromedp.Navigate(base+"/admin/console/#registry"))
	wait("the keys", `document.querySelectorAll("#keys-table tbody tr").length > 0`)
	do("make a key", chromedp.SendKeys(chromedp.ID("key-caller"), fmt.Sprintf("browser-%d", n)), chromedp.Click(chromedp.ID("key-do")))
	wait("the new key", `!document.getElementById("key-new").hidden && document.getElementById("key-secret").value.startsWith("aegis_")`)
	if got := eval(`document.activeElement.id`); got != "key-secret" {
		t.Fatalf("after making a key the focus is on %q, want the key", got)
	}
	shot(t, ctx, n, "registry")
	do("hide the key", chromedp.Click(chromedp.ID("key-hide")))
	wait("the key gone from the page", `document.getElementById("key-new").hidden && document.getElementById("key-secret").value === "" && document.activeElement.id === "key-caller"`)

	// Upstreams and pins.
	do("open the upstreams", chromedp.Navigate(base+"/admin/console/#upstreams"))
	wait("the circuit", `(() => { const r = document.querySelector('#upstreams-table tr[data-server="mock-primary"]'); return r !== null && r.querySelector("td.circuit").textContent === "closed"; })()`)
	shot(t, ctx, n, "upstreams")
	do("open the pins", chromedp.Navigate(base+"/admin/console/#pins"))
	wait("the pins", `[...document.querySelectorAll("#pins-table tbody tr")].some(r => r.children.length > 1 && r.children[1].textContent === "transfer")`)
	shot(t, ctx, n, "pins")

	// Every control of every page has an accessible name.
	for _, page := range consolePages {
		do("open "+page, chromedp.Navigate(base+"/admin/console/#"+page))
		// Drawn, not only shown: a table replaced while its controls are
		// read would hand a detached button to the accessibility tree.
		wait(page+" drawn", `!document.getElementById("page-`+page+`").hidden && document.getElementById("nav-`+page+`").getAttribute("aria-current") === "page" && document.body.getAttribute("data-loaded") === "`+page+`"`)
		unnamed := unnamedControls(t, ctx, page)
		if len(unnamed) > 0 {
			t.Fatalf("controls without an accessible name on %s: %v", page, unnamed)
		}
	}

	// Resume echo with the row's own button.
	do("open the kill switches", chromedp.Navigate(base+"/admin/console/#stops"))
	wait("the stop listed", row+` !== null`)
	do("resume echo", chromedp.Click(chromedp.JSPath(row+`.querySelector("button")`)))
	wait("the stop gone", row+` === null`)

	// Log out: the session is gone for the API too.
	do("log out", chromedp.Click(chromedp.ID("logout")))
	wait("the login form", `document.getElementById("key") !== null`)
	wait("the log-out notice", `document.getElementById("login-notice") !== null && document.getElementById("login-notice").textContent.startsWith("You are logged out.")`)
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/admin/v1/tenants").then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusUnauthorized {
		t.Fatalf("the admin API after logout answers %d (%v), want 401", status, err)
	}

	// No script error and no Content-Security-Policy violation on the
	// whole walk; and the watch does see one: an inline script is refused.
	if got := problems.all(); len(got) > 0 {
		t.Fatalf("the pages logged problems: %q", got)
	}
	do("inject an inline script", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.createElement("script"); s.textContent = "window.ran = 1"; document.body.append(s); })()`))
	if err := problems.waitFor(ctx, "Content Security Policy"); err != nil {
		t.Fatalf("no CSP violation reported for an inline script: %v (seen %q)", err, problems.all())
	}
	if ran := eval(`String(window.ran)`); ran != "undefined" {
		t.Fatal("an inline script ran under the console's CSP")
	}
}

// pageProblems collects what a page logs as an error or a warning (but
// network answers, such as the 401s the test asks for) and its uncaught
// exceptions.
type pageProblems struct {
	mu     sync.Mutex
	list   []string
	notify chan struct{}
}

func watchProblems(ctx context.Context) *pageProblems {
	p := &pageProblems{notify: make(chan struct{}, 1)}
	logs := chromedp.Events(ctx, cdplog.EntryAdded)
	excs := chromedp.Events(ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range logs {
			if err != nil {
				return
			}
			if e := ev.Entry; e.Source != cdplog.EntrySourceNetwork && (e.Level == cdplog.EntryLevelError || e.Level == cdplog.EntryLevelWarning) {
				p.add(string(e.Source) + ": " + e.Text)
			}
		}
	}()
	go func() {
		for ev, err := range excs {
			if err != nil {
				return
			}
			p.add("exception: " + ev.ExceptionDetails.Text)
		}
	}()
	return p
}

func (p *pageProblems) add(s string) {
	p.mu.Lock()
	p.list = append(p.list, s)
	p.mu.Unlock()
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func (p *pageProblems) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

// waitFor waits until a problem containing sub has been seen.
func (p *pageProblems) waitFor(ctx context.Context, sub string) error {
	for {
		for _, s := range p.all() {
			if strings.Contains(s, sub) {
				return nil
			}
		}
		select {
		case <-p.notify:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// navigated reports whether err says that the page a script ran in went
// away (a navigation replaced it).
func navigated(err error) bool {
	m := err.Error()
	return strings.Contains(m, "navigated or closed") || strings.Contains(m, "context was destroyed") ||
		strings.Contains(m, "Cannot find context")
}

// focusedName is the accessible name chromium computes for the focused
// element.
func focusedName(t *testing.T, ctx context.Context) string {
	t.Helper()
	obj, err := chromedp.Run(ctx, chromedp.Evaluate[*runtime.RemoteObject](`document.activeElement`))
	if err != nil {
		t.Fatal(err)
	}
	return axName(t, ctx, obj)
}

func axName(t *testing.T, ctx context.Context, obj *runtime.RemoteObject) string {
	t.Helper()
	no := false
	res, err := chromedp.Call(ctx, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{ObjectID: obj.ObjectID, FetchRelatives: &no})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Nodes) == 0 || res.Nodes[0].Name == nil {
		return ""
	}
	var s string
	_ = json.Unmarshal(res.Nodes[0].Name.Value, &s)
	return s
}

// unnamedControls lists the visible controls of the page whose accessible
// name is empty.
func unnamedControls(t *testing.T, ctx context.Context, page string) []string {
	t.Helper()
	sel := `#page-` + page + ` :is(input, select, button, textarea, a[href]), header :is(input, select, button, a[href])`
	count, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("`+sel+`").length`))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range count {
		obj, err := chromedp.Run(ctx, chromedp.Evaluate[*runtime.RemoteObject](fmt.Sprintf(`document.querySelectorAll("%s")[%d]`, sel, i)))
		if err != nil {
			t.Fatal(err)
		}
		visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelectorAll("%s")[%d].getClientRects().length > 0`, sel, i)))
		if err != nil {
			t.Fatal(err)
		}
		if visible && strings.TrimSpace(axName(t, ctx, obj)) == "" {
			desc, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(e => e.tagName + "#" + e.id)(document.querySelectorAll("%s")[%d])`, sel, i)))
			out = append(out, desc)
		}
	}
	return out
}

// adminParams is the params of approval id as the admin API holds them
// (the approvers' masked view), byte for byte.
func adminParams(t *testing.T, id string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/admin/v1/approvals/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Params json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET approval: %d %v", resp.StatusCode, err)
	}
	return string(a.Params)
}

// heldRaw sends tools/call transfer with args (raw JSON) to /v1/invoke as
// the demo agent and returns the approval id of the held call.
func heldRaw(t *testing.T, args string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer","arguments":` + args + `}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/invoke", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+demoKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Error *struct {
			Code int `json:"code"`
			Data struct {
				ApprovalID string `json:"approval_id"`
			} `json:"data"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(resp.Body)
	if json.Unmarshal(b, &a) != nil || a.Error == nil || a.Error.Code != -32061 || a.Error.Data.ApprovalID == "" {
		t.Fatalf("transfer %s: %s; want held (-32061)", args, b)
	}
	return a.Error.Data.ApprovalID
}

var shotMu sync.Mutex

// shotsFolder is where screenshots go: -shots, else
// $TMPDIR/aegis-console-shots.
func shotsFolder() string {
	if *shotsDir != "" {
		return *shotsDir
	}
	return filepath.Join(os.TempDir(), "aegis-console-shots")
}

// shot writes a screenshot of the page (of the first run only).
func shot(t *testing.T, ctx context.Context, n int64, name string) {
	t.Helper()
	if n != 1 {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := shotsFolder()
	shotMu.Lock()
	defer shotMu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// agent is the demo agent: the official MCP Go SDK's client on /mcp with
// the demo key. It remembers the X-Correlation-ID of its last tools/call.
type agent struct {
	sess *mcp.ClientSession
	rt   *keyRT
}

type keyRT struct {
	mu   sync.Mutex
	corr string
}

func (k *keyRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+demoKey)
	call := false
	if r.Body != nil && r.Method == http.MethodPost {
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		call = bytes.Contains(b, []byte(`"tools/call"`))
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && call {
		k.mu.Lock()
		k.corr = resp.Header.Get("X-Correlation-ID")
		k.mu.Unlock()
	}
	return resp, err
}

func newAgent(t *testing.T, ctx context.Context) *agent {
	t.Helper()
	rt := &keyRT{}
	c := mcp.NewClient(&mcp.Implementation{Name: "demo-agent", Version: "1.0.0"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: rt}}, nil)
	if err != nil {
		t.Fatalf("agent connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// tools/list, as an agent does first: it pins the definitions.
	if _, err := s.ListTools(ctx, nil); err != nil {
		t.Fatalf("agent tools/list: %v", err)
	}
	return &agent{sess: s, rt: rt}
}

// wire is refusal code c as this agent's session receives it: the Go SDK
// client negotiates MCP 2026-07-28, whose numbering moves aegis's codes
// (docs/error-codes.md, "Codes per protocol version").
func (a *agent) wire(c refusal.Code) int64 {
	n := refusal.Seed
	if upstream.IsModern(a.sess.InitializeResult().ProtocolVersion) {
		n = refusal.MCP20260728
	}
	return int64(n.Wire(c))
}

func (a *agent) call(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, string, error) {
	res, err := a.sess.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	a.rt.mu.Lock()
	defer a.rt.mu.Unlock()
	return res, a.rt.corr, err
}
