package wrap

import "syscall"

const ioctlReadTermios = syscall.TCGETS
