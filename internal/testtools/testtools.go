// Package testtools finds the programs from outside Go that the tests run
// (moto_server, cfn-lint, make) and fails a test that lacks one, naming the
// tool and how to install it, with or without CI. No test skips for a
// missing tool: scripts/test installs what it can before the tests run
// (its "test tools" step), so a missing tool here is a failure to fix.
package testtools

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// install says how to install each tool by hand.
var install = map[string]string{
	"moto_server": "pip install --user 'moto[server]' (moto 5; then put `python3 -m site --user-base`/bin on PATH)",
	"cfn-lint":    "pip install --user cfn-lint (cfn-lint 1; then put `python3 -m site --user-base`/bin on PATH)",
	"make":        "apt-get install make",
	"chromium":    "apt-get install chromium (Debian's package; the console's browser test runs it headless)",
}

// Hint says how to install the tool name.
func Hint(name string) string {
	if h, ok := install[name]; ok {
		return h
	}
	return "install " + name + " and put it on PATH"
}

// Missing is the failure message for the tool name that could not be found
// or started (err says why).
func Missing(name string, err error) string {
	return fmt.Sprintf("MISSING TOOL %s: %v. Install it: %s; scripts/test installs it where it can.", name, err, Hint(name))
}

// Path returns the path of the tool name on PATH, or fails t with Missing.
func Path(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(Missing(name, err))
	}
	return p
}

// RunWithoutTools runs the tests of the current test binary that match
// pattern (a -test.run expression) in a child process whose PATH is an
// empty directory, so that no tool is found, and whose environment has no
// CI: the way a developer's machine without the tools runs them. It returns
// the child's combined output and its error (nil for exit status 0).
func RunWithoutTools(t testing.TB, pattern string) (string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run="+pattern, "-test.count=1", "-test.v")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "PATH" && k != "CI" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %s: %v", self, err)
	}
	return string(out), err
}

// ExpectMissing runs RunWithoutTools and fails t unless the child failed
// and its output names every tool in tools and a way to install it.
func ExpectMissing(t testing.TB, pattern string, tools ...string) {
	t.Helper()
	out, err := RunWithoutTools(t, pattern)
	if err == nil {
		t.Errorf("tests %s passed with no tool on PATH; want a failure naming %v:\n%s", pattern, tools, out)
		return
	}
	if strings.Contains(out, "--- SKIP") {
		t.Errorf("tests %s skipped a test with no tool on PATH; want a failure:\n%s", pattern, out)
	}
	if !strings.Contains(out, "Install it:") {
		t.Errorf("tests %s failed without saying how to install a tool:\n%s", pattern, out)
	}
	for _, tool := range tools {
		if !strings.Contains(out, "MISSING TOOL "+tool) {
			t.Errorf("tests %s with no tool on PATH: output does not name %s:\n%s", pattern, tool, out)
		}
	}
}
