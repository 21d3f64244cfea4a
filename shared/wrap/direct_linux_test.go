package wrap

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestDefaultModeHandsTheChildTheClientsStreams: with no policy and no
// audit, and files at both ends, the child inherits the client's stdin and
// stdout (no relay, no added latency); with a policy, wrap sits between.
func TestDefaultModeHandsTheChildTheClientsStreams(t *testing.T) {
	show := []string{"--", "/bin/sh", "-c", "readlink /proc/self/fd/0 /proc/self/fd/1"}
	run := func(flags ...string) (in, out, got string) {
		t.Helper()
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		defer inW.Close()
		cmd := exec.Command(self(t), append(append([]string{roleFlag + "wrap"}, flags...), show...)...)
		cmd.Stdin, cmd.Stdout = inR, outW
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		inR.Close()
		outW.Close()
		b := make([]byte, 4096)
		n, _ := outR.Read(b)
		_ = cmd.Wait()
		in, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(inW.Fd())))
		out, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(outR.Fd())))
		return in, out, string(b[:n])
	}
	in, out, got := run()
	if lines := strings.Fields(got); len(lines) != 2 || lines[0] != in || lines[1] != out {
		t.Fatalf("default mode: child's fds %q, want the client's pipes %s and %s", got, in, out)
	}
	in, out, got = run("--policy", writeFile(t, "p.yaml", testPolicy))
	if lines := strings.Fields(got); len(lines) != 2 || lines[0] == in || lines[1] == out {
		t.Fatalf("policy mode: child's fds %q should be wrap's own pipes, not %s / %s", got, in, out)
	}
}
