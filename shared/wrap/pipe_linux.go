package wrap

import (
	"os"
	"syscall"
)

// pipe returns a pipe whose ends are in blocking mode, so a read waits in
// the kernel on its own thread and wakes the moment bytes arrive, instead
// of going through the runtime's poller (which costs tens of microseconds
// per wake-up on a small machine; docs/perf/wrap.md).
func pipe() (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}
