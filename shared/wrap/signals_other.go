//go:build !unix

package wrap

import (
	"os"
	"syscall"
)

var forwardedSignals = []os.Signal{os.Interrupt}

func childAttr() *syscall.SysProcAttr { return nil }
