package main

import (
	"flag"
	"fmt"

	"github.com/aegis-gw/aegis/shared/admin"
)

// The `aegis admin` subcommands are named in commandTree (commands.go).

func cmdNewKey(args []string) int {
	if err := parseFlags(flag.NewFlagSet("aegis admin new-key", flag.ContinueOnError), "admin new-key", args); err != nil {
		return exitOf(err)
	}
	fmt.Fprintln(cliOut, admin.NewKey())
	return 0
}
