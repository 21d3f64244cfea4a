package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/auditchain"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/display"
	"github.com/aegis-gw/aegis/shared/wiring"
	"github.com/aegis-gw/aegis/shared/wrap"
)

// keyList is --key, given once per key: a verifier key, or a file of
// them (one a line, as a .pub file holds).
type keyList []string

func (k *keyList) String() string     { return strings.Join(*k, ",") }
func (k *keyList) Set(v string) error { *k = append(*k, v); return nil }

// verifiers reads the --key values.
func (k keyList) verifiers() ([]*auditchain.Verifier, error) {
	var out []*auditchain.Verifier
	for _, v := range k {
		lines := []string{v}
		if b, err := os.ReadFile(v); err == nil {
			lines = strings.Split(string(b), "\n")
		} else if !strings.Contains(v, "+") {
			return nil, fmt.Errorf("--key %s: %w", v, err)
		}
		for _, l := range lines {
			if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			ver, err := auditchain.ParseVerifier(l)
			if err != nil {
				return nil, fmt.Errorf("--key %s: %w", cell(v), err)
			}
			out = append(out, ver)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("give the public key of each signer with --key (a verifier key, or a file of them such as the local key's .pub; `aegis audit key` prints them)")
	}
	return out, nil
}

// runAuditVerify is `aegis audit verify`.
func runAuditVerify(args []string) int {
	fs := flag.NewFlagSet("aegis audit verify", flag.ContinueOnError)
	var keys keyList
	fs.Var(&keys, "key", "a signer's verifier key, or a file of them (repeat for each signer: the Lambda KMS key, each local key)")
	var files keyList
	fs.Var(&files, "file", "an export (aegis admin audit export); repeat for exports of consecutive ranges")
	wrapFile := fs.String("wrap", "", "an `aegis wrap --audit` file (its checkpoints are read from FILE.checkpoints)")
	ddb := fs.Bool("dynamodb", false, "read the audit table directly (AEGIS_AUDIT_TABLE, AWS credentials from the environment)")
	tenant := fs.String("tenant", "", "with --dynamodb: the tenant")
	from := fs.String("from", "", "with --dynamodb: RFC 3339 start (default: the retention horizon)")
	to := fs.String("to", "", "with --dynamodb: RFC 3339 end, exclusive (default: now)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, "audit verify", args); err != nil {
		return exitOf(err)
	}
	vs, err := keys.verifiers()
	if err != nil {
		fmt.Fprintln(cliErr, "aegis audit verify:", err)
		return 2
	}
	var d auditchain.Data
	unreadable := 0
	switch {
	case *wrapFile != "" && len(files) == 0 && !*ddb:
		if d, unreadable, err = wrap.ReadAudit(*wrapFile); err != nil {
			fmt.Fprintln(cliErr, "aegis audit verify:", cell(err.Error()))
			return 1
		}
	case len(files) > 0 && !*ddb:
		var rs []io.Reader
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				fmt.Fprintln(cliErr, "aegis audit verify:", err)
				return 1
			}
			defer fh.Close()
			rs = append(rs, fh)
		}
		if d, err = auditchain.ReadExport(io.MultiReader(rs...)); err != nil {
			fmt.Fprintln(cliErr, "aegis audit verify:", cell(err.Error()))
			return 1
		}
	case *ddb && len(files) == 0 && *tenant != "":
		if d, err = collectDynamo(*tenant, *from, *to); err != nil {
			fmt.Fprintln(cliErr, "aegis audit verify:", cell(err.Error()))
			return 1
		}
	default:
		fmt.Fprintln(cliErr, "aegis audit verify: give --file EXPORT, --wrap FILE, or --dynamodb --tenant T")
		return 2
	}
	rep := auditchain.Verify(d, vs)
	if unreadable > 0 {
		rep.Unknown = append(rep.Unknown, auditchain.Unknown{Records: unreadable, Detail: "lines that are not a record (a fragment a failed write left): not verified"})
	}
	if *asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(cliOut, string(display.JSON(b)))
	} else {
		printReport(cliOut, rep)
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

func collectDynamo(tenant, fromS, toS string) (auditchain.Data, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := config.FromEnv(os.Getenv)
	if err != nil {
		return auditchain.Data{}, err
	}
	st, err := wiring.OpenDynamo(ctx, s, 0, nil)
	if err != nil {
		return auditchain.Data{}, err
	}
	from, to := time.Time{}, time.Now().Add(time.Minute)
	for _, p := range []struct {
		name, v string
		dst     *time.Time
	}{{"--from", fromS, &from}, {"--to", toS, &to}} {
		if p.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, p.v)
		if err != nil {
			return auditchain.Data{}, fmt.Errorf("%s: want an RFC 3339 time", p.name)
		}
		*p.dst = t
	}
	if from.IsZero() {
		if from, err = st.KeptSince(ctx, tenant); err != nil {
			return auditchain.Data{}, err
		}
	}
	return auditchain.Collect(ctx, st, tenant, from, to)
}

// printReport prints rep for a person: faults first, then what could not
// be known, then each writer.
func printReport(w io.Writer, rep auditchain.Report) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	verdict := "OK: no record or checkpoint was changed, removed, inserted or reordered where a checkpoint signs it"
	if !rep.OK() {
		verdict = fmt.Sprintf("FAILED: %d faults", len(rep.Faults))
	}
	fmt.Fprintf(bw, "tenant %s: %d records, %d checkpoints: %s\n", cell(rep.Tenant), rep.Records, rep.Checkpoints, verdict)
	for _, f := range rep.Faults {
		fmt.Fprintln(bw, "FAULT", cell(f.String()))
	}
	for _, u := range rep.Unknown {
		fmt.Fprintf(bw, "CANNOT KNOW writer %s: %d records: %s\n", cell(or(u.Writer, "-")), u.Records, cell(u.Detail))
	}
	for _, s := range rep.Writers {
		fmt.Fprintf(bw, "writer %s: %d records (seq %d..%d), %d checkpoints, signed through seq %d, %d unsigned\n",
			cell(s.Writer), s.Records, s.First, s.Last, s.Checkpoints, s.Signed, s.Unsigned)
	}
}

// runAuditKey is `aegis audit key`: the verifier key of the local key
// file, or of a KMS key.
func runAuditKey(args []string) int {
	fs := flag.NewFlagSet("aegis audit key", flag.ContinueOnError)
	kmsKey := fs.String("kms", "", "a KMS key id or ARN (the stack's AuditSigningKeyArn output): asks KMS for its public key (kms:GetPublicKey)")
	file := fs.String("file", "", "the local key file (default: "+envAuditKeyFile+", else the user configuration directory's aegis/audit-ed25519.key); created when absent")
	if err := parseFlags(fs, "audit key", args); err != nil {
		return exitOf(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var vk string
	var err error
	if *kmsKey != "" {
		vk, err = wiring.KMSVerifier(ctx, *kmsKey)
	} else {
		path := *file
		if path == "" {
			path, err = auditKeyFile()
		}
		var s *auditchain.Ed25519Signer
		if err == nil {
			s, err = auditchain.LoadOrCreateKey(path)
		}
		if err == nil {
			vk, err = s.Verifier(ctx)
		}
	}
	if err != nil {
		fmt.Fprintln(cliErr, "aegis audit key:", cell(err.Error()))
		return 1
	}
	fmt.Fprintln(cliOut, vk)
	return 0
}

// cmdAuditExport is `aegis admin audit export`.
func cmdAuditExport(args []string) int {
	c := newCLI("audit export")
	tenant := c.fs.String("tenant", "", "tenant (required)")
	from := c.fs.String("from", "", "RFC 3339 start (default: 24 hours ago)")
	to := c.fs.String("to", "", "RFC 3339 end, exclusive (default: now)")
	out := c.fs.String("o", "", "write the export to this file (default: standard output)")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if *tenant == "" {
		return usageErr("audit export: --tenant is required")
	}
	q := url.Values{}
	for k, v := range map[string]string{"from": *from, "to": *to} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/admin/v1/tenants/" + esc(*tenant) + "/audit/export"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	raw, err := c.do(http.MethodGet, path, nil, nil)
	if err != nil {
		return c.finish(raw, err, nil)
	}
	if *out == "" {
		_, err = cliOut.Write(raw)
	} else {
		err = os.WriteFile(*out, raw, 0o600)
	}
	if err != nil {
		fmt.Fprintln(cliErr, "aegis admin audit export:", err)
		return 1
	}
	return 0
}
