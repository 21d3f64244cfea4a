//go:build !unix

package lambdatest

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

func terminate(p *os.Process) { _ = p.Kill() }

func kill(p *os.Process) { _ = p.Kill() }
