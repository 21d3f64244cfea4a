//go:build unix

package wrap

import (
	"os"
	"os/signal"
	"syscall"
)

// forwardedSignals reach the child when wrap receives them. SIGPIPE is not
// among them: wrap handles a closed stream itself.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH,
}

// childAttr says where the child runs. With ownGroup it leads a process
// group of its own, which wrap signals as a whole (signalChild): whatever
// the child starts gets the signal too, and a terminal's ^C reaches wrap
// alone (the child's group is not the terminal's foreground group), which
// forwards it once. Without, the child stays in wrap's group: that is for
// a child that may read a terminal (its stdin, or /dev/tty while wrap is
// in the terminal's foreground), which it may only do from the foreground
// group: a read from a background group stops it with SIGTTIN, and wrap
// would wait for it forever.
func childAttr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}

// signalChild forwards s to the child: to its whole process group when it
// leads one (followed by SIGCONT for a signal that ends a process), else
// to the child alone. In wrap's own group the terminal already delivered
// the signals it generates (^C, ^\, a window resize) to every process of
// the group, the child included, so those are not sent a second time.
func signalChild(p *os.Process, s os.Signal, ownGroup bool) {
	sig, ok := s.(syscall.Signal)
	if !ok {
		return
	}
	if ownGroup {
		_ = syscall.Kill(-p.Pid, sig)
		switch sig {
		case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
			// A stopped process keeps the signal pending until it is
			// continued: a child that read the terminal from its
			// background group (SIGTTIN) would never see it, and wrap
			// would wait forever. A shell's kill does the same.
			_ = syscall.Kill(-p.Pid, syscall.SIGCONT)
		}
		return
	}
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGWINCH:
		return
	}
	_ = p.Signal(sig)
}

// catchSIGPIPE makes a write to a closed stdout or stderr an error that
// wrap handles (it drains the child and exits with the child's status)
// instead of the Go runtime killing wrap with SIGPIPE, which would also
// skip the audit file's final sync. It catches the signal rather than
// ignoring it because an ignored signal stays ignored in the child, which
// must start with the disposition wrap was started with. The returned
// func undoes it.
func catchSIGPIPE() (stop func()) {
	if signal.Ignored(syscall.SIGPIPE) {
		// Started ignoring it: a write to a closed stream is already an
		// error, and the child inherits the ignored SIGPIPE as it would
		// started directly.
		return func() {}
	}
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGPIPE)
	return func() { signal.Stop(c) }
}
