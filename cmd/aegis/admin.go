package main

import (
	"fmt"
	"os"

	"github.com/aegis-gw/aegis/shared/admin"
)

// adminCommand is one `aegis admin` subcommand.
type adminCommand struct {
	name, summary string
	run           func(args []string) int
}

// adminCommands are the `aegis admin` subcommands, in the order help lists
// them. This table is the only place a subcommand is named.
var adminCommands = []adminCommand{
	{"approvals", "list, approve and deny held calls", cmdApprovals},
	{"tools", "stop and resume tools and servers (kill switch)", cmdTools},
	{"tenants", "list and add tenants", cmdTenants},
	{"servers", "list, add and remove a tenant's upstream servers", cmdServers},
	{"keys", "list, create and revoke a tenant's API keys", cmdKeys},
	{"audit", "read a tenant's audit trail", cmdAudit},
	{"params-key", "list and rotate the key audit params hashes are keyed with", cmdParamsKey},
	{"policy", "put and get a tenant's policy set", cmdPolicy},
	{"pins", "list, diff, pin and unpin tool definitions (rug pulls); new-tools: pin or hold", cmdPins},
	{"console", "serve the web console on this machine for a deployed stack (signs with your AWS credentials)", cmdConsole},
	{"new-key", "print a fresh admin key for AEGIS_ADMIN_KEY", cmdNewKey},
	{"create-tables", "create the DynamoDB tables (local use)", runCreateTables},
}

func runAdmin(args []string) int {
	if len(args) > 0 {
		for _, c := range adminCommands {
			if c.name == args[0] {
				return c.run(args[1:])
			}
		}
	}
	fmt.Fprintln(os.Stderr, "aegis admin: subcommands:")
	for _, c := range adminCommands {
		fmt.Fprintf(os.Stderr, "  %-14s %s\n", c.name, c.summary)
	}
	return 2
}

func cmdNewKey([]string) int {
	fmt.Println(admin.NewKey())
	return 0
}
