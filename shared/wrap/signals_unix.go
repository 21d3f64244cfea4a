//go:build unix

package wrap

import (
	"os"
	"syscall"
)

// forwardedSignals reach the child when wrap receives them. SIGPIPE is not
// among them: wrap handles a closed stream itself.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// childAttr puts the child in its own process group: a terminal's ^C then
// reaches wrap alone, which forwards it once, instead of the child getting
// it twice (from the terminal and from wrap).
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
