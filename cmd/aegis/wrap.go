package main

import (
	"os"

	"github.com/aegis-gw/aegis/shared/wrap"
)

// runWrap is `aegis wrap`: args are what follows the word "wrap"; it
// returns the exit code (the child's status, or 2 for a usage error).
// Asked for help, wrap's usage goes to stdout like every command's.
func runWrap(args []string) int {
	if helpRequested(args) {
		return wrap.Run(args, os.Stdin, cliOut, cliOut)
	}
	return wrap.Run(args, os.Stdin, os.Stdout, os.Stderr)
}
