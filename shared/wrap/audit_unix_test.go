//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package wrap

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/syncbuf"
)

// TestAuditPathMustBeARegularFile: --audit names a file wrap can append to
// and sync. A device (/dev/null, /dev/stderr on a terminal), a pipe
// (/dev/stderr under an MCP client) or a directory is refused at start,
// exit 2, before the child is started.
func TestAuditPathMustBeARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	regular := writeFile(t, "audit.jsonl", "")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       int
	}{
		{"device", "/dev/null", ExitUsage},
		{"fifo", fifo, ExitUsage},
		{"directory", dir, ExitUsage},
		{"symlink to a regular file", link, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan int, 1)
			var errb syncbuf.Buffer
			go func() {
				done <- Run(append([]string{"--audit", tc.path, "--"}, childArgv(t, "exit", "0")...), strings.NewReader(""), io.Discard, &errb)
			}()
			var code int
			select {
			case code = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("wrap did not return (stderr %q)", errb.String())
			}
			if code != tc.want {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.want, errb.String())
			}
			started := strings.Contains(errb.String(), "child stderr line")
			if tc.want == ExitUsage && (started || !strings.Contains(errb.String(), "not a regular file")) {
				t.Errorf("stderr %q: want a clear error and no child", errb.String())
			}
		})
	}
}
