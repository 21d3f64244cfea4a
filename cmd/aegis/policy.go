package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/policycheck"
)

// policyDetail is the help text of `aegis policy test` (commandTree).
const policyDetail = `Evaluates one tools/call offline against the policy set of the config
file's tenant (the only one, or --tenant) and prints the verdict and the
rule that decided. --caller is a caller name of one of the tenant's keys
(its roles and manifest apply; another name is refused) or, with --roles,
any name. The session is
new: no calls counted yet, age 0. Exit status: 0 allowed (or audit-only),
1 refused or held for approval, 2 bad arguments or config.`

// runPolicyTest is `aegis policy test`.
func runPolicyTest(args []string) int {
	return policyTest(args, cliOut, cliErr)
}

// policyTest decides one request with the same code the gateway runs:
// policycheck.Build of the tenant's set, the key's roles and manifest.
func policyTest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aegis policy test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := fs.String("config", "", "config file (required)")
	tenantID := fs.String("tenant", "", "tenant (default: the file's only tenant)")
	caller := fs.String("caller", "", "caller name (required)")
	roles := fs.String("roles", "", "comma-separated roles (default: those of the caller's key)")
	tool := fs.String("tool", "", "SERVER/TOOL (required)")
	argsJSON := fs.String("args", "{}", "the call's arguments, a JSON object")
	ann := fs.String("annotations", "", "the tool's annotations, a JSON object (as its server lists them)")
	step := fs.Int64("step", -1, "declared step (_meta[\"aegis/step\"]); -1: none")
	if helpRequested(args) {
		leafHelp(stdout, "policy test", fs)
		return 0
	}
	fs.Usage = func() { fmt.Fprintln(stderr, `run "aegis policy test --help" for its flags`) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "aegis policy test: "+format+"\n", a...)
		return 2
	}
	server, name, ok := strings.Cut(*tool, "/")
	switch {
	case *cfg == "" || *caller == "" || *tool == "":
		return bad("--config, --caller and --tool are required")
	case !ok || server == "" || name == "":
		return bad("--tool %q: want SERVER/TOOL", *tool)
	case !json.Valid([]byte(*argsJSON)) || !strings.HasPrefix(strings.TrimSpace(*argsJSON), "{"):
		return bad("--args: want a JSON object")
	case *ann != "" && (!json.Valid([]byte(*ann)) || !strings.HasPrefix(strings.TrimSpace(*ann), "{")):
		return bad("--annotations: want a JSON object")
	}
	f, err := config.LoadFile(*cfg, true)
	if err != nil {
		return bad("%v", err)
	}
	var t *config.FileTenant
	for i := range f.Tenants {
		if f.Tenants[i].ID == *tenantID || (*tenantID == "" && len(f.Tenants) == 1) {
			t = &f.Tenants[i]
		}
	}
	if t == nil {
		return bad("no tenant %q in %s (name it with --tenant when there are several)", *tenantID, *cfg)
	}
	l, err := policycheck.Build(t.PolicySet())
	if err != nil {
		return bad("%v", err)
	}
	req := &policy.Request{
		Method: policy.MethodToolsCall, Tenant: t.ID, Server: server, Tool: name,
		Arguments: json.RawMessage(*argsJSON), Now: time.Now(),
	}
	if *ann != "" {
		req.Annotations = json.RawMessage(*ann)
	}
	req.Session.Started = req.Now
	if *step >= 0 {
		req.Session.Step = policy.Step{N: *step, Declared: true}
	}
	req.Caller = policy.Caller{ID: *caller, Roles: []string{}}
	if *roles == "" && !slices.ContainsFunc(t.Keys, func(k config.FileKey) bool { return k.Caller == *caller }) {
		return bad("--caller %q: no key of tenant %s names that caller (%s); give --roles to try a caller without a key", *caller, t.ID, callersOf(t))
	}
	for _, k := range t.Keys {
		if k.Caller == *caller {
			req.Caller.KeyID, req.Caller.Roles = k.ID, append([]string{}, k.Roles...)
			if req.Bounds, err = policy.Merge(k.Manifest); err != nil {
				return bad("key %s: %v", k.ID, err)
			}
			break
		}
	}
	if *roles != "" {
		req.Caller.Roles = strings.Split(*roles, ",")
	}
	v := l.Decider.Decide(context.Background(), req)
	verdict := policycheck.VerdictWord(v)
	rule := v.Rule
	if rule == "" {
		rule = "(none: no rule layer)"
	}
	fmt.Fprintf(stdout, "verdict: %s\nrule:    %s\n", verdict, rule)
	if v.Audit {
		fmt.Fprintln(stdout, "mode:    audit (the call would be forwarded; the verdict is only recorded)")
	}
	if ref := v.Refusal(); ref != nil {
		fmt.Fprintf(stdout, "refusal: %d %s: %s\n", ref.Code, ref.Word, ref.Message)
	}
	fmt.Fprintf(stdout, "policy_hash: %s\n", l.Hash)
	if v.Refused() || v.Held() {
		return 1
	}
	return 0
}

// callersOf lists the callers of t's keys, for an error message.
func callersOf(t *config.FileTenant) string {
	var cs []string
	for _, k := range t.Keys {
		if !slices.Contains(cs, k.Caller) {
			cs = append(cs, k.Caller)
		}
	}
	if len(cs) == 0 {
		return "it has no keys"
	}
	return "its callers: " + strings.Join(cs, ", ")
}
