// Package aegisbin builds the aegis command once per test process, for the
// tests that run it as a user would (aegis serve, aegis admin).
package aegisbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	dir   string // where the binary is, once built
	build = sync.OnceValues(func() (string, error) {
		d, err := os.MkdirTemp("", "aegis-bin-")
		if err != nil {
			return "", err
		}
		dir = d
		bin := filepath.Join(d, "aegis")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/aegis-gw/aegis/cmd/aegis").CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build ./cmd/aegis: %v\n%s", err, out)
		}
		return bin, nil
	})
)

// Path is the aegis binary, built on first use; t fails if it does not
// build.
func Path(t testing.TB) string {
	t.Helper()
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Remove deletes the binary, if it was built. Call it from TestMain once
// the tests have run.
func Remove() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}
