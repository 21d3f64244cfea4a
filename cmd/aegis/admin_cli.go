package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/display"
	"github.com/aegis-gw/aegis/shared/registry"
)

// The operator CLI: `aegis admin SUBCOMMAND` against a gateway's admin API.
// Tables by default, --json for scripts. docs/admin.md lists every command.
//
// Every string the CLI prints came from the API and may have been written
// by an agent (a tool name, a caller, a detail) or a tenant: each table
// cell and message goes through cell (display.Text), so that no control or
// invisible character reaches the operator's terminal, and --json output
// through display.JSON, which escapes them inside the JSON strings.

// cliOut and cliErr are where the CLI writes (tests replace them).
var (
	cliOut io.Writer = os.Stdout
	cliErr io.Writer = os.Stderr
)

// defaultAdminURL is the gateway `aegis serve` runs by default.
const defaultAdminURL = "http://127.0.0.1:8080"

// cli is one invocation: common flags and the client.
type cli struct {
	path   string // the command's path for its help ("admin approvals list")
	fs     *flag.FlagSet
	url    *string
	json   *bool
	sigv4  *bool
	region *string
	args   []string // positional arguments
}

func newCLI(name string) *cli {
	fs := flag.NewFlagSet("aegis admin "+name, flag.ContinueOnError)
	fs.SetOutput(cliErr)
	return &cli{fs: fs, path: "admin " + name,
		url:    fs.String("url", defaultAdminURL, "gateway base URL"),
		json:   fs.Bool("json", false, "print JSON instead of a table"),
		sigv4:  fs.Bool("sigv4", false, "sign with AWS credentials (IAM auth) instead of "+envAdminKey+"; automatic for execute-api URLs"),
		region: fs.String("region", "", "AWS region for --sigv4 (default: from the URL, then AWS_REGION or the profile)"),
	}
}

// parse parses flags wherever they appear among the positional arguments.
// --help prints the command's help and returns errHelp (exitOf: status 0).
func (c *cli) parse(args []string) error {
	if helpRequested(args) {
		leafHelp(cliOut, c.path, c.fs)
		return errHelp
	}
	c.fs.Usage = func() { fmt.Fprintf(cliErr, "run \"aegis %s --help\" for its flags\n", c.path) }
	for {
		if err := c.fs.Parse(args); err != nil {
			return err
		}
		args = c.fs.Args()
		if len(args) == 0 {
			return nil
		}
		c.args = append(c.args, args[0])
		args = args[1:]
	}
}

// apiError is an error answer of the admin API.
type apiError struct {
	status int
	body   admin.ErrorBody
	raw    string
}

func (e *apiError) Error() string {
	if e.body.Error.Code == "" {
		return fmt.Sprintf("HTTP %d: %s", e.status, strings.TrimSpace(e.raw))
	}
	msg := fmt.Sprintf("HTTP %d %s: %s", e.status, e.body.Error.Code, e.body.Error.Message)
	if e.body.CorrelationID != "" {
		msg += " (correlation id " + e.body.CorrelationID + ")"
	}
	return msg
}

// do sends one request; out receives the decoded answer and raw its bytes.
// The request carries either the bearer admin key (aegis serve) or a SigV4
// signature (the deployed stack's IAM-authorized routes), never both.
func (c *cli) do(method, path string, body any, out any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sig, err := newSigner(ctx, *c.url, *c.sigv4, *c.region)
	if err != nil {
		return nil, err
	}
	key := os.Getenv(envAdminKey)
	if sig == nil && key == "" {
		return nil, errors.New(envAdminKey + " is not set: export the gateway's admin key (or pass --sigv4 for a deployed stack)")
	}
	var b []byte
	contentType := "application/json"
	if raw, ok := body.(rawBody); ok { // admin_policy.go: a body sent as is
		b, contentType = raw.b, raw.contentType
	} else if body != nil {
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(*c.url, "/")+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if sig != nil {
		if err := sig.sign(ctx, req, b); err != nil {
			return nil, err
		}
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{status: resp.StatusCode, raw: string(raw)}
		_ = json.Unmarshal(raw, &e.body)
		return raw, e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("unreadable answer: %w", err)
		}
	}
	return raw, nil
}

// finish prints raw JSON (--json) or the table, and maps errors to exit codes.
func (c *cli) finish(raw []byte, err error, table func(w io.Writer)) int {
	if err != nil {
		fmt.Fprintln(cliErr, "aegis admin:", cell(err.Error()))
		return 1
	}
	if *c.json {
		var buf bytes.Buffer
		if json.Indent(&buf, raw, "", "  ") != nil {
			fmt.Fprintln(cliOut, cell(strings.TrimSpace(string(raw)))) // not JSON: one escaped line
			return 0
		}
		fmt.Fprintln(cliOut, strings.TrimSpace(string(display.JSON(buf.Bytes()))))
		return 0
	}
	tw := tabwriter.NewWriter(cliOut, 0, 4, 2, ' ', 0)
	table(tw)
	_ = tw.Flush()
	return 0
}

func usageErr(format string, a ...any) int {
	fmt.Fprintf(cliErr, "aegis admin: "+format+"\n", a...)
	return 2
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// cell is s as a table cell or a message shows it: every control and
// invisible character spelled out (display.Text), so that a cell is one
// line, holds no tab and cannot drive the terminal.
func cell(s string) string { return display.Text(s) }

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

func esc(s string) string { return url.PathEscape(s) }

// --- approvals ---

func cmdApprovals(sub string, args []string) int {
	c := newCLI("approvals " + sub)
	switch sub {
	case "list":
		status := c.fs.String("status", "", "pending, approved, denied, running, unsettled, consumed or expired")
		tenant := c.fs.String("tenant", "", "only this tenant")
		if err := c.parse(args); err != nil {
			return exitOf(err)
		}
		q := url.Values{}
		if *status != "" {
			q.Set("status", *status)
		}
		if *tenant != "" {
			q.Set("tenant", *tenant)
		}
		path := "/admin/v1/approvals"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		var out admin.ApprovalList
		raw, err := c.do(http.MethodGet, path, nil, &out)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tSTATUS\tTENANT\tCALLER\tSERVER\tTOOL\tCREATED\tEXPIRES\tCONSUMED\tPARAMS")
			for _, a := range out.Approvals {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(a.ID), cell(string(a.Status)), cell(a.Tenant), cell(a.Caller), cell(a.Server), cell(a.Tool), ts(a.Created), ts(a.Expires), ts(a.ConsumedAt), cell(string(a.Params)))
			}
		})
	case "approve", "deny":
		reason := c.fs.String("reason", "", "why (recorded in the audit trail)")
		by := c.fs.String("by", defaultBy(), "who decides (recorded with the admin principal)")
		if err := c.parse(args); err != nil {
			return exitOf(err)
		}
		if len(c.args) != 1 {
			return usageErr("approvals %s: want exactly one approval ID", sub)
		}
		var a admin.ApprovalItem
		raw, err := c.do(http.MethodPost, "/admin/v1/approvals/"+esc(c.args[0])+"/"+sub, admin.DecisionRequest{Reason: *reason, By: *by}, &a)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintf(w, "approval %s is %s (by %s)\n", cell(a.ID), cell(string(a.Status)), cell(a.DecidedBy))
		})
	}
	return usageErr("approvals: unknown subcommand %q", sub)
}

// --- kill switch ---

func cmdTools(sub string, args []string) int {
	c := newCLI("tools " + sub)
	tenant := c.fs.String("tenant", "", "tenant (required)")
	server := c.fs.String("server", "", "server; with --tool optional (the tool is then found by the name tools/list shows)")
	tool := c.fs.String("tool", "", "tool: the name tools/list shows (a.echo) or the server's own; empty = the whole --server")
	unlisted := c.fs.Bool("unlisted", false, "stop --tool on --server as given, even if the server does not list it (yet)")
	reason := c.fs.String("reason", "", "why (recorded)")
	by := c.fs.String("by", defaultBy(), "who (recorded with the admin principal)")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if *tenant == "" {
		return usageErr("tools %s: --tenant is required", sub)
	}
	if sub == "list" {
		var out admin.StopList
		raw, err := c.do(http.MethodGet, "/admin/v1/tenants/"+esc(*tenant)+"/stops", nil, &out)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintln(w, "SERVER\tTOOL\tREASON\tBY\tAT")
			for _, s := range out.Stops {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", cell(s.Server), or(cell(s.Tool), "(all tools)"), or(cell(s.Reason), "-"), cell(s.By), ts(s.At))
			}
		})
	}
	if *server == "" && *tool == "" {
		return usageErr("tools %s: give --tool, --server, or both", sub)
	}
	if *unlisted && (*server == "" || *tool == "") {
		return usageErr("tools %s: --unlisted needs --server and --tool", sub)
	}
	path := "/admin/v1/tenants/" + esc(*tenant)
	switch {
	case *server == "":
		path += "/tools/" + esc(*tool)
	case *tool == "":
		path += "/servers/" + esc(*server)
	default:
		path += "/servers/" + esc(*server) + "/tools/" + esc(*tool)
	}
	var ans admin.StopAnswer
	raw, err := c.do(http.MethodPost, path+"/"+sub, admin.StopRequest{Reason: *reason, By: *by, Unlisted: *unlisted}, &ans)
	return c.finish(raw, err, func(w io.Writer) {
		what := "server " + cell(ans.Stop.Server)
		if ans.Stop.Tool != "" {
			what = "tool " + cell(ans.Stop.Tool) + " on " + cell(ans.Stop.Server)
		}
		if ans.Name != "" {
			what += " (named " + cell(ans.Name) + ")"
		}
		verb := "resumed"
		if sub == "stop" {
			verb = "stopped"
		}
		fmt.Fprintf(w, "%s %s for tenant %s: %s\n", verb, what, cell(*tenant), inForce(ans))
	})
}

// inForce says when a stop or resume holds on every instance.
func inForce(a admin.StopAnswer) string {
	if a.InForceAfterSecs <= 0 {
		return "in force now (stops are read on every call on this gateway's store)"
	}
	still := "refuse it"
	if a.Stopped {
		still = "run it"
	}
	return fmt.Sprintf("in force on every instance by %s (instances re-read stops every %gs, KILL_SWITCH_REFRESH_SECS; until then one may still %s)",
		ts(a.InForceBy), a.InForceAfterSecs, still)
}

// --- registry ---

func cmdTenants(sub string, args []string) int {
	c := newCLI("tenants " + sub)
	switch sub {
	case "list":
		if err := c.parse(args); err != nil {
			return exitOf(err)
		}
		var out admin.TenantList
		raw, err := c.do(http.MethodGet, "/admin/v1/tenants", nil, &out)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tTIER\tWEBHOOK\tCREATED")
			for _, t := range out.Tenants {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", cell(t.ID), cell(string(t.Tier)), or(cell(t.WebhookURL), "-"), ts(t.Created))
			}
		})
	case "create":
		tier := c.fs.String("tier", "", "free (default), growth or enterprise")
		shape := c.fs.String("refusal-shape", "", "error (default) or result")
		hook := c.fs.String("webhook-url", "", "approval webhook URL")
		hookRef := c.fs.String("webhook-secret-ref", "", "reference to the webhook's HMAC secret (env:NAME, ssm:/name, ...)")
		if err := c.parse(args); err != nil {
			return exitOf(err)
		}
		if len(c.args) != 1 {
			return usageErr("tenants create: want exactly one tenant ID")
		}
		var t registry.Tenant
		raw, err := c.do(http.MethodPost, "/admin/v1/tenants", admin.TenantRequest{ID: c.args[0], Tier: *tier, RefusalShape: *shape, WebhookURL: *hook, WebhookSecretRef: *hookRef}, &t)
		return c.finish(raw, err, func(w io.Writer) { fmt.Fprintf(w, "created tenant %s (%s)\n", cell(t.ID), cell(string(t.Tier))) })
	}
	return usageErr("tenants: want list or create ID")
}

// repeated is a repeatable string flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func cmdServers(sub string, args []string) int {
	c := newCLI("servers " + sub)
	tenant := c.fs.String("tenant", "", "tenant (required)")
	switch sub {
	case "list":
		if err := c.parse(args); err != nil {
			return exitOf(err)
		}
		if *tenant == "" {
			return usageErr("servers list: --tenant is required")
		}
		var out admin.ServerList
		raw, err := c.do(http.MethodGet, "/admin/v1/tenants/"+esc(*tenant)+"/servers", nil, &out)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintln(w, "NAME\tURL\tCREDENTIAL\tNEEDS APPROVAL")
			for _, s := range out.Servers {
				cred, appr := "-", []string{}
				if s.Credential != nil {
					cred = cell(s.Credential.Header) + " from " + cell(s.Credential.Ref)
				}
				for name, set := range s.Tools {
					if set.RequiresApproval {
						appr = append(appr, cell(name))
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", cell(s.Name), cell(s.URL), cred, or(strings.Join(appr, ","), "-"))
			}
		})
	case "add":
		name := c.fs.String("name", "", "server name (required)")
		u := c.fs.String("server-url", "", "the upstream's MCP endpoint (required)")
		header := c.fs.String("credential-header", "", "header the brokered credential goes in")
		ref := c.fs.String("credential-ref", "", "where the credential lives (env:NAME, secretsmanager:ID, ssm:/name)")
		var approve repeated
		c.fs.Var(&approve, "require-approval", "a tool that needs approval (repeatable)")
		if err := c.parse(args); err != nil {
			return exitOf(err)
		}
		if *tenant == "" || *name == "" || *u == "" {
			return usageErr("servers add: --tenant, --name and --server-url are required")
		}
		req := admin.ServerRequest{Name: *name, URL: *u}
		if *header != "" || *ref != "" {
			req.Credential = &registry.Credential{Header: *header, Ref: *ref}
		}
		if len(approve) > 0 {
			req.Tools = map[string]registry.ToolSettings{}
			for _, t := range approve {
				req.Tools[t] = registry.ToolSettings{RequiresApproval: true}
			}
		}
		var s registry.Server
		raw, err := c.do(http.MethodPost, "/admin/v1/tenants/"+esc(*tenant)+"/servers", req, &s)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintf(w, "registered server %s for tenant %s: %s\n", cell(s.Name), cell(s.Tenant), cell(s.URL))
		})
	}
	return usageErr("servers: want list or add")
}

func cmdKeys(sub string, args []string) int {
	c := newCLI("keys " + sub)
	tenant := c.fs.String("tenant", "", "tenant (required)")
	caller := c.fs.String("caller", "", "caller name the key authenticates (create)")
	roles := c.fs.String("roles", "", "comma-separated roles of the tenant's policy the key carries (create)")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if *tenant == "" {
		return usageErr("keys %s: --tenant is required", sub)
	}
	base := "/admin/v1/tenants/" + esc(*tenant) + "/keys"
	switch sub {
	case "list":
		var out admin.KeyList
		raw, err := c.do(http.MethodGet, base, nil, &out)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tCALLER\tCREATED\tREVOKED")
			for _, k := range out.Keys {
				fmt.Fprintf(w, "%s\t%s\t%s\t%v\n", cell(k.ID), cell(k.Caller), ts(k.Created), k.Revoked)
			}
		})
	case "create":
		if *caller == "" {
			return usageErr("keys create: --caller is required")
		}
		var k admin.IssuedKey
		req := admin.KeyRequest{Caller: *caller}
		if *roles != "" {
			req.Roles = strings.Split(*roles, ",")
		}
		raw, err := c.do(http.MethodPost, base, req, &k)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintf(w, "key %s for %s/%s (shown once, stored only as a hash):\n%s\n", cell(k.ID), cell(k.Tenant), cell(k.Caller), cell(k.Key))
		})
	case "revoke":
		if len(c.args) != 1 {
			return usageErr("keys revoke: want exactly one key ID")
		}
		raw, err := c.do(http.MethodPost, base+"/"+esc(c.args[0])+"/revoke", nil, nil)
		return c.finish(raw, err, func(w io.Writer) { fmt.Fprintf(w, "revoked key %s of tenant %s\n", cell(c.args[0]), cell(*tenant)) })
	}
	return usageErr("keys: unknown subcommand %q", sub)
}

func cmdConnections(sub string, args []string) int {
	c := newCLI("connections " + sub)
	tenant := c.fs.String("tenant", "", "tenant (required)")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if *tenant == "" {
		return usageErr("connections %s: --tenant is required", sub)
	}
	base := "/admin/v1/tenants/" + esc(*tenant) + "/connections"
	switch sub {
	case "list":
		var out admin.ConnectionList
		raw, err := c.do(http.MethodGet, base, nil, &out)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tCALLER\tSERVER\tSTATUS\tEXPIRES\tUPDATED")
			for _, x := range out.Connections {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(x.ID), cell(x.Caller), cell(x.Server), cell(x.Status), ts(x.Expires), ts(x.Updated))
			}
		})
	case "revoke":
		if len(c.args) != 1 {
			return usageErr("connections revoke: want exactly one connection ID")
		}
		var out admin.RevokedConnection
		raw, err := c.do(http.MethodPost, base+"/"+esc(c.args[0])+"/revoke", nil, &out)
		return c.finish(raw, err, func(w io.Writer) {
			at := "revoked at the provider"
			if !out.RevokedAtProvider {
				at = "not revoked at the provider (no revocation endpoint, or it refused): revoke the grant there too"
			}
			fmt.Fprintf(w, "revoked connection %s of %s to %s (tenant %s); %s\n", cell(out.ID), cell(out.Caller), cell(out.Server), cell(*tenant), at)
		})
	}
	return usageErr("connections: unknown subcommand %q", sub)
}

// --- audit ---

func cmdAudit(args []string) int {
	c := newCLI("audit list")
	tenant := c.fs.String("tenant", "", "tenant (required)")
	from := c.fs.String("from", "", "RFC 3339 start (default: 24 hours ago)")
	to := c.fs.String("to", "", "RFC 3339 end, exclusive (default: now)")
	limit := c.fs.Int("limit", 0, "records per page (default 100)")
	cursor := c.fs.String("cursor", "", "page cursor from a previous --json answer")
	all := c.fs.Bool("all", false, "follow cursors and print every page")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if *tenant == "" {
		return usageErr("audit: --tenant is required")
	}
	var recs []audit.Record
	var raw []byte
	next := *cursor
	for {
		q := url.Values{}
		for k, v := range map[string]string{"from": *from, "to": *to, "cursor": next} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if *limit > 0 {
			q.Set("limit", fmt.Sprint(*limit))
		}
		path := "/admin/v1/tenants/" + esc(*tenant) + "/audit"
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		var page admin.AuditPage
		var err error
		if raw, err = c.do(http.MethodGet, path, nil, &page); err != nil {
			return c.finish(raw, err, nil)
		}
		recs = append(recs, page.Records...)
		next = page.NextCursor
		if !*all || next == "" {
			break
		}
	}
	if *all && *c.json {
		raw, _ = json.Marshal(admin.AuditPage{Records: recs})
	}
	return c.finish(raw, nil, func(w io.Writer) {
		fmt.Fprintln(w, "TIME\tCALLER\tMETHOD\tSERVER\tTOOL\tOUTCOME\tCODE\tDETAIL")
		for _, r := range recs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", ts(r.Time), cell(r.Caller), cell(r.Method), or(cell(r.Server), "-"), or(cell(r.Tool), "-"), cell(string(r.Outcome)), r.Code, or(cell(r.Detail), "-"))
		}
		if next != "" {
			fmt.Fprintf(w, "more: --cursor %s (or --all)\n", cell(next))
		}
	})
}

// defaultBy is --by's default, never empty: $USER, else $LOGNAME, else the
// account of this process's uid, else "uid N on HOST" (a container whose
// uid has no account and whose environment names no user).
func defaultBy() string {
	return byFrom(os.Getenv, user.Current, os.Getuid, os.Hostname)
}

func byFrom(getenv func(string) string, current func() (*user.User, error), uid func() int, host func() (string, error)) string {
	for _, k := range []string{"USER", "LOGNAME"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v
		}
	}
	if u, err := current(); err == nil && strings.TrimSpace(u.Username) != "" {
		return u.Username
	}
	h, err := host()
	if err != nil || h == "" {
		h = "unknown host"
	}
	return fmt.Sprintf("uid %d on %s", uid(), h)
}
