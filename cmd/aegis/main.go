// Command aegis is the gateway's CLI: `serve` runs the gateway locally,
// `wrap` guards a local stdio MCP server, `admin` talks to a gateway's admin
// API (and creates DynamoDB tables for local use).
package main

import (
	"fmt"
	"os"
)

const usage = `aegis: a security gateway for MCP tool calls

usage:
  aegis serve --demo [--addr HOST:PORT]       run the gateway with a demo upstream
  aegis serve --config FILE [--addr HOST:PORT] [--store memory|dynamodb]
  aegis wrap [--policy FILE] [--audit FILE] -- COMMAND [ARGS...]
  aegis admin create-tables                    create the DynamoDB tables (local use)
  aegis admin policy put|get --tenant T [FILE] store or read a tenant's policy set
  aegis policy test --config FILE --caller C --tool S/T [--args JSON]
                                               decide one tools/call offline
  aegis version
`

var version = "dev"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:])
	case "wrap":
		return runWrap(args[1:])
	case "admin":
		return runAdmin(args[1:])
	case "policy":
		return runPolicy(args[1:])
	case "version":
		fmt.Println("aegis", version)
		return 0
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "aegis: unknown command %q\n\n%s", args[0], usage)
	return 2
}
