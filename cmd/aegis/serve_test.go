package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/aegisbin"
	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/telemetry"
)

// TestServeDemo runs the README's first command as a user would (the built
// binary) and pastes the two curl commands it prints, as HTTP requests.
func TestServeDemo(t *testing.T) {
	bin := aegisbin.Path(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const key = "aegis_testkey1_abcdefghijklmnopqrstuvwxyz"
	cmd := exec.Command(bin, "serve", "--demo", "--addr", addr)
	cmd.Env = append(os.Environ(), "AEGIS_DEMO_KEY="+key)
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	// Read the banner up to the second curl command.
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var banner []string
	deadline := time.After(30 * time.Second)
	for len(banner) == 0 || strings.Count(strings.Join(banner, "\n"), "curl ") < 2 || !strings.HasPrefix(strings.TrimSpace(banner[len(banner)-1]), "-d ") {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited; stderr:\n%s", stderr.String())
			}
			banner = append(banner, l)
		case <-deadline:
			t.Fatalf("no banner; got %q, stderr %s", banner, stderr.String())
		}
	}
	text := strings.Join(banner, "\n")
	if !strings.Contains(text, "demo API key: "+key) || !strings.Contains(text, "http://"+addr) {
		t.Fatalf("banner lacks the key or address:\n%s", text)
	}
	// Paste each printed curl command: its URL, header and -d body.
	re := regexp.MustCompile(`curl -s (\S+) -H 'Authorization: Bearer (\S+)' -H 'Content-Type: application/json' \\\n\s+-d '([^']+)'`)
	cmds := re.FindAllStringSubmatch(text, -1)
	if len(cmds) != 2 {
		t.Fatalf("want two curl commands in:\n%s", text)
	}
	wantIn := []string{`"name":"echo"`, `"text":"hello"`}
	for i, c := range cmds {
		req, _ := http.NewRequest(http.MethodPost, c[1], strings.NewReader(c[3]))
		req.Header.Set("Authorization", "Bearer "+c[2])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !json.Valid(b) || !strings.Contains(string(b), wantIn[i]) {
			t.Fatalf("command %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	// The demo's leak tool comes back masked (PII_ACTION=redact, the
	// default), and a card number leaving in arguments is refused
	// (EGRESS_ACTION=block): docs/content.md's examples.
	post := func(body string) string {
		req, _ := http.NewRequest(http.MethodPost, cmds[0][1], strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	leak := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"leak"}}`)
	if want := `Customer record: [masked:email], [masked:phone], card [masked:card], SSN [masked:ssn].`; !strings.Contains(leak, want) {
		t.Fatalf("leak: %s, want %s", leak, want)
	}
	egress := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"card 4111 1111 1111 1111"}}}`)
	if want := `{"jsonrpc":"2.0","id":2,"error":{"code":-32053,"message":"Sensitive data in arguments: card, calling echo on mock-primary; the call was not sent; remove the credential, card number or SSN from the arguments and send the call again (EGRESS_BLOCKED)","data":{"aegis":{"layer":"gateway","code":"EGRESS_BLOCKED"},"kinds":["card"]}}}`; egress != want {
		t.Fatalf("egress: %s\nwant %s", egress, want)
	}
	if strings.Contains(stderr.String(), key) {
		t.Fatal("the demo key appears in the log")
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte("tenants:\n  - id: acme\n    tier: platinum\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := serve("127.0.0.1:0", false, path, "memory", 0, telemetry.Setup{}, &out)
	if err == nil || !strings.Contains(err.Error(), "tenants[0].tier") {
		t.Fatalf("err %v, want one naming tenants[0].tier", err)
	}
	t.Setenv("RATE_LIMIT_PER_TOOL", "lots")
	if err := serve("127.0.0.1:0", true, "", "memory", 0, telemetry.Setup{}, &out); err == nil || !strings.Contains(err.Error(), "RATE_LIMIT_PER_TOOL") {
		t.Fatalf("err %v, want one naming RATE_LIMIT_PER_TOOL", err)
	}
}

// TestServeRefusesBadStoreTimeout: --store-timeout only lengthens the
// DynamoDB store's deadlines; anything else stops start-up, naming it.
func TestServeRefusesBadStoreTimeout(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		d      time.Duration
		errHas string
	}{
		{kind: "memory", d: 0},
		{kind: "dynamodb", d: 0},
		{kind: "dynamodb", d: 2 * time.Second},
		{kind: "dynamodb", d: time.Minute},
		{kind: "memory", d: 10 * time.Second, errHas: "--store dynamodb only"},
		{kind: "dynamodb", d: time.Second, errHas: "want 2s to 1m0s"},
		{kind: "dynamodb", d: 61 * time.Second, errHas: "want 2s to 1m0s"},
	} {
		err := checkStoreTimeout(tc.kind, tc.d)
		if (err != nil) != (tc.errHas != "") || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("--store %s --store-timeout %s: err %v, want one naming %q", tc.kind, tc.d, err, tc.errHas)
		}
	}
	var out bytes.Buffer
	if err := serve("127.0.0.1:0", true, "", "memory", 10*time.Second, telemetry.Setup{}, &out); err == nil || !strings.Contains(err.Error(), "--store-timeout") {
		t.Fatalf("serve: err %v, want one naming --store-timeout", err)
	}
}
