package main

import (
	"fmt"
	"io"
	"net/http"

	"github.com/aegis-gw/aegis/shared/admin"
)

// cmdParamsKey is `aegis admin params-key list|rotate`: the deployment's
// params keys (docs/admin.md, "Params key"). No command prints a secret.
func cmdParamsKey(sub string, args []string) int {
	c := newCLI("params-key " + sub)
	reason := c.fs.String("reason", "", "why (rotate; logged)")
	by := c.fs.String("by", defaultBy(), "who (rotate; logged with the admin principal)")
	if err := c.parse(args); err != nil {
		return exitOf(err)
	}
	if len(c.args) != 0 {
		return usageErr("params-key %s: no arguments", sub)
	}
	if sub == "list" {
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
