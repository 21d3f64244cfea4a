//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package wrap

import (
	"os"
	"syscall"
	"unsafe"
)

// isTerminal reports whether f is a terminal (it has terminal attributes).
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	var t syscall.Termios
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), ioctlReadTermios, uintptr(unsafe.Pointer(&t)))
	return e == 0
}
