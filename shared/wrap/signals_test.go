//go:build unix

package wrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalReachesTheChildsGroup: a signal sent to wrap reaches everything
// the child started, not only the child: wrap forwards it to the child's
// process group. (Before, `sh -c 'sleep 27; echo after'` lost its sleep to
// init and ran on.)
func TestSignalReachesTheChildsGroup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		sig   syscall.Signal
	}{
		{"default, SIGTERM", nil, syscall.SIGTERM},
		{"default, SIGINT", nil, syscall.SIGINT},
		{"policy, SIGINT", []string{"--policy", "POLICY"}, syscall.SIGINT},
		{"policy, SIGHUP", []string{"--policy", "POLICY"}, syscall.SIGHUP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, grandchild := startForker(t, tc.flags)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			waitExit(t, cmd, func() { _ = cmd.Process.Kill() }, "wrap did not exit")
			if got, want := cmd.ProcessState.ExitCode(), 128+int(tc.sig); got != want {
				t.Errorf("wrap exited %d, want %d", got, want)
			}
			waitUntil(t, 5*time.Second, func() bool { return ended(grandchild) },
				"grandchild still running after wrap got "+tc.sig.String())
		})
	}
}

// startForker starts wrap (with flags) over a child that starts a sleeping
// grandchild, and returns wrap's command and the grandchild's pid. wrap
// runs in a session of its own: with no controlling terminal, whatever the
// test runs under (in the foreground of one, the child would share wrap's
// group; see TestChildCanOpenTheTerminal).
func startForker(t *testing.T, flags []string) (*exec.Cmd, int) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	cmd := exec.Command(self(t), wrapArgs(t, "wrap", flags, childArgv(t, "forker", pidFile))...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	in, _ := cmd.StdinPipe()
	t.Cleanup(func() { _ = in.Close() })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	grandchild := waitPid(t, pidFile)
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	return cmd, grandchild
}

// waitExit waits up to 10 s for cmd to exit; past that it calls kill,
// reaps cmd and fails with msg.
func waitExit(t *testing.T, cmd *exec.Cmd, kill func(), msg string) {
	t.Helper()
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case <-waitErr:
	case <-time.After(10 * time.Second):
		kill()
		<-waitErr
		t.Fatal(msg)
	}
}

// waitUntil polls cond every 10 ms for up to d, and fails with msg after.
func waitUntil(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
	}
}

// procState is pid's state letter from /proc (R, S, T, Z, ...); ok is
// false where /proc cannot be read.
func procState(pid int) (state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, false
	}
	return s[i+2], true
}

// waitPid waits for a sleeper to write its pid to path.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no grandchild pid")
	return 0
}

// ended reports whether pid has exited (gone, or a zombie nobody reaped).
func ended(pid int) bool {
	st, ok := procState(pid)
	if !ok {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	return st == 'Z'
}
