package main

import (
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/aegis-gw/aegis/shared/admin"
)

// rawBody is a request body cli.do sends as is, with its content type (a
// policy set as written, YAML or JSON), rather than encoding it as JSON.
type rawBody struct {
	b           []byte
	contentType string
}

// cmdPolicy is `aegis admin policy put|get --tenant T [FILE]`: PUT sends
// FILE (or stdin, "-") as the tenant's whole policy set, refused with the
// Cedar error's line and column when it does not load; GET prints the
// stored set and its hash.
func cmdPolicy(sub string, args []string) int {
	c := newCLI("policy " + sub)
	tenant := c.fs.String("tenant", "", "tenant (required)")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if *tenant == "" {
		return usageErr("policy %s: --tenant is required", sub)
	}
	path := "/admin/v1/tenants/" + esc(*tenant) + "/policy"
	var out admin.PolicyAnswer
	show := func(w io.Writer) {
		fmt.Fprintf(w, "tenant %s policy_hash %s", cell(out.Tenant), cell(out.Hash))
		if !out.Stored {
			fmt.Fprint(w, " (no set stored: every call allowed)")
		}
		fmt.Fprintln(w)
		if out.Source != "" {
			fmt.Fprint(w, out.Source)
		}
	}
	switch sub {
	case "get":
		if len(c.args) != 0 {
			return usageErr("policy get: takes no arguments")
		}
		raw, err := c.do(http.MethodGet, path, nil, &out)
		return c.finish(raw, err, show)
	case "put":
		if len(c.args) != 1 {
			return usageErr("policy put: want exactly one FILE (- for stdin)")
		}
		var src []byte
		var err error
		if c.args[0] == "-" {
			src, err = io.ReadAll(os.Stdin)
		} else {
			src, err = os.ReadFile(c.args[0])
		}
		if err != nil {
			return usageErr("policy put: %v", err)
		}
		raw, err := c.do(http.MethodPut, path, rawBody{b: src, contentType: "application/yaml"}, &out)
		return c.finish(raw, err, show)
	}
	return usageErr("policy: unknown subcommand %q", sub)
}
