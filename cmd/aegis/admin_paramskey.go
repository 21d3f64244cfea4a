package main

import (
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/aegis-gw/aegis/shared/admin"
)

// cmdParamsKey is `aegis admin params-key list|rotate`: the deployment's
// params keys (docs/admin.md, "Params key"). No command prints a secret.
func cmdParamsKey(args []string) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "rotate") {
		return usageErr("params-key: want list or rotate")
	}
	c := newCLI("params-key " + args[0])
	reason := c.fs.String("reason", "", "why (rotate; logged)")
	by := c.fs.String("by", os.Getenv("USER"), "who (rotate; logged with the admin principal)")
	if c.parse(args[1:]) != nil {
		return 2
	}
	if len(c.args) != 0 {
		return usageErr("params-key %s: no arguments", args[0])
	}
	if args[0] == "list" {
		var out admin.ParamsKeyList
		raw, err := c.do(http.MethodGet, "/admin/v1/params-keys", nil, &out)
		return c.finish(raw, err, func(w io.Writer) {
			fmt.Fprintln(w, "ID\tCURRENT\tCREATED\tRETIRED")
			for _, k := range out.Keys {
				fmt.Fprintf(w, "%s\t%v\t%s\t%s\n", cell(k.ID), k.Current, ts(k.Created), ts(k.Retired))
			}
		})
	}
	var out admin.RotateAnswer
	raw, err := c.do(http.MethodPost, "/admin/v1/params-keys/rotate", admin.RotateRequest{Reason: *reason, By: *by}, &out)
	return c.finish(raw, err, func(w io.Writer) {
		fmt.Fprintf(w, "params key %s is current; %s is retired (kept for verifying older records)\n", cell(out.Current.ID), cell(out.Retired.ID))
		fmt.Fprintln(w, "gateways use the new key from their next start: restart aegis serve; Lambda instances pick it up as they start")
	})
}
