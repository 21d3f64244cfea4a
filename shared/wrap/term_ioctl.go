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

// inForeground reports whether wrap's process group is the foreground
// group of its controlling terminal: a child kept in that group may read
// the terminal, and one put in a group of its own may not (SIGTTIN stops
// it). It is false when wrap has no controlling terminal (/dev/tty cannot
// be opened) or is in the background of it.
func inForeground() bool {
	fd, err := syscall.Open("/dev/tty", syscall.O_RDONLY|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer syscall.Close(fd)
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return false
	}
	return int(pgrp) == syscall.Getpgrp()
}
