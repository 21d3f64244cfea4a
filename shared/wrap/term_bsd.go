//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package wrap

import "syscall"

const ioctlReadTermios = syscall.TIOCGETA
