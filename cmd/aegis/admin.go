package main

import (
	"fmt"
	"os"
)

// adminCommands maps `aegis admin` subcommands to their runners.
var adminCommands = map[string]func(args []string) int{}

func runAdmin(args []string) int {
	if len(args) > 0 {
		if run, ok := adminCommands[args[0]]; ok {
			return run(args[1:])
		}
	}
	fmt.Fprintln(os.Stderr, "aegis admin: subcommands:")
	for name := range adminCommands {
		fmt.Fprintln(os.Stderr, "  "+name)
	}
	return 2
}
