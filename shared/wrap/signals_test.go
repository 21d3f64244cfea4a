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
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "grandchild.pid")
			args := wrapArgs(t, "wrap", tc.flags, childArgv(t, "forker", pidFile))
			cmd := exec.Command(self(t), args...)
			// No controlling terminal, whatever the test runs under: in the
			// foreground of one, the child shares wrap's group (see
			// TestChildCanOpenTheTerminal).
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			in, _ := cmd.StdinPipe()
			defer in.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			grandchild := waitPid(t, pidFile)
			t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			waitErr := make(chan error, 1)
			go func() { waitErr <- cmd.Wait() }()
			select {
			case <-waitErr:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatal("wrap did not exit")
			}
			if got, want := cmd.ProcessState.ExitCode(), 128+int(tc.sig); got != want {
				t.Errorf("wrap exited %d, want %d", got, want)
			}
			deadline := time.Now().Add(5 * time.Second)
			for !ended(grandchild) {
				if time.Now().After(deadline) {
					t.Fatalf("grandchild %d still running after wrap got %v", grandchild, tc.sig)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
