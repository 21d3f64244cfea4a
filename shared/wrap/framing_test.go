package wrap

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A denied call the tests smuggle in different framings.
const deniedCall = `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"shell_exec","arguments":{}}}`

// TestStrictFramingUnderPolicy: under a policy, a line reaches the child
// only when it is, by itself, one complete JSON object or array. Anything
// else could be one piece of a tools/call that a child reassembles (a
// Python child splits lines at a bare CR, the Go SDK's streaming decoder
// joins values across newlines), so it is refused as a possible call: a
// -32042 frame with id null, POLICY_DENIED, rule "unparseable".
func TestStrictFramingUnderPolicy(t *testing.T) {
	refused := frame("null", "POLICY_DENIED", "", ruleUnparseable)
	cases := []struct {
		name   string
		lines  []string // each sent as is; the child must see exactly the forwarded ones
		frames int      // refusal frames expected (one per refused line)
		fwd    []bool   // per line: forwarded to the child
	}{
		{"bare CR hides a call inside an object (Python universal newlines)",
			[]string{"{\"x\":\r" + deniedCall + "\r}\n"}, 1, []bool{false}},
		{"bare CR between two objects",
			[]string{`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\r" + deniedCall + "\n"}, 1, []bool{false}},
		{"object split over three lines, method alone (Go SDK decoder)",
			[]string{`{"jsonrpc":"2.0","id":2,"method":` + "\n", `"tools/call"` + "\n", `,"params":{"name":"shell_exec","arguments":{"text":"pwned"}}}` + "\n"}, 3, []bool{false, false, false}},
		{"object split after the method",
			[]string{`{"jsonrpc":"2.0","id":2,"method":"tools/call",` + "\n", `"params":{"name":"shell_exec"}}` + "\n"}, 2, []bool{false, false}},
		{"method key and escaped value on different lines",
			[]string{`{"jsonrpc":"2.0","id":2,"method":` + "\n", `"tools\/c` + `all","params":{"name":"shell_exec"}}` + "\n"}, 2, []bool{false, false}},
		{"bare string", []string{`"tools/call"` + "\n"}, 1, []bool{false}},
		{"bare number", []string{"2\n"}, 1, []bool{false}},
		{"bare literal", []string{"null\n"}, 1, []bool{false}},
		{"two values on one line", []string{`{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"}, 1, []bool{false}},
		{"byte order mark", []string{"\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"}, 1, []bool{false}},
		{"invalid JSON without tools/call", []string{"{not json at all\n"}, 1, []bool{false}},
		{"not UTF-8", []string{"{\"a\":\"\xff\"}\n"}, 1, []bool{false}},
		{"a lone closing brace", []string{"}\n"}, 1, []bool{false}},
		{"blank lines pass", []string{"\n", "   \t \r\n", "\r\n"}, 0, []bool{true, true, true}},
		{"CRLF, spaces and tabs around an object pass",
			[]string{" \t" + `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\t \r\n"}, 0, []bool{true}},
		{"a batch array passes", []string{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n"}, 0, []bool{true}},
		{"an unterminated last line is refused at EOF", []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n", `{"jsonrpc":"2.0","id":8,"par`}, 1, []bool{true, false}},
		{"a complete last line without a newline passes", []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`}, 0, []bool{true}},
	}
	pol := writeFile(t, "policy.yaml", testPolicy)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			seen := filepath.Join(dir, "seen")
			audit := filepath.Join(dir, "audit.jsonl")
			var in, want bytes.Buffer
			for i, l := range tc.lines {
				in.WriteString(l)
				if tc.fwd[i] {
					want.WriteString(l)
				}
			}
			out, stderr, code := runAll(t, append([]string{"--policy", pol, "--audit", audit, "--"}, childArgv(t, "mirror", seen)...), in.Bytes())
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			got, _ := os.ReadFile(seen)
			if !bytes.Equal(got, want.Bytes()) {
				t.Errorf("the child received %q\nwant %q", got, want.Bytes())
			}
			// The client gets what the child echoed plus one frame per refused line.
			rest := string(out)
			n := strings.Count(rest, refused)
			rest = strings.ReplaceAll(rest, refused, "")
			if n != tc.frames || rest != want.String() {
				t.Errorf("client got %q: %d refusal frames (want %d) and %q besides (want %q)", out, n, tc.frames, rest, want.String())
			}
			var recs []Record
			if _, err := os.Stat(audit); err == nil {
				recs = readRecords(t, audit)
			}
			if len(recs) != tc.frames {
				t.Fatalf("%d records, want %d: %+v", len(recs), tc.frames, recs)
			}
			for _, r := range recs {
				if r.Outcome != "refused" || r.Word != "POLICY_DENIED" || r.Rule != ruleUnparseable || r.Tool != "" || string(r.ID) != "null" {
					t.Errorf("record %+v", r)
				}
			}
		})
	}
}

// TestAuditOnlyRecordsUnframedLines: with --audit and no policy wrap
// enforces nothing and stays transparent, but a line it cannot frame is a
// possible piece of a tools/call, so it is recorded (allowed, rule
// "unparseable") before it is forwarded: no call reaches the child
// without a record.
func TestAuditOnlyRecordsUnframedLines(t *testing.T) {
	dir := t.TempDir()
	audit := filepath.Join(dir, "audit.jsonl")
	seen := filepath.Join(dir, "seen")
	in := "{\"x\":\r" + deniedCall + "\r}\n" +
		`{"jsonrpc":"2.0","id":2,"method":` + "\n" + `"tools/call"` + "\n" +
		`,"params":{"name":"shell_exec"}}` + "\n" +
		"\n" + `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"
	out, stderr, code := runAll(t, append([]string{"--audit", audit, "--"}, childArgv(t, "mirror", seen)...), []byte(in))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got, _ := os.ReadFile(seen); string(got) != in || string(out) != in {
		t.Errorf("audit-only is not transparent: child got %q, client got %q", got, out)
	}
	recs := readRecords(t, audit)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4 (one per unframed line): %+v", len(recs), recs)
	}
	for _, r := range recs {
		if r.Outcome != "allowed" || r.Rule != ruleUnparseable {
			t.Errorf("record %+v", r)
		}
	}
}

// TestGoSDKChildCannotReassembleACall: end to end with a real Go SDK
// server, whose stdio transport reads with a streaming JSON decoder. A
// denied call split over lines must not run.
func TestGoSDKChildCannotReassembleACall(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	pol := writeFile(t, "policy.yaml", testPolicy)
	l := startLive(t, append([]string{"--policy", pol, "--"}, childArgv(t, "mcpserver", ran)...))
	l.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n")
	l.recv()
	l.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	l.send(`{"jsonrpc":"2.0","id":2,"method":` + "\n" + `"tools/call"` + "\n" + `,"params":{"name":"shell_exec","arguments":{"text":"pwned"}}}` + "\n")
	l.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}` + "\n")
	// Read until the echo call is answered; any answer to id 2 is a bypass.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		line := l.recv()
		_ = json.Unmarshal([]byte(line), &msg)
		if string(msg.ID) == "2" {
			t.Errorf("the child answered the reassembled call: %s", line)
		}
		if string(msg.ID) == "3" {
			break
		}
	}
	l.wait()
	if b, _ := os.ReadFile(ran); string(b) != "echo\n" {
		t.Errorf("the child ran %q, want only echo", b)
	}
}

// TestBatchWithANonObjectElementIsRefused: JSON-RPC batches hold only
// objects. A tools/call hidden one array deeper ([[call]], [[],[call]]) or
// next to a scalar is not a request wrap can decide, yet a lenient child
// (one that splits on "\n" and skips to the first "{") runs it. Under a
// policy the whole line is refused (one frame, id null, rule "ambiguous");
// with --audit alone it is recorded before it is forwarded.
func TestBatchWithANonObjectElementIsRefused(t *testing.T) {
	pol := writeFile(t, "policy.yaml", testPolicy)
	for _, line := range []string{
		`[[` + deniedCall + `]]`,
		`[[],[` + deniedCall + `]]`,
		`[[[` + deniedCall + `]]]`,
		`[1,` + deniedCall + `]`,
		`[` + deniedCall + `,"x"]`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},[` + deniedCall + `]]`,
		`[null,{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}]`,
	} {
		for _, enforce := range []bool{true, false} {
			name := map[bool]string{true: "policy", false: "audit only"}[enforce] + " " + line
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				seen := filepath.Join(dir, "seen")
				audit := filepath.Join(dir, "audit.jsonl")
				args := []string{"--audit", audit}
				if enforce {
					args = append(args, "--policy", pol)
				}
				args = append(append(args, "--"), childArgv(t, "mirror", seen)...)
				out, stderr, code := runAll(t, args, []byte(line+"\n"))
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				got, _ := os.ReadFile(seen)
				wantChild, wantOut := line+"\n", line+"\n"
				wantRec := Record{Outcome: "allowed", Rule: ruleAmbiguous}
				if enforce {
					wantChild, wantOut = "", frame("null", "POLICY_DENIED", "", ruleAmbiguous)
					wantRec = Record{Outcome: "refused", Code: -32042, Word: "POLICY_DENIED", Rule: ruleAmbiguous}
				}
				if string(got) != wantChild || string(out) != wantOut {
					t.Errorf("child received %q (want %q), client got %q (want %q)", got, wantChild, out, wantOut)
				}
				recs := readRecords(t, audit)
				if len(recs) != 1 {
					t.Fatalf("%d records, want 1: %+v", len(recs), recs)
				}
				r := recs[0]
				if r.Outcome != wantRec.Outcome || r.Code != wantRec.Code || r.Word != wantRec.Word || r.Rule != wantRec.Rule ||
					r.Tool != "" || string(r.ID) != "null" || r.ParamsHash != lineHash(line+"\n") {
					t.Errorf("record %+v, want %+v with tool \"\", id null and the line's hash", r, wantRec)
				}
			})
		}
	}
}
