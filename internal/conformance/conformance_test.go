package conformance

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/mcptest"
	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/auth"
)

var update = flag.Bool("update", false, "rewrite the conformance tables of docs/protocol.md from this run")

// docPath is the page whose tables this test checks (and, with -update,
// writes).
const docPath = "../../docs/protocol.md"

// versions are the spec versions run, each with the upstream mode it
// needs: 2026-07-28's scenarios are stateless, and the Go SDK server
// speaks that protocol only when started stateless.
var versions = []struct {
	spec      string
	stateless bool
}{
	{"2025-11-25", false},
	{"2026-07-28", true},
}

// targets are the three places each version's scenarios run against.
var targets = []string{"direct", "/mcp/{server}", "/mcp"}

// TestSuite runs the official conformance suite's server scenarios of both
// spec versions against the Go SDK conformance everything-server direct,
// and through `aegis serve` (the built binary) on /mcp/{server} and /mcp,
// with a header-adding reverse proxy in front of the gateway for the key
// the suite cannot send. It prints the per-scenario table and fails when a
// scenario passes direct and fails through the gateway, when one that
// docs/protocol.md records as passing fails now, or when one fails direct
// (the upstream, not the gateway, would be at fault). Run with -update to
// rewrite the doc's tables from the run.
func TestSuite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir, err := CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	suite, err := Install(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildAegis(t)
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("docs/protocol.md: %v", err)
	}
	text := string(doc)
	var mu sync.Mutex
	var wg sync.WaitGroup
	tables := map[string]map[string]Results{}
	urls := map[string]string{} // "spec target" → the URL its suite ran against
	for _, v := range versions {
		up := mcptest.Conformance(t, v.stateless) + "/mcp"
		gw := startGateway(t, bin, up)
		tables[v.spec] = map[string]Results{}
		for _, target := range targets {
			u := up
			switch target {
			case "/mcp/{server}":
				u = gw + "/mcp/everything"
			case "/mcp":
				u = gw + "/mcp"
			}
			urls[v.spec+" "+target] = u
			out := filepath.Join(t.TempDir(), "results")
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The suite's own default per-scenario timeout: on two
				// loaded cores (scripts/test runs every package at once) an
				// elicitation round trip through the gateway has taken more
				// than 15 s once.
				res, err := suite.Run(ctx, u, v.spec, out, 30000)
				if err != nil {
					t.Errorf("%s %s: %v", v.spec, target, err)
					return
				}
				mu.Lock()
				tables[v.spec][target] = res
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	retryGatewayFailures(ctx, t, suite, tables, urls)
	for _, v := range versions {
		tab := tables[v.spec]
		direct := tab["direct"]
		section := render(v.spec, tab)
		t.Logf("conformance %s:\n%s", v.spec, section)
		for _, name := range direct.Names() {
			if !direct[name].Passed {
				t.Errorf("%s %s fails direct against the everything-server: %v", v.spec, name, direct[name].Failed)
			}
			for _, target := range targets[1:] {
				if sc := tab[target][name]; !sc.Passed {
					msg := strings.Join(sc.Failed, "; ")
					if len(msg) > 400 {
						msg = msg[:400] + "..."
					}
					if direct[name].Passed {
						t.Errorf("%s %s passes direct and fails through %s: %s", v.spec, name, target, msg)
					} else {
						t.Logf("%s %s %s: %s", v.spec, target, name, msg)
					}
				}
			}
		}
		if *update {
			text = replaceSection(t, text, v.spec, section)
			continue
		}
		floor := passing(t, text, v.spec)
		for key := range floor {
			target, name, _ := strings.Cut(key, " ")
			sc, ok := tab[target][name]
			if !ok || !sc.Passed {
				t.Errorf("%s %s through %s: docs/protocol.md records it as passing, it fails now: %v", v.spec, name, target, sc.Failed)
			}
		}
		if section != sectionOf(t, text, v.spec) && !t.Failed() {
			t.Logf("docs/protocol.md's %s table is behind this run (more passes): go test ./internal/conformance -run TestSuite -update", v.spec)
		}
	}
	if *update && !t.Failed() {
		if err := os.WriteFile(docPath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// render is the markdown table of one version's run: a row per scenario
// (the direct run's names), a column per target, and the counts.
func render(spec string, tab map[string]Results) string {
	var b strings.Builder
	direct := tab["direct"]
	fmt.Fprintf(&b, "| scenario (%s) | %s |\n|---|%s\n", spec, strings.Join(targets, " | "), strings.Repeat("---|", len(targets)))
	for _, name := range direct.Names() {
		fmt.Fprintf(&b, "| %s |", name)
		for _, target := range targets {
			cell := "FAIL"
			if tab[target][name].Passed {
				cell = "pass"
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		b.WriteString("\n")
	}
	b.WriteString("| **passed** |")
	for _, target := range targets {
		n := 0
		for _, name := range direct.Names() {
			if tab[target][name].Passed {
				n++
			}
		}
		fmt.Fprintf(&b, " %d of %d |", n, len(direct))
	}
	b.WriteString("\n")
	return b.String()
}

func markers(spec string) (string, string) {
	return "<!-- conformance " + spec + " begin -->\n", "<!-- conformance " + spec + " end -->"
}

// sectionOf is the doc's table for spec, between its markers.
func sectionOf(t *testing.T, text, spec string) string {
	t.Helper()
	begin, end := markers(spec)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("docs/protocol.md has no %q ... %q section", begin, end)
	}
	return text[i+len(begin) : j]
}

func replaceSection(t *testing.T, text, spec, section string) string {
	t.Helper()
	old := sectionOf(t, text, spec)
	begin, _ := markers(spec)
	return strings.Replace(text, begin+old, begin+section, 1)
}

var row = regexp.MustCompile(`^\| ([a-z0-9-]+) \|(.*)\|$`)

// passing is the doc's floor for spec: "TARGET SCENARIO" for every
// gateway cell marked pass.
func passing(t *testing.T, text, spec string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(sectionOf(t, text, spec), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cells := strings.Split(m[2], "|")
		for i, target := range targets {
			if i > 0 && i < len(cells) && strings.TrimSpace(cells[i]) == "pass" {
				out[target+" "+m[1]] = true
			}
		}
	}
	return out
}

// buildAegis builds cmd/aegis once for this test.
func buildAegis(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "aegis")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/aegis-gw/aegis/cmd/aegis")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/aegis: %v\n%s", err, out)
	}
	return bin
}

// startGateway runs `aegis serve` with one tenant whose server
// "everything" is upstream, and returns the URL of a reverse proxy in
// front of it that adds the tenant's key (the suite sends no
// Authorization header). The proxy keeps the client's Host and Origin, so
// the suite's DNS-rebinding scenario reaches the gateway's own check; it
// flushes at once, so event streams stream. Both stop with the test.
func startGateway(t *testing.T, bin, upstream string) string {
	t.Helper()
	secret, key := auth.NewKey("conf", "conformance", time.Now())
	cfg := fmt.Sprintf(`tenants:
  - id: conf
    tier: enterprise
    keys:
      - id: %s
        caller: conformance
        sha256: %s
    servers:
      - name: everything
        url: %s
`, key.ID, key.Hash, upstream)
	path := filepath.Join(t.TempDir(), "aegis.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := mcptest.FreePort(t)
	cmd := exec.Command(bin, "serve", "--config", path, "--addr", addr)
	cmd.Env = append(os.Environ(), "RATE_LIMIT_PER_SESSION=0", "RATE_LIMIT_PER_TOOL=0", "RATE_LIMIT_PER_KEY=0")
	logs := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("aegis serve log (%s):\n%s", upstream, tail(logs.String(), 60))
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post(base+"/mcp", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("aegis serve did not start: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	target, _ := url.Parse(base)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+secret)
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// retryGatewayFailures runs once more, alone, each scenario that passed
// direct and failed through the gateway in the six concurrent suite runs,
// and keeps the second result. A scenario that passes on the retry is
// logged as INTERMITTENT with its first failure, never silently
// (docs/protocol.md, "Known intermittent failures"). One that fails
// twice fails the test as before.
func retryGatewayFailures(ctx context.Context, t *testing.T, suite *Suite, tables map[string]map[string]Results, urls map[string]string) {
	for _, v := range versions {
		tab := tables[v.spec]
		for _, target := range targets[1:] {
			for _, name := range tab["direct"].Names() {
				sc, ok := tab[target][name]
				if !tab["direct"][name].Passed || !ok || sc.Passed {
					continue
				}
				out := filepath.Join(t.TempDir(), "retry")
				res, err := suite.RunScenario(ctx, urls[v.spec+" "+target], v.spec, name, out, 30000)
				if err != nil {
					t.Errorf("%s %s %s: retry did not run: %v", v.spec, target, name, err)
					continue
				}
				again, ok := res[name]
				if !ok || !again.Passed {
					continue
				}
				t.Logf("INTERMITTENT: %s %s through %s failed in the concurrent run (%s) and passed alone on a retry",
					v.spec, name, target, strings.Join(sc.Failed, "; "))
				tab[target][name] = again
			}
		}
	}
}
