package wrap

import (
	"syscall"
	"testing"
	"time"
)

// TestSignalReachesAStoppedChild: a child stopped by job control (SIGTTIN,
// as a read of the terminal from a background group does) would keep a
// forwarded SIGTERM pending, and wrap would wait for it forever. wrap
// sends SIGCONT after a terminating signal, as a shell's kill does.
func TestSignalReachesAStoppedChild(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"default", nil},
		{"policy", []string{"--policy", "POLICY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, grandchild := startForker(t, tc.flags)
			pgid, err := syscall.Getpgid(grandchild)
			if err != nil || pgid == cmd.Process.Pid {
				t.Fatalf("the child's group %d (%v) should not be wrap's", pgid, err)
			}
			if err := syscall.Kill(-pgid, syscall.SIGTTIN); err != nil { // stop the child and the grandchild
				t.Fatal(err)
			}
			waitUntil(t, 5*time.Second, func() bool { st, _ := procState(grandchild); return st == 'T' },
				"the grandchild did not stop")
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			waitExit(t, cmd, func() {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				_ = cmd.Process.Kill()
			}, "wrap did not exit: SIGTERM stayed pending on the stopped child")
			if got, want := cmd.ProcessState.ExitCode(), 128+int(syscall.SIGTERM); got != want {
				t.Errorf("wrap exited %d, want %d", got, want)
			}
		})
	}
}
