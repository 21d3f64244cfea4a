//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package wrap

import "os"

// isTerminal cannot ask on this system and says no: the child then always
// gets a process group of its own (see childAttr).
func isTerminal(*os.File) bool { return false }

// inForeground cannot ask on this system and says no (see childAttr).
func inForeground() bool { return false }
