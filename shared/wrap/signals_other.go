//go:build !unix

package wrap

import "os"

var forwardedSignals = []os.Signal{os.Interrupt}
