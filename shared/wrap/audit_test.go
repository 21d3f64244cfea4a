package wrap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/audit"
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
	// Chained, and signed at exit: the file verifies with the key's .pub.
	d, bad, err := ReadAudit(audit)
	if err != nil || bad != 0 {
		t.Fatalf("ReadAudit: %v, %d unreadable lines", err, bad)
	}
	rep := auditchain.Verify(d, []*auditchain.Verifier{testAuditVerifier(t)})
	if !rep.OK() || len(rep.Writers) != 1 || rep.Writers[0].Records != 4 || rep.Writers[0].Unsigned != 0 {
		t.Fatalf("verify: %+v", rep)
	}
	// A line edited after the fact is named.
	raw, _ := os.ReadFile(audit)
	if err := os.WriteFile(audit, bytes.Replace(raw, []byte(`"rule":"deny:shell_*"`), []byte(`"rule":"allow:shell_*"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	d, _, _ = ReadAudit(audit)
	if rep := auditchain.Verify(d, []*auditchain.Verifier{testAuditVerifier(t)}); len(rep.Faults) != 1 || rep.Faults[0].Kind != auditchain.Changed || rep.Faults[0].Seq != 2 {
		t.Fatalf("verify of an edited file: %+v", rep.Faults)
	}
	for i := range got {
		if got[i].Writer == "" || got[i].Hash == "" {
			t.Errorf("record %d is not chained", i)
		}
		got[i].Writer, got[i].Prev, got[i].Hash = "", "", ""
	}
	h := p.Hash()
	want := []Record{
		{Seq: 1, Tool: "echo", ID: json.RawMessage(`1`), ParamsHash: argsHash(`{"a":1}`), Outcome: "allowed"},
		{Seq: 2, Tool: "shell_exec", ID: json.RawMessage(`"x"`), ParamsHash: argsHash(""), Outcome: "refused", Code: -32042, Word: "POLICY_DENIED", Slot: "policy", Rule: "deny:shell_*"},
		{Seq: 3, Tool: "pay_now", ID: json.RawMessage(`null`), ParamsHash: argsHash(""), Outcome: "refused", Code: -32042, Word: "PENDING_APPROVAL", Slot: "policy", Rule: "approval:pay_*"},
		{Seq: 4, Tool: "", ID: json.RawMessage(`3`), ParamsHash: argsHash(""), Outcome: "refused", Code: -32042, Word: "POLICY_DENIED", Slot: "policy", Rule: "ambiguous"},
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
			if tc.outcome == "refused" && line != frame("7", "POLICY_DENIED", "shell_exec", "deny:shell_*") {
				t.Fatalf("got %q", line)
			}
			if tc.outcome == "allowed" && line != tc.req+"\n" {
				t.Fatalf("got %q", line)
			}
			recs := readRecords(t, audit)
			if len(recs) != 1 || string(recs[0].Outcome) != tc.outcome {
				t.Fatalf("records after kill -9: %+v", recs)
			}
		})
	}
}

// rig is a gate on an in-memory child and client, deciding one line at a
// time on the test's goroutine.
type rig struct {
	g             *gate
	child, client bytes.Buffer
	warns         syncbuf.Buffer // gate and audit log warnings, one per line
}

func newRig(t *testing.T, a *auditLog, policy string) *rig {
	t.Helper()
	r := &rig{}
	warn := func(m string) { fmt.Fprintln(&r.warns, m) }
	a.warn = warn
	r.g = &gate{policy: emptyPolicy, audit: a, child: &r.child, out: &clientOut{w: &r.client}, warn: warn}
	if policy != "" {
		p, err := ParsePolicy([]byte(policy))
		if err != nil {
			t.Fatal(err)
		}
		r.g.policy, r.g.enforce = p, true
	}
	t.Cleanup(func() { _ = a.close() })
	return r
}

func (r *rig) send(t *testing.T, line string) {
	t.Helper()
	if err := r.g.batch([][]byte{[]byte(line)}); err != nil {
		t.Fatal(err)
	}
}

func callLine(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q}}`+"\n", id, tool)
}

// A record that cannot be written stops the call: fail closed with
// INTERNAL_ERROR rather than forward a call nobody recorded, keep relaying
// everything else, and say on stderr that the refusal is not on file.
func TestAuditWriteFailureFailsClosed(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Skip("no /dev/full")
	}
	r := newRig(t, testAuditLog(f, false), "")
	r.send(t, callLine(1, "echo"))
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"
	r.send(t, ping)
	if r.client.String() != frame("1", "INTERNAL_ERROR", "echo", ruleAuditFailed) {
		t.Errorf("client got %q", r.client.String())
	}
	if r.child.String() != ping {
		t.Errorf("child received %q", r.child.String())
	}
	if w := r.warns.String(); !strings.Contains(w, "no space left on device") || !strings.Contains(w, "1 tools/call refused with INTERNAL_ERROR") || !strings.Contains(w, "NOT recorded") {
		t.Errorf("stderr %q should give the cause and say the refusal is not recorded", w)
	}
}

// TestAuditSyncErrorIsNotPermanent: a background fdatasync that fails once
// does not disable tool calls for the rest of the session. The next call
// syncs before it is acted on; when that sync succeeds, calls flow again.
func TestAuditSyncErrorIsNotPermanent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a := testAuditLog(f, false)
	failed := make(chan struct{})
	var n atomic.Int32
	a.sync = func(f *os.File) error {
		if n.Add(1) == 1 {
			defer close(failed)
			return syscall.EIO
		}
		return datasync(f)
	}
	r := newRig(t, a, "")
	r.send(t, callLine(1, "echo"))
	<-failed // the background sync of record 1 failed
	// The failure is reported as soon as the sync returns (wait for that,
	// not just for the sync: the report follows it on the same goroutine).
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(r.warns.String(), "input/output error"); {
		if time.Now().After(deadline) {
			t.Fatalf("stderr %q should report the failed sync", r.warns.String())
		}
		time.Sleep(time.Millisecond)
	}
	r.send(t, callLine(2, "echo"))
	r.send(t, callLine(3, "echo"))
	if want := callLine(1, "echo") + callLine(2, "echo") + callLine(3, "echo"); r.child.String() != want {
		t.Errorf("child received %q, want all three calls; client got %q", r.child.String(), r.client.String())
	}
	recs := readRecords(t, path)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3: %+v", len(recs), recs)
	}
	if w := r.warns.String(); !strings.Contains(w, "input/output error") {
		t.Errorf("stderr %q should report the failed sync", w)
	}
}

// TestAuditSyncFailureRecordsTheRefusal: with --audit-sync, a call whose
// record was written but could not be synced is refused, and that refusal
// is itself recorded (the file over-reports: it also holds the record
// written before the sync failed).
func TestAuditSyncFailureRecordsTheRefusal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a := testAuditLog(f, true)
	var n atomic.Int32
	a.sync = func(f *os.File) error {
		if n.Add(1) == 1 {
			return syscall.EIO
		}
		return datasync(f)
	}
	r := newRig(t, a, testPolicy)
	r.send(t, callLine(1, "echo"))
	r.send(t, callLine(2, "echo"))
	if r.client.String() != frame("1", "INTERNAL_ERROR", "echo", ruleAuditFailed) || r.child.String() != callLine(2, "echo") {
		t.Errorf("client got %q, child got %q", r.client.String(), r.child.String())
	}
	recs := readRecords(t, path)
	var got []string
	for _, rec := range recs {
		got = append(got, fmt.Sprintf("%s %s %s %s", rec.ID, rec.Outcome, rec.Word, rec.Rule))
	}
	want := []string{"1 allowed  ", "1 refused INTERNAL_ERROR audit-write-failed", "2 allowed  "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("records %q, want %q", got, want)
	}
	if w := r.warns.String(); !strings.Contains(w, "input/output error") || !strings.Contains(w, "refusals are recorded") {
		t.Errorf("stderr %q", w)
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

// argsHash is the params_hash of a tools/call whose arguments member is
// args ("" when it has none).
func argsHash(args string) string { return testParamsKey.Hash(json.RawMessage(args)) }

// testParamsKey is the params key of every wrap the tests run (TestMain
// points EnvParamsKeyFile at it).
var testParamsKey = func() audit.ParamsKey {
	k, err := audit.NewParamsKey([]byte("wrap-tests-params-key-32-bytes!!"))
	if err != nil {
		panic(err)
	}
	return k
}()

// lineHash is the params_hash of a call wrap could only read as the whole
// line.
func lineHash(line string) string { return testParamsKey.Hash([]byte(line)) }

// TestParamsHashIsTheGateways: wrap hashes what the gateway hashes, the
// arguments member through ParamsKey.Hash, so the same call spelled
// with other spacing, key order or id has the same params_hash, and other
// arguments another.
func TestParamsHashIsTheGateways(t *testing.T) {
	hashOf := func(line string) string {
		t.Helper()
		calls, _, _ := findCalls([]byte(line + "\n"))
		if len(calls) != 1 {
			t.Fatalf("%s: %d calls", line, len(calls))
		}
		return calls[0].paramsHash(testParamsKey)
	}
	base := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi","n":[1,2]}}}`
	want := testParamsKey.Hash(json.RawMessage(`{"message":"hi","n":[1,2]}`))
	for _, line := range []string{
		base,
		`{"params": {"arguments": { "n" : [1, 2], "message":"hi" }, "name":"echo"}, "method":"tools/call", "id":"other", "jsonrpc":"2.0"}`,
		`[` + base + `]`,
	} {
		if got := hashOf(line); got != want {
			t.Errorf("%s: params_hash %s, want %s", line, got, want)
		}
	}
	if hashOf(strings.Replace(base, `"hi"`, `"ho"`, 1)) == want {
		t.Error("other arguments, same hash")
	}
	if got := hashOf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`); got != argsHash("") || got != argsHash("null") {
		t.Errorf("no arguments: %s, want the hash of null", got)
	}
	// Read only as the whole line: the line is hashed.
	if got := hashOf(`[[` + base + `]]`); got != lineHash(`[[`+base+`]]`) {
		t.Errorf("array with a non-object element: %s", got)
	}
	if got := hashOf(`{"x":` + "\r" + base + `}`); got != lineHash(`{"x":`+"\r"+base+"}\n") {
		t.Errorf("unparseable line: %s", got)
	}
}

func TestRecordValidate(t *testing.T) {
	ok := Record{Time: time.Date(2026, 11, 30, 5, 40, 1, 0, time.UTC), Seq: 2, Layer: "wrap", Method: "tools/call",
		Tool: "write_file", ID: json.RawMessage(`7`), ParamsHash: argsHash(`{"path":"/etc/passwd"}`),
		Outcome: "refused", Code: -32042, Word: "POLICY_DENIED", Slot: "policy", Rule: "deny:write_file", PolicyHash: audit.PolicyHash([]byte("p"))}
	cases := []struct {
		name string
		edit func(*Record)
		want string
	}{
		{"refused", func(*Record) {}, ""},
		{"allowed", func(r *Record) { r.Outcome, r.Code, r.Word, r.Slot = "allowed", 0, "", "" }, ""},
		{"refused without a slot", func(r *Record) { r.Slot = "" }, "names no slot"},
		{"no policy", func(r *Record) { r.PolicyHash = emptyPolicy.Hash() }, ""},
		{"string id", func(r *Record) { r.ID = json.RawMessage(`"x"`) }, ""},
		{"null id, no tool", func(r *Record) { r.ID, r.Tool = json.RawMessage(`null`), "" }, ""},
		{"audit down", func(r *Record) { r.Word, r.Rule, r.Slot = "INTERNAL_ERROR", ruleAuditFailed, "audit" }, ""},

		{"the old params_hash", func(r *Record) { r.ParamsHash = "sha256:" + r.ParamsHash }, "params_hash"},
		{"the old policy_hash", func(r *Record) { r.PolicyHash = "sha256:" + r.PolicyHash }, "policy_hash"},
		{"gateway code", func(r *Record) { r.Code = -32003 }, "want -32042"},
		{"unknown word", func(r *Record) { r.Word = "DENIED" }, "not in the refusal table"},
		{"error outcome", func(r *Record) { r.Outcome = "error" }, "wrap decides allowed or refused"},
		{"unknown outcome", func(r *Record) { r.Outcome = "blocked" }, "unknown outcome"},
		{"gateway layer", func(r *Record) { r.Layer = "gateway" }, "tenant"},
		{"other method", func(r *Record) { r.Method = "tools/list" }, "method"},
		{"no seq", func(r *Record) { r.Seq = 0 }, "no seq"},
		{"no id", func(r *Record) { r.ID = nil }, "id"},
		{"object id", func(r *Record) { r.ID = json.RawMessage(`{}`) }, "id"},
		{"no time", func(r *Record) { r.Time = time.Time{} }, "no time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			err := r.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// A record that does not validate is not written: commit fails (the gate
// then fails closed) and the next record keeps the numbering.
func TestCommitWritesOnlyValidRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	a := testAuditLog(f, true)
	good := Record{Tool: "echo", ID: json.RawMessage(`1`), ParamsHash: argsHash(""), Outcome: "allowed", PolicyHash: emptyPolicy.Hash()}
	bad := good
	bad.PolicyHash = "sha256:" + bad.PolicyHash
	if written, err := a.commit([]Record{good, bad}); written || err == nil || !strings.Contains(err.Error(), "policy_hash") {
		t.Fatalf("commit of an invalid record: written %v, err %v", written, err)
	}
	if _, err := a.commit([]Record{good}); err != nil {
		t.Fatal(err)
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, path)
	if len(recs) != 1 || recs[0].Seq != 1 {
		t.Fatalf("records %+v, want the one valid record, seq 1", recs)
	}
}

// testAuditLog is newAuditLog with the tests' params key, as openAudit
// would give it.
func testAuditLog(f *os.File, syncEach bool) *auditLog {
	a := newAuditLog(f, syncEach)
	a.key = testParamsKey
	return a
}

// testAuditVerifier is the verifier of the audit signing key the tests'
// wraps use (TestMain), from its .pub file.
func testAuditVerifier(t *testing.T) *auditchain.Verifier {
	t.Helper()
	b, err := os.ReadFile(os.Getenv(auditchain.EnvKeyFile) + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	v, err := auditchain.ParseVerifier(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
