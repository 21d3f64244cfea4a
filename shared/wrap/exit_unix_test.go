//go:build unix

package wrap

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func init() {
	platformRoles["orphaner"] = orphaner
}

// orphaner starts a grandchild (the sleeper role, pid file args[0]) that
// keeps the child's stdout open, writes args[1] bytes and a last line to
// stdout, and exits with status 3 without waiting for it, as
// `sh -c 'server & exit 3'` or a daemonizing server does.
func orphaner(args []string) int {
	self, err := os.Executable()
	if err != nil {
		return 98
	}
	cmd := exec.Command(self, roleFlag+"sleeper", args[0])
	cmd.Stdout = os.Stdout
	if err := cmd.Start(); err != nil {
		return 97
	}
	n, _ := strconv.Atoi(args[1])
	if _, err := os.Stdout.Write(orphanerOutput(n)); err != nil {
		return 96
	}
	return 3
}

func orphanerOutput(n int) []byte {
	return append(bytes.Repeat([]byte("o"), n), fmt.Sprintf("\norphaner wrote %d bytes\n", n)...)
}

// TestExitDoesNotWaitForGrandchildren: wrap exits with the child's status
// once the child has exited and everything it wrote has reached the
// client, even while a process the child started keeps its stdout open.
// Before, in the modes that relay stdout, wrap waited for the end of that
// stream: until the grandchild exited, or forever for a daemon. The client
// here reads slowly (it starts after 600 ms), to check that a child's
// output still queued when it exits is not cut off.
func TestExitDoesNotWaitForGrandchildren(t *testing.T) {
	const size = 150 << 10 // fits in the pipes: the child exits before the client reads
	for _, tc := range []struct {
		name  string
		role  string
		flags []string
	}{
		{"default", "wrap", nil},
		{"default, relayed", "bare-relay", nil},
		{"policy", "wrap", []string{"--policy", "POLICY"}},
		{"audit", "wrap", []string{"--audit", "AUDIT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "grandchild.pid")
			args := wrapArgs(t, tc.role, tc.flags, childArgv(t, "orphaner", pidFile, strconv.Itoa(size)))
			inR, inW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer inW.Close() // the client keeps its end open
			outR, outW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer outR.Close()
			cmd := exec.Command(self(t), args...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			inR.Close()
			outW.Close()
			waitErr := make(chan error, 1)
			go func() { waitErr <- cmd.Wait() }()
			grandchild := waitPid(t, pidFile)
			t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })

			time.Sleep(600 * time.Millisecond) // a slow client
			want := orphanerOutput(size)
			got := make([]byte, len(want))
			if _, err := io.ReadFull(outR, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("client got %d bytes (%v), want the child's %d", firstDiff(got, want), err, len(want))
			}
			read := time.Now()
			select {
			case <-waitErr:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-waitErr
				t.Fatal("wrap did not exit while the grandchild holds the child's stdout")
			}
			if d := time.Since(read); d > 3*time.Second {
				t.Errorf("wrap exited %v after the client had the child's output", d)
			}
			if got := cmd.ProcessState.ExitCode(); got != 3 {
				t.Errorf("wrap exited %d, want the child's 3", got)
			}
			if ended(grandchild) {
				t.Error("the grandchild should still run: wrap does not signal it on a normal exit")
			}
		})
	}
}
