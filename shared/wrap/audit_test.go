package wrap

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

func TestAuditRecords(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	pol := writeFile(t, "policy.yaml", testPolicy)
	p, err := LoadPolicy(pol)
	if err != nil {
		t.Fatal(err)
	}
	l := startLive(t, append([]string{"--policy", pol, "--audit", audit, "--"}, childArgv(t, "mirror", "")...))
	reqs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"shell_exec"}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"pay_now"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","name":"shell_exec"}}`,
	}
	for _, r := range reqs {
		l.send(r + "\n")
		l.recv()
	}
	if code := l.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := readRecords(t, audit)
	h := p.Hash()
	want := []Record{
		{Seq: 1, Tool: "echo", ID: json.RawMessage(`1`), ParamsHash: paramsHash([]byte(`{"name":"echo","arguments":{"a":1}}`)), Outcome: "allowed"},
		{Seq: 2, Tool: "shell_exec", ID: json.RawMessage(`"x"`), ParamsHash: paramsHash([]byte(`{"name":"shell_exec"}`)), Outcome: "refused", Code: -32042, Word: "POLICY_DENIED", Rule: "deny:shell_*"},
		{Seq: 3, Tool: "pay_now", ID: json.RawMessage(`null`), ParamsHash: paramsHash([]byte(`{"name":"pay_now"}`)), Outcome: "refused", Code: -32042, Word: "PENDING_APPROVAL", Rule: "approval:pay_*"},
		{Seq: 4, Tool: "", ID: json.RawMessage(`3`), ParamsHash: paramsHash([]byte(`{"name":"echo","name":"shell_exec"}`)), Outcome: "refused", Code: -32042, Word: "POLICY_DENIED", Rule: "ambiguous"},
	}
	for i := range want {
		want[i].Layer, want[i].Method, want[i].PolicyHash = "wrap", "tools/call", h
	}
	if len(got) == len(want) {
		for i := range got {
			if got[i].Time.IsZero() {
				t.Errorf("record %d has no time", i)
			}
			got[i].Time = want[i].Time
		}
	}
	wj, _ := json.MarshalIndent(want, "", " ")
	gj, _ := json.MarshalIndent(got, "", " ")
	if string(wj) != string(gj) {
		t.Errorf("records:\n%s\nwant:\n%s", gj, wj)
	}
}

// The durability promise, process-crash half: once the client has seen the
// refusal frame, or the child has seen the allowed call, the record is in
// the file, even if wrap is then killed with SIGKILL.
func TestAuditSurvivesKill9(t *testing.T) {
	for _, tc := range []struct {
		name, req, outcome string
	}{
		{"refused", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"shell_exec"}}`, "refused"},
		{"allowed", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo"}}`, "allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			audit := filepath.Join(dir, "audit.jsonl")
			seen := filepath.Join(dir, "seen")
			pol := writeFile(t, "policy.yaml", testPolicy)
			args := append([]string{roleFlag + "wrap", "--policy", pol, "--audit", audit, "--"}, childArgv(t, "mirror", seen)...)
			cmd := exec.Command(self(t), args...)
			in, _ := cmd.StdinPipe()
			outp, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(in, tc.req+"\n"); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(outp).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			// The frame (refused) or the child's echo (allowed) is out:
			// kill wrap before it can do anything else.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			in.Close()
			if tc.outcome == "refused" && line != frame("7", "POLICY_DENIED") {
				t.Fatalf("got %q", line)
			}
			if tc.outcome == "allowed" && line != tc.req+"\n" {
				t.Fatalf("got %q", line)
			}
			recs := readRecords(t, audit)
			if len(recs) != 1 || recs[0].Outcome != tc.outcome {
				t.Fatalf("records after kill -9: %+v", recs)
			}
		})
	}
}

// A record that cannot be written stops the call: fail closed with
// INTERNAL_ERROR rather than forward a call nobody recorded.
func TestAuditWriteFailureFailsClosed(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	seen := filepath.Join(t.TempDir(), "seen")
	l := startLive(t, append([]string{"--audit", "/dev/full", "--"}, childArgv(t, "mirror", seen)...))
	l.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n")
	if got := l.recv(); got != frame("1", "INTERNAL_ERROR") {
		t.Errorf("got %q", got)
	}
	l.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n")
	if got := l.recv(); got != `{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n" {
		t.Errorf("got %q", got)
	}
	l.wait()
	if b, _ := os.ReadFile(seen); string(b) != `{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n" {
		t.Errorf("child received %q", b)
	}
}

func TestSignalForwarded(t *testing.T) {
	cmd := exec.Command(self(t), append([]string{roleFlag + "wrap", "--"}, childArgv(t, "mirror", "")...)...)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	io.WriteString(in, "ready\n")
	if _, err := bufio.NewReader(outp).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if cmd.ProcessState.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("wrap exited with %v, want status %d (child killed by SIGTERM)", err, 128+int(syscall.SIGTERM))
	}
}
