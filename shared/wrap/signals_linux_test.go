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
			pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
			args := wrapArgs(t, "wrap", tc.flags, childArgv(t, "forker", pidFile))
			cmd := exec.Command(self(t), args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			in, _ := cmd.StdinPipe()
			defer in.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			grandchild := waitPid(t, pidFile)
			t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
			pgid, err := syscall.Getpgid(grandchild)
			if err != nil || pgid == cmd.Process.Pid {
				t.Fatalf("the child's group %d (%v) should not be wrap's", pgid, err)
			}
			if err := syscall.Kill(-pgid, syscall.SIGTTIN); err != nil { // stop the child and the grandchild
				t.Fatal(err)
			}
			for deadline := time.Now().Add(5 * time.Second); !stopped(grandchild); {
				if time.Now().After(deadline) {
					t.Fatal("the grandchild did not stop")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			waitErr := make(chan error, 1)
			go func() { waitErr <- cmd.Wait() }()
			select {
			case <-waitErr:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				_ = cmd.Process.Kill()
				<-waitErr
				t.Fatal("wrap did not exit: SIGTERM stayed pending on the stopped child")
			}
			if got, want := cmd.ProcessState.ExitCode(), 128+int(syscall.SIGTERM); got != want {
				t.Errorf("wrap exited %d, want %d", got, want)
			}
		})
	}
}

// stopped reports whether pid is stopped (state T).
func stopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}
