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
