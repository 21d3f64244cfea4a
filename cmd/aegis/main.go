// Command aegis is the gateway's CLI: `serve` runs the gateway locally,
// `wrap` guards a local stdio MCP server, `admin` talks to a gateway's admin
// API (and creates DynamoDB tables for local use). commandTree
// (commands.go) names every command; `aegis help` prints it.
package main

import (
	"flag"
	"fmt"
	"os"
)

var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

// run is the CLI on args (without the program name); it returns the exit
// status: 0, 1 for a failure, 2 for a usage error.
func run(args []string) int {
	return dispatch(commandTree(), nil, args)
}

func cmdVersion(args []string) int {
	if err := parseFlags(flag.NewFlagSet("aegis version", flag.ContinueOnError), "version", args); err != nil {
		return exitOf(err)
	}
	fmt.Fprintln(cliOut, "aegis", version)
	return 0
}
