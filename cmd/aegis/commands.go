package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/aegis-gw/aegis/shared/killswitch"
)

// command is one node of the CLI: a group of subcommands, or a leaf that
// runs. The tree (commandTree) is the only place a command is named: help,
// `aegis help CMD`, --help on every command and the nearest matches of a
// mistyped one are all read from it, in its order.
type command struct {
	name    string
	summary string // one line: what the command does
	// args is the leaf's synopsis after its path and before [flags]
	// ("ID", "[FILE]"); "" when it takes no positional arguments.
	args string
	// detail is more text for the leaf's help, printed after the summary.
	detail string
	run    func(args []string) int // a leaf
	subs   []*command              // a group
	// dflt is the subcommand a group runs when it is given no subcommand
	// but flags (or nothing): "list" for tenants and servers.
	dflt string
}

// commandTree is the whole CLI, in the order help lists it. It is a
// function, not a variable, so that the help leaf may walk it.
func commandTree() *command {
	return &command{name: "aegis", summary: "a security gateway for MCP tool calls", subs: []*command{
		{name: "serve", summary: "run the gateway locally (embedded store or DynamoDB), with the admin API, /healthz, /readyz and /metrics",
			detail: "Give exactly one of --demo (a demo upstream and tenant) or --config FILE (docs/config.md).\n" +
				"Settings come from the environment (docs/config.md); a bad value stops start-up.",
			run: runServe},
		{name: "wrap", summary: "guard a local stdio MCP server with a policy and an audit file", args: "-- COMMAND [ARGS...]", run: runWrap},
		{name: "audit", summary: "verify a tenant's audit trail offline with the signers' public keys", subs: []*command{
			{name: "verify", summary: "check records and signed checkpoints (an export, or the DynamoDB table) and name each fault; exit 1 on a fault",
				detail: "Faults: changed, removed, inserted, reordered, rewritten records; removed or forged checkpoints.\n" +
					"What it cannot know (records after a writer's last checkpoint) is listed, not failed.",
				run: runAuditVerify},
			{name: "key", summary: "print the verifier key (public) of the local signing key, or of the stack's KMS key (--kms)", run: runAuditKey},
		}},
		{name: "admin", summary: "operate a gateway through its admin API (AEGIS_ADMIN_KEY, or --sigv4 on AWS)", subs: []*command{
			{name: "approvals", summary: "list, approve and deny held calls", subs: []*command{
				{name: "list", summary: "list approvals (all statuses, or one with --status), oldest first", run: leaf(cmdApprovals, "list")},
				{name: "approve", summary: "approve a held call: the caller's next identical call runs, once", args: "ID", run: leaf(cmdApprovals, "approve")},
				{name: "deny", summary: "deny a held call: identical calls are refused until it expires", args: "ID", run: leaf(cmdApprovals, "deny")},
			}},
			{name: "tools", summary: "stop and resume tools and servers (kill switch)", subs: []*command{
				{name: "list", summary: "list a tenant's stopped tools and servers", run: leaf(cmdTools, "list")},
				{name: "stop", summary: "stop a tool (--tool, optionally --server) or a whole server (--server only)", run: leaf(cmdTools, "stop")},
				{name: "resume", summary: "resume what stop stopped", run: leaf(cmdTools, "resume")},
			}},
			{name: "tenants", summary: "list and create tenants", dflt: "list", subs: []*command{
				{name: "list", summary: "list tenants", run: leaf(cmdTenants, "list")},
				{name: "create", summary: "create a tenant", args: "ID", run: leaf(cmdTenants, "create")},
			}},
			{name: "servers", summary: "list and add a tenant's upstream servers", dflt: "list", subs: []*command{
				{name: "list", summary: "list a tenant's servers", run: leaf(cmdServers, "list")},
				{name: "add", summary: "register (or replace) an upstream MCP server of a tenant", run: leaf(cmdServers, "add")},
			}},
			{name: "keys", summary: "list, create and revoke a tenant's API keys", subs: []*command{
				{name: "list", summary: "list a tenant's keys (ids and callers, never secrets)", run: leaf(cmdKeys, "list")},
				{name: "create", summary: "create a key; it is printed once and stored only as a hash", run: leaf(cmdKeys, "create")},
				{name: "revoke", summary: "revoke a key: its calls get 401 from now on", args: "ID", run: leaf(cmdKeys, "revoke")},
			}},
			{name: "connections", summary: "list and revoke callers' connections to servers with auth: oauth", subs: []*command{
				{name: "list", summary: "list a tenant's connections (never their tokens)", run: leaf(cmdConnections, "list")},
				{name: "revoke", summary: "revoke a connection at its provider and delete it; its caller is asked to connect again", args: "ID", run: leaf(cmdConnections, "revoke")},
			}},
			{name: "audit", summary: "read and export a tenant's audit trail", dflt: "list", subs: []*command{
				{name: "list", summary: "list a tenant's audit records, oldest first", run: cmdAudit},
				{name: "export", summary: "write a tenant's records and checkpoints of a time range as JSON lines that `aegis audit verify` checks on their own", run: cmdAuditExport},
			}},
			{name: "params-key", summary: "list and rotate the key audit params hashes are keyed with", subs: []*command{
				{name: "list", summary: "list the params keys (ids only)", run: leaf(cmdParamsKey, "list")},
				{name: "rotate", summary: "make a new params key current; the old one is kept for verifying", run: leaf(cmdParamsKey, "rotate")},
			}},
			{name: "policy", summary: "put and get a tenant's policy set", subs: []*command{
				{name: "put", summary: "store FILE (- for stdin) as the tenant's whole policy set", args: "FILE", run: leaf(cmdPolicy, "put")},
				{name: "get", summary: "print the tenant's stored policy set and its hash", run: leaf(cmdPolicy, "get")},
			}},
			{name: "pins", summary: "list, diff, pin and unpin the definitions of tools, prompts, resources and templates (rug pulls); new-tools: pin or hold", subs: []*command{
				{name: "list", summary: "list pins, with what changed since each was made", run: leaf(cmdPins, "list")},
				{name: "diff", summary: "show the pinned and current definitions of a --tool, --prompt, --resource or --template", run: leaf(cmdPins, "diff")},
				{name: "pin", summary: "pin a definition as its server lists it now (or --hash)", run: leaf(cmdPins, "pin")},
				{name: "unpin", summary: "drop a pin; the next listing pins the entry again", run: leaf(cmdPins, "unpin")},
				{name: "new-tools", summary: "show or --set what happens to a tool not pinned yet: pin (trust on first use) or hold (await a pin)", run: leaf(cmdPins, "new-tools")},
			}},
			{name: "console", summary: "serve the web console on this machine for a deployed stack (signs with your AWS credentials)", run: cmdConsole},
			{name: "new-key", summary: "print a fresh admin key for AEGIS_ADMIN_KEY", run: cmdNewKey},
			{name: "create-tables", summary: "create the DynamoDB tables (local use)", detail: createTablesDetail, run: runCreateTables},
		}},
		{name: "policy", summary: "work with policy sets offline", subs: []*command{
			{name: "test", summary: "decide one tools/call offline against a config file's policy set", detail: policyDetail, run: runPolicyTest},
		}},
		{name: "version", summary: "print the version", run: cmdVersion},
		{name: "help", summary: "explain a command and its flags", args: "[COMMAND...]"},
	}}
}

// leaf adapts a function that serves several subcommands to one of them.
func leaf(fn func(sub string, args []string) int, sub string) func([]string) int {
	return func(args []string) int { return fn(sub, args) }
}

// find walks path from the tree's root; nil when a name is not there.
func find(path []string) *command {
	c := commandTree()
	for _, name := range path {
		var next *command
		for _, s := range c.subs {
			if s.name == name {
				next = s
			}
		}
		if next == nil {
			return nil
		}
		c = next
	}
	return c
}

// isHelp is the argument that asks for help.
func isHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// helpRequested reports whether args ask for help before any "--".
func helpRequested(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelp(a) {
			return true
		}
	}
	return false
}

// dispatch runs args against group c, reached by path ("admin", ...):
// help for the group on --help or with nothing to run, the subcommand
// named by args[0], or the nearest matches of an unknown name.
func dispatch(c *command, path []string, args []string) int {
	if len(args) == 0 || isHelp(args[0]) || (c.dflt != "" && strings.HasPrefix(args[0], "-")) {
		switch {
		case len(args) > 0 && isHelp(args[0]):
			groupHelp(cliOut, c, path)
			return 0
		case c.dflt != "":
			return dispatch(c, path, append([]string{c.dflt}, args...))
		}
		groupHelp(cliErr, c, path)
		return 2
	}
	for _, s := range c.subs {
		if s.name != args[0] {
			continue
		}
		if s.subs != nil {
			return dispatch(s, append(path, s.name), args[1:])
		}
		if s.name == "help" && len(path) == 0 {
			return runHelp(args[1:])
		}
		return s.run(args[1:])
	}
	return unknown(c, path, args[0])
}

// unknown reports a command that is not in group c, with the nearest
// matches among its subcommands.
func unknown(c *command, path []string, name string) int {
	names := make([]string, 0, len(c.subs))
	for _, s := range c.subs {
		names = append(names, s.name)
	}
	where := strings.Join(append([]string{"aegis"}, path...), " ")
	msg := fmt.Sprintf("%s: unknown command %q", where, cell(name))
	if near := killswitch.Near(name, names); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, " or ") + "?"
	}
	fmt.Fprintln(cliErr, msg)
	fmt.Fprintf(cliErr, "run %q for the list\n", where+" --help")
	return 2
}

// runHelp is `aegis help [COMMAND...]`: the same text as COMMAND --help.
func runHelp(path []string) int {
	if helpRequested(path) {
		leafHelp(cliOut, "help", flag.NewFlagSet("aegis help", flag.ContinueOnError))
		return 0
	}
	c := find(path)
	if c == nil {
		// The deepest group that exists names the unknown word.
		for i := len(path) - 1; i >= 0; i-- {
			if g := find(path[:i]); g != nil && g.subs != nil {
				return unknown(g, path[:i], path[i])
			}
		}
		return 2
	}
	if c.subs != nil {
		groupHelp(cliOut, c, path)
		return 0
	}
	if c.run == nil { // help itself
		groupHelp(cliOut, commandTree(), nil)
		return 0
	}
	return c.run([]string{"--help"})
}

// groupHelp prints what group c does and its subcommands, in tree order.
func groupHelp(w io.Writer, c *command, path []string) {
	name := strings.Join(append([]string{"aegis"}, path...), " ")
	fmt.Fprintf(w, "%s: %s\n\nusage: %s COMMAND [flags]\n\ncommands:\n", name, c.summary, name)
	width := 0
	for _, s := range c.subs {
		width = max(width, len(s.name))
	}
	for _, s := range c.subs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, s.name, s.summary)
	}
	if c.dflt != "" {
		fmt.Fprintf(w, "\n%q alone runs %q.\n", name, name+" "+c.dflt)
	}
	fmt.Fprintf(w, "\nRun \"%s COMMAND --help\" (or \"aegis help %s\") for what a command does and its flags.\n",
		name, strings.TrimSpace(strings.Join(path, " ")+" COMMAND"))
}

// errHelp is what parsing returns once a leaf's help has been printed: the
// command ends with exit status 0.
var errHelp = errors.New("help printed")

// exitOf is the exit status of a failed parse: 0 after help, 2 otherwise.
func exitOf(err error) int {
	if errors.Is(err, errHelp) {
		return 0
	}
	return 2
}

// parseFlags parses args into fs for the leaf at path. --help anywhere
// before "--" prints the leaf's help to cliOut and returns errHelp; a bad
// flag is reported on cliErr with a pointer to the help.
func parseFlags(fs *flag.FlagSet, path string, args []string) error {
	if helpRequested(args) {
		leafHelp(cliOut, path, fs)
		return errHelp
	}
	fs.SetOutput(cliErr)
	fs.Usage = func() { fmt.Fprintf(cliErr, "run \"aegis %s --help\" for its flags\n", path) }
	return fs.Parse(args)
}

// leafHelp prints leaf path's summary, synopsis and flags (sorted by name).
func leafHelp(w io.Writer, path string, fs *flag.FlagSet) {
	c := find(strings.Fields(path))
	if c == nil {
		c = &command{summary: "(not in the command tree)"}
	}
	fmt.Fprintf(w, "aegis %s: %s\n\nusage: aegis %s", path, c.summary, path)
	if c.args != "" && !strings.HasPrefix(c.args, "--") {
		fmt.Fprintf(w, " %s", c.args)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, " [flags]")
	}
	if strings.HasPrefix(c.args, "--") {
		fmt.Fprintf(w, " %s", c.args)
	}
	fmt.Fprintln(w)
	if c.detail != "" {
		fmt.Fprintf(w, "\n%s\n", c.detail)
	}
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	fs.VisitAll(func(f *flag.Flag) {
		kind, usage := flag.UnquoteUsage(f)
		head := "--" + f.Name
		if kind != "" {
			head += " " + kind
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "  %-24s %s\n", head, usage)
	})
}
