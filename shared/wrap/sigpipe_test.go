//go:build unix

package wrap

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestClientClosingStdoutIsNotFatal: a client that closes its end of
// wrap's stdout must not kill wrap with SIGPIPE. wrap keeps deciding and
// recording what the client still sends, drains the child, and exits with
// the child's status once the child is done, its audit file complete.
func TestClientClosingStdoutIsNotFatal(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	pol := writeFile(t, "policy.yaml", testPolicy)
	args := append([]string{roleFlag + "wrap", "--policy", pol, "--audit", audit, "--"}, childArgv(t, "mirror", "", "5")...)
	cmd := exec.Command(self(t), args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outW.Close()
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"
	io.WriteString(in, ping)
	if got, err := bufio.NewReader(outR).ReadString('\n'); err != nil || got != ping {
		t.Fatalf("got %q, %v", got, err)
	}
	outR.Close() // the client stops reading
	// Each of these makes wrap write to the closed pipe: the mirror's echo
	// of the ping and of the allowed call, the refusal frame.
	for _, line := range []string{ping, callLine(2, "echo"), callLine(3, "shell_exec")} {
		io.WriteString(in, line)
		time.Sleep(50 * time.Millisecond)
	}
	in.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("wrap did not exit")
	}
	if got := cmd.ProcessState.ExitCode(); got != 5 {
		t.Errorf("wrap exited %d (%v), want the child's status 5", got, cmd.ProcessState)
	}
	recs := readRecords(t, audit)
	if len(recs) != 2 || recs[0].Outcome != "allowed" || recs[1].Outcome != "refused" {
		t.Errorf("records %+v, want the allowed and the refused call", recs)
	}
}
