//go:build unix

package wrap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"

	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/internal/testtools"
)

func init() { platformRoles["sigreport"] = sigReport }

// sigReport says which signals it was started ignoring, on one line, then
// copies stdin to stdout line by line.
func sigReport([]string) int {
	fmt.Printf(`{"jsonrpc":"2.0","method":"notifications/signals","params":{"hup_ignored":%v,"pipe_ignored":%v}}`+"\n",
		signal.Ignored(syscall.SIGHUP), signal.Ignored(syscall.SIGPIPE))
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := os.Stdout.Write(line); werr != nil {
				return 1
			}
		}
		if err != nil {
			return 0
		}
	}
}

// TestNohup is issue 35, item 6: under nohup, the child inherits the
// ignored SIGHUP as it would started directly, a hang-up sent to wrap
// leaves it running, and wrap's output is byte for byte the child's
// alone (in default mode, and relayed under a policy). It used to pass
// the hang-up on and the server died with status 129.
func TestNohup(t *testing.T) {
	nohup := testtools.Path(t, "nohup")
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n",
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"x":"é"}}}` + "\n",
	}
	run := func(t *testing.T, argv []string, hangUp bool) ([]byte, int) {
		t.Helper()
		cmd := exec.Command(nohup, argv...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no terminal: nohup leaves the streams alone
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		outR, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncbuf.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		out := bufio.NewReader(outR)
		var got bytes.Buffer
		first, err := out.ReadString('\n') // the child is running: wrap's signals are set
		if err != nil {
			t.Fatalf("%v; stderr: %s", err, stderr.String())
		}
		got.WriteString(first)
		if hangUp {
			if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range lines {
			if _, err := io.WriteString(in, l); err != nil {
				t.Fatalf("write: %v", err)
			}
			s, err := out.ReadString('\n')
			if err != nil {
				t.Fatalf("after the hang-up the child no longer answers: %v; stderr: %s", err, stderr.String())
			}
			got.WriteString(s)
		}
		in.Close()
		rest, _ := io.ReadAll(out)
		got.Write(rest)
		waitExit(t, cmd, func() { _ = cmd.Process.Kill() }, "did not exit")
		return got.Bytes(), cmd.ProcessState.ExitCode()
	}
	direct, code := run(t, childArgv(t, "sigreport"), false)
	if code != 0 || !bytes.Contains(direct, []byte(`"hup_ignored":true`)) {
		t.Fatalf("the child under nohup alone: exit %d, %q", code, direct)
	}
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"default", nil},
		{"policy and audit", []string{"--policy", "POLICY", "--audit", "AUDIT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, code := run(t, append([]string{self(t)}, wrapArgs(t, "wrap", tc.flags, childArgv(t, "sigreport"))...), true)
			if code != 0 {
				t.Errorf("wrap exited %d after a hang-up, want 0 (the child ignores it)", code)
			}
			if !bytes.Equal(got, direct) {
				t.Errorf("wrap under nohup wrote %q\nthe child alone %q", got, direct)
			}
		})
	}
}
