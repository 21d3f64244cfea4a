//go:build unix

package lambdatest

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup makes the emulator lead a new process group, so that the
// bootstrap it starts can be stopped with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// terminate asks the emulator to shut down; it kills its runtime itself.
func terminate(p *os.Process) { _ = p.Signal(syscall.SIGTERM) }

// kill ends every process left in the group the emulator (pid p.Pid) leads.
func kill(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
