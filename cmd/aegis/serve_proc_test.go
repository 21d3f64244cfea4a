package main

// Helpers for the tests that run `aegis serve` as a process: the binary is
// built once per test binary, each process is started with its own
// environment, its banner read from stdout, and it is stopped by its
// process id when the test ends.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/aegisbin"
	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
)

func TestMain(m *testing.M) {
	// The audit signing key of every serve and wrap these tests run
	// (theirs and their children's), never the user's own.
	keyDir, err := os.MkdirTemp("", "aegis-audit-key-")
	if err == nil {
		err = os.Setenv(envAuditKeyFile, filepath.Join(keyDir, "audit-ed25519.key"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "audit key directory:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(keyDir)
	dynamotest.Stop()
	aegisbin.Remove()
	os.Exit(code)
}

// dynamoEnv is the environment that points aegis at e's tables.
func dynamoEnv(e dynamotest.Env) []string {
	return []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + e.Endpoint,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AEGIS_STATE_TABLE=" + e.Tables.State, "AEGIS_AUDIT_TABLE=" + e.Tables.Audit,
	}
}

// serveProc is a running `aegis serve`.
type serveProc struct {
	cmd    *exec.Cmd
	base   string // http://ADDR
	banner string // stdout up to the admin line
	stderr *syncbuf.Buffer
	exited chan struct{} // closed when the process has been waited for
	err    error         // Wait's result, once exited is closed
}

// startServe runs `aegis serve ARGS --addr ADDR` with the test's
// environment plus env, and waits for its banner. If the process exits
// first, the returned serveProc has exited closed and no banner.
func startServe(t *testing.T, env []string, args ...string) *serveProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &serveProc{base: "http://" + addr, stderr: &syncbuf.Buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(aegisbin.Path(t), append([]string{"serve", "--addr", addr}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("aegis serve %s stderr:\n%s", strings.Join(args, " "), p.stderr.String())
		}
	})
	var b strings.Builder
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				<-p.exited
				return p
			}
			b.WriteString(l + "\n")
			if strings.HasPrefix(l, "admin API") {
				p.banner = b.String()
				go func() { // keep the pipe drained
					for range lines {
					}
				}()
				return p
			}
		case <-deadline:
			t.Fatalf("no banner from aegis serve; stdout %q, stderr:\n%s", b.String(), p.stderr.String())
		}
	}
}

// running reports whether the process has not exited.
func (p *serveProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to the process.
func (p *serveProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the process to exit and returns its exit code; it fails
// the test if that takes longer than within.
func (p *serveProc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Fatalf("aegis serve still running after %s; stderr:\n%s", within, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// demoBanner reads the demo upstream's URL and the demo key from a banner.
func demoBanner(t *testing.T, banner string) (upstream, key string) {
	t.Helper()
	m := regexp.MustCompile(`demo upstream \(tenant demo, server mock-primary\): (\S+)\ndemo API key: (\S+)`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("no demo upstream and key in the banner:\n%s", banner)
	}
	return m[1], m[2]
}

// configWithKey writes a config file with tenant acme, one key (returned)
// and one server named up at url.
func configWithKey(t *testing.T, url string) (path, key string) {
	t.Helper()
	key, rec := auth.NewKey("acme", "ci-agent", time.Now())
	yaml := fmt.Sprintf(`tenants:
  - id: acme
    tier: growth
    keys:
      - id: %s
        caller: ci-agent
        sha256: %s
    servers:
      - name: up
        url: %s
`, rec.ID, rec.Hash, url)
	path = filepath.Join(t.TempDir(), "aegis.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// invoke posts one tools/call of tool with args to base's /v1/invoke. It
// returns the HTTP status and the decoded JSON-RPC answer; err is a failure
// to get an answer at all (a refused connection, EOF).
func invoke(client *http.Client, base, key, tool string, args any) (int, rpcAnswer, error) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args},
	})
	req, err := http.NewRequest(http.MethodPost, base+"/v1/invoke", strings.NewReader(string(body)))
	if err != nil {
		return 0, rpcAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, rpcAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, rpcAnswer{}, err
	}
	var a rpcAnswer
	a.raw = string(b)
	_ = json.Unmarshal(b, &a)
	return resp.StatusCode, a, nil
}

// rpcAnswer is a JSON-RPC answer as the tests look at it.
type rpcAnswer struct {
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// ok reports whether the answer is a tool result that is not an error.
func (a rpcAnswer) ok() bool { return a.Result != nil && a.Error == nil && !a.Result.IsError }

// text is the result's first text.
func (a rpcAnswer) text() string {
	if a.Result == nil || len(a.Result.Content) == 0 {
		return ""
	}
	return a.Result.Content[0].Text
}
