// Package mcptest runs real MCP servers for tests: the Go SDK's conformance
// everything-server, built from the module cache, on a loopback port.
package mcptest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const conformancePkg = "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// ConformanceBinary builds the everything-server once per test binary.
func ConformanceBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "aegis-mcptest-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "everything-server")
		out, err := exec.Command("go", "build", "-o", binPath, conformancePkg).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build %s: %v\n%s", conformancePkg, err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("conformance server unavailable: %v", buildErr)
	}
	return binPath
}

// FreePort returns a loopback address with a port that was free a moment ago.
func FreePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Conformance starts the everything-server over Streamable HTTP on loopback
// (stateful unless stateless) and returns its URL. It is stopped, by PID,
// when the test ends.
func Conformance(t testing.TB, stateless bool) string {
	t.Helper()
	bin := ConformanceBinary(t)
	for attempt := 0; attempt < 3; attempt++ {
		addr := FreePort(t)
		cmd := exec.Command(bin, "-http="+addr, fmt.Sprintf("-stateless=%v", stateless))
		stderr, _ := cmd.StderrPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { // drain its log
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				_ = strings.TrimSpace(sc.Text())
			}
		}()
		url := "http://" + addr
		if waitHTTP(url, 5*time.Second) {
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			return url
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Fatal("conformance server did not start")
	return ""
}

func waitHTTP(url string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
