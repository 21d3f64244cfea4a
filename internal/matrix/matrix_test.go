package matrix_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/aegisbin"
	"github.com/aegis-gw/aegis/internal/matrix"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/ratelimit"
	"github.com/aegis-gw/aegis/shared/refusal"
)

var update = flag.Bool("update", false, "rewrite docs/conformance.md from this run")

const (
	matrixPath = "../../conformance/matrix.yaml"
	docPath    = "../../docs/conformance.md"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		os.Exit(runChild(role))
	}
	code := m.Run()
	dynamotest.Stop()
	aegisbin.Remove()
	os.Exit(code)
}

// TestMatrix runs every row at every boundary it applies to, the
// boundaries concurrently (they share no state), and checks that
// docs/conformance.md is this run's page.
func TestMatrix(t *testing.T) {
	f, err := matrix.Load(matrixPath)
	if err != nil {
		t.Fatal(err)
	}
	res := matrix.Results{}
	var mu sync.Mutex
	set := func(row string, b matrix.Boundary, c matrix.Cell) {
		mu.Lock()
		defer mu.Unlock()
		res.Set(row, b, c)
	}
	var toRun = map[matrix.Boundary][]matrix.Row{}
	for _, r := range f.Rows {
		for _, b := range matrix.Boundaries {
			if c, planned := r.Planned(b); planned {
				set(r.ID, b, c)
			} else {
				toRun[b] = append(toRun[b], r)
			}
		}
	}
	up := startUpstream(t)
	w := startIDP(t)
	tokens := mintTokens(t, f, w)
	t.Run("boundaries", func(t *testing.T) {
		for _, b := range matrix.Boundaries {
			t.Run(string(b), func(t *testing.T) {
				t.Parallel()
				rows := toRun[b]
				if len(rows) == 0 {
					return
				}
				if b == matrix.Wrap {
					runWrap(t, rows, set)
					return
				}
				var targets map[string]target
				switch b {
				case matrix.Gateway:
					targets = startGateway(t, f, up, w)
				case matrix.Serve:
					targets = startServe(t, f, up, w, false)
				case matrix.ServeDynamoDB:
					targets = startServe(t, f, up, w, true)
				case matrix.Lambda:
					targets = startLambda(t, f, up, w)
				}
				runGateway(t, b, targets, rows, tokens, set)
			})
		}
	})
	for _, b := range matrix.Boundaries {
		var unset []string
		for _, r := range f.Rows {
			if res[r.ID][b].Status == "" {
				unset = append(unset, r.ID)
			}
		}
		if len(unset) > 0 {
			t.Errorf("%s: %d cells did not run (the boundary did not start, or -run left them out), first %s", b, len(unset), unset[0])
		}
	}
	page := matrix.Render(f, res)
	if *update {
		if t.Failed() {
			t.Fatal("not writing docs/conformance.md from a failed run")
		}
		must(t, os.WriteFile(docPath, page, 0o644))
		return
	}
	want, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("%v: run `go test ./internal/matrix -update`", err)
	}
	if !bytes.Equal(page, want) {
		t.Errorf("docs/conformance.md is not this run's page: run `go test ./internal/matrix -update` (and commit it)")
	}
}

// operatorEvent reports whether method names an operator's action that
// the audit records beside the calls (a stop set through the admin API,
// an approval decided), not a call.
func operatorEvent(method string) bool {
	return strings.HasPrefix(method, "killswitch.") || strings.HasPrefix(method, "approval.")
}

// recordWait bounds how long a row waits for its audit record, which the
// gateway writes after the answer.
const recordWait = 15 * time.Second

// rowWorkers is how many rows one deployment runs at a time.
const rowWorkers = 4

// runGateway runs rows at the gateway boundary b, rowWorkers at a time per
// profile (a row's tenant is its own, so rows share nothing but the
// process: not a session, a rate window, a meter or a circuit).
func runGateway(t *testing.T, b matrix.Boundary, targets map[string]target, rows []matrix.Row, tokens map[string]string, set func(string, matrix.Boundary, matrix.Cell)) {
	byProfile := map[string][]matrix.Row{}
	for _, r := range rows {
		byProfile[r.Profile] = append(byProfile[r.Profile], r)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var none []matrix.Row // rows that must leave no record: checked last
	results := map[string][]string{}
	for p, rs := range byProfile {
		tg := targets[p]
		queue := make(chan matrix.Row, len(rs))
		for _, r := range rs {
			queue <- r
		}
		close(queue)
		for range rowWorkers {
			wg.Go(func() {
				for r := range queue {
					errs := runRow(t.Context(), tg, r, tokens[r.ID])
					mu.Lock()
					results[r.ID] = errs
					if r.Expect.Audit.None {
						none = append(none, r)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	// A row whose call must leave no record: by now every record of the
	// rows before has been written (each waited for its own), so one the
	// row's tenant has would be there too.
	for _, r := range none {
		all, err := targets[r.Profile].records(t.Context(), r.Tenant())
		var recs []audit.Record
		for _, rec := range all {
			if !operatorEvent(rec.Method) {
				recs = append(recs, rec)
			}
		}
		switch {
		case err != nil:
			results[r.ID] = append(results[r.ID], "reading the audit: "+err.Error())
		case len(recs) > 0:
			results[r.ID] = append(results[r.ID], fmt.Sprintf("want no audit record, the tenant has %d (first: %+v)", len(recs), recs[0]))
		}
	}
	for _, r := range rows {
		t.Run(r.ID, func(t *testing.T) {
			errs := results[r.ID]
			for _, e := range errs {
				t.Error(e)
			}
			c := matrix.Cell{Status: matrix.Pass}
			if len(errs) > 0 {
				c = matrix.Cell{Status: matrix.Fail, Reason: strings.Join(errs, "; ")}
			}
			set(r.ID, b, c)
		})
	}
}

// runRow sends r's request (Repeat times) to tg and checks the last
// answer and its audit record. token is the row's OAuth token (auth
// token): the answer must never contain it.
func runRow(ctx context.Context, tg target, r matrix.Row, token string) []string {
	q := r.Request
	path := q.Path
	if path == "" {
		path = "/v1/invoke"
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	switch q.Auth {
	case "":
		hdr.Set("Authorization", "Bearer "+keyOf(r.Tenant()))
	case "bad":
		hdr.Set("Authorization", "Bearer "+badKey(r.Tenant()))
	case "token":
		hdr.Set("Authorization", "Bearer "+token)
		hdr.Set("Host", resourceHost) // the resource its aud names
		hdr.Set("X-Forwarded-Proto", "https")
	case "none":
	default:
		return []string{"unknown request.auth " + q.Auth}
	}
	for k, v := range q.Headers {
		hdr.Set(k, v)
	}
	n := max(q.Repeat, 1)
	// A row's requests on one session are meant to fall in one rate
	// window (fixed UTC minutes, shared/ratelimit): requests that
	// straddled a window's end are sent once more, on a fresh session.
	var a answer
	for attempt := 1; ; attempt++ {
		window := time.Now().UTC().Truncate(ratelimit.Window)
		var errs []string
		if a, errs = sendRepeated(ctx, tg, r, path, hdr.Clone(), n); errs != nil {
			return errs
		}
		if q.Session != "reuse" || attempt > 1 || time.Now().UTC().Truncate(ratelimit.Window).Equal(window) {
			break
		}
	}
	errs := checkAnswer(r.Expect, a, r.Request.Numbering())
	if token != "" && (bytes.Contains(a.body, []byte(token)) || strings.Contains(fmt.Sprint(a.header), token)) {
		errs = append(errs, "the answer contains the token")
	}
	if r.Expect.Audit.None {
		return errs
	}
	corr := a.header.Get("X-Correlation-ID")
	if corr == "" {
		return append(errs, "no X-Correlation-ID to find the audit record by")
	}
	var req struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal([]byte(q.Body), &req)
	rec, err := waitRecord(ctx, tg, r.Tenant(), corr, req.Method)
	if err != nil {
		return append(errs, err.Error())
	}
	return append(errs, checkRecord(r.Expect, rec, refusal.LayerGateway)...)
}

// sendRepeated sends r's request n times to tg, the requests after the
// first on the first one's session when the row says so, and returns the
// last answer.
func sendRepeated(ctx context.Context, tg target, r matrix.Row, path string, hdr http.Header, n int) (answer, []string) {
	var a answer
	for i := range n {
		var err error
		a, err = tg.send(ctx, request{path: path, header: hdr, body: r.Request.Body})
		if err != nil {
			return answer{}, []string{fmt.Sprintf("request %d of %d: %v", i+1, n, err)}
		}
		if i == 0 && r.Request.Session == "reuse" {
			sid := a.header.Get("X-Session-ID")
			if sid == "" {
				return answer{}, []string{"the first answer carries no X-Session-ID to reuse"}
			}
			hdr.Set("X-Session-ID", sid)
		}
	}
	return a, nil
}

// waitRecord polls tenant's audit until the record of the call with
// correlation id corr and method is there. (A held call also has the
// approval's own record, approval.requested, with the same correlation
// id.)
func waitRecord(ctx context.Context, tg target, tenant, corr, method string) (audit.Record, error) {
	deadline := time.Now().Add(recordWait)
	for {
		recs, err := tg.records(ctx, tenant)
		if err != nil {
			return audit.Record{}, fmt.Errorf("reading the audit: %v", err)
		}
		var found []audit.Record
		for _, rec := range recs {
			if rec.CorrelationID == corr && rec.Method == method {
				found = append(found, rec)
			}
		}
		switch {
		case len(found) == 1:
			return found[0], nil
		case len(found) > 1:
			return audit.Record{}, fmt.Errorf("%d audit records for correlation id %s, want one", len(found), corr)
		case time.Now().After(deadline):
			return audit.Record{}, fmt.Errorf("no audit record for correlation id %s within %s (the tenant has %d)", corr, recordWait, len(recs))
		}
		select {
		case <-ctx.Done():
			return audit.Record{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestMatrixFileCoversTheVocabulary: every word of shared/refusal's table
// and wrap's frame has a row (matrix.Load checks it; this pins that it
// does, with a file missing one).
func TestMatrixFileCoversTheVocabulary(t *testing.T) {
	f, err := matrix.Load(matrixPath)
	if err != nil {
		t.Fatal(err)
	}
	var kept []matrix.Row
	for _, r := range f.Rows {
		if r.Expect.Word != string(refusal.ToolStopped) {
			kept = append(kept, r)
		}
	}
	f.Rows = kept
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "TOOL_STOPPED") {
		t.Fatalf("a matrix without a TOOL_STOPPED row passes its check: %v", err)
	}
}

// TestRenderMarksEveryCell: a cell that did not run, failed or was not
// exercised is never rendered as a pass.
func TestRenderMarksEveryCell(t *testing.T) {
	f := &matrix.File{Rows: []matrix.Row{{ID: "a", Title: "t", Source: "s", Expect: matrix.Expect{Shape: "result", Audit: matrix.AuditWant{Outcome: "allowed"}}}}}
	res := matrix.Results{}
	res.Set("a", matrix.Gateway, matrix.Cell{Status: matrix.Fail, Reason: "code -32000, want -32003"})
	res.Set("a", matrix.Serve, matrix.Cell{Status: matrix.NotExercised, Reason: "waiting for X"})
	page := string(matrix.Render(f, res))
	for _, want := range []string{"fail [1]", "not exercised [2]", "(not run)", "1. `a` at gateway: code -32000, want -32003", "2. `a` at serve: waiting for X"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "| pass |") {
		t.Errorf("a cell is rendered as a pass:\n%s", page)
	}
}

// TestCheckRefusesMalformedRows: each rule of File.Check, broken once.
func TestCheckRefusesMalformedRows(t *testing.T) {
	base, err := matrix.Load(matrixPath)
	if err != nil {
		t.Fatal(err)
	}
	stopped := func() matrix.Row {
		for _, r := range base.Rows {
			if r.ID == "tool-stopped" {
				return r
			}
		}
		t.Fatal("no tool-stopped row")
		return matrix.Row{}
	}
	for _, tc := range []struct {
		name string
		edit func(*matrix.Row)
		want string
	}{
		{"another word's code", func(r *matrix.Row) { r.Expect.Code = int(refusal.CodePolicyDenied) }, "not a row of shared/refusal's table"},
		{"a refusal without a slot", func(r *matrix.Row) { r.Expect.Audit.Slot = "" }, "names its slot"},
		{"no audit expectation", func(r *matrix.Row) { r.Expect.Audit = matrix.AuditWant{} }, "expect.audit"},
		{"none without a reason", func(r *matrix.Row) { r.Expect.Audit = matrix.AuditWant{None: true} }, "audit_why"},
		{"an unknown shape", func(r *matrix.Row) { r.Expect.Shape = "blocked" }, "shape"},
		{"a result with a word", func(r *matrix.Row) { r.Expect.Shape = "result" }, "a refusal shape"},
		{"not exercised without a reason", func(r *matrix.Row) { r.NotExercised = map[matrix.Boundary]string{matrix.Lambda: ""} }, "not_exercised"},
		{"not exercised where it does not apply", func(r *matrix.Row) { r.NotExercised = map[matrix.Boundary]string{matrix.Wrap: "x"} }, "not_exercised"},
		{"an unknown boundary", func(r *matrix.Row) { r.Boundaries = []matrix.Boundary{"proxy"} }, "unknown boundary"},
		{"a bad id", func(r *matrix.Row) { r.ID = "Tool Stopped" }, "id must match"},
		{"auth token without a token", func(r *matrix.Row) { r.Request.Auth = "token" }, "auth token needs a token"},
		{"a token at a tenant without issuers", func(r *matrix.Row) { r.Request.Auth, r.Request.Token = "token", &matrix.Token{} }, "setup.oauth"},
		{"a token of an unknown issuer", func(r *matrix.Row) {
			r.Setup.OAuth, r.Request.Auth, r.Request.Token = true, "token", &matrix.Token{Issuer: "third"}
		}, "token issuer and audience"},
		{"a path naming another row's tenant", func(r *matrix.Row) { r.Request.Path = "/t/m-allowed/v1/invoke" }, "names tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := stopped()
			r.ID = "tool-stopped-edited"
			tc.edit(&r)
			f := &matrix.File{Rows: append(append([]matrix.Row{}, base.Rows...), r)}
			err := f.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
