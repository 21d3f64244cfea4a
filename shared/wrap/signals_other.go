//go:build !unix

package wrap

import (
	"os"
	"syscall"
)

var forwardedSignals = []os.Signal{os.Interrupt}

func childAttr(bool) *syscall.SysProcAttr { return nil }

func signalChild(p *os.Process, s os.Signal, _ bool) { _ = p.Signal(s) }

func catchSIGPIPE() (stop func()) { return func() {} }
