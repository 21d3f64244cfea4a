package approval_test

import (
	"syscall"
	"testing"
	"time"
)

// threadCPU is the CPU time the calling OS thread has used (user and
// system): unlike the wall clock, it does not grow while other processes
// hold the cores.
func threadCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
