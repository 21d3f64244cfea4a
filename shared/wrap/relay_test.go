package wrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// stream is what a client might send that a policy lets through: a line
// over 1 MiB, CRLF, blank lines, spaces around an object, partial writes
// (runAll's reader hands wrap what it asks for, not whole lines).
func stream() []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":"s-2","method":"tools/list"}` + "\r\n")
	b.WriteString(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\"b\u00e9\n"}}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"blob":"`)
	b.WriteString(strings.Repeat("x", 1<<20+12345))
	b.WriteString(`"}}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":5,"method":"resources/list","params":{"blob":"` + strings.Repeat("y", 1<<20+7) + `"}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","id":6,"method":"ping"}` + "\n\n\n")
	b.WriteString(`   {"jsonrpc":"2.0","id":7,"method":"x/unknown","params":{"é":"ü"}}   ` + "\n")
	return b.Bytes()
}

// malformed is what no client should send: invalid JSON, non-UTF-8 bytes
// and a last line without a newline that is not a whole message. Under a
// policy each line is refused (TestStrictFramingUnderPolicy); without one
// it is relayed like the rest.
func malformed() []byte {
	return []byte("{not json at all\n" +
		"\xff\xfe\x00\x01 binary \xc3\x28 garbage\n" +
		`{"jsonrpc":"2.0","id":8,"method":"ping","par`) // last line, no newline
}

// defaultOnly is traffic a policy would refuse (unparseable tools/call
// look-alikes, a denied tool); the default mode relays it like the rest.
func defaultOnly() []byte {
	return []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"shell_exec"}}` + "\n" +
		`{"method":"tools\/call", "broken` + "\n" +
		"\xff tools/call \xfe\n" +
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"ech` + "\n")
}

func TestTransparentByteForByte(t *testing.T) {
	full := append(append(defaultOnly(), stream()...), malformed()...)
	allowEcho := writeFile(t, "p.yaml", "allow: [echo]\ndeny: [shell_*]\n")
	cases := []struct {
		name  string
		flags []string
		input []byte
	}{
		{"default", nil, full},
		{"audit only", []string{"--audit", "AUDIT"}, full},
		{"policy and audit, nothing refused", []string{"--policy", allowEcho, "--audit", "AUDIT"}, stream()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			seen := filepath.Join(dir, "seen")
			var args []string
			for _, f := range tc.flags {
				args = append(args, strings.ReplaceAll(f, "AUDIT", filepath.Join(dir, "audit.jsonl")))
			}
			args = append(append(args, "--"), childArgv(t, "mirror", seen)...)
			out, stderr, code := runAll(t, args, tc.input)
			if code != 0 {
				t.Fatalf("exit %d, stderr %s", code, stderr)
			}
			got, err := os.ReadFile(seen)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.input) {
				t.Errorf("child received %d bytes that differ from the %d sent (first difference at %d)", len(got), len(tc.input), firstDiff(got, tc.input))
			}
			if !bytes.Equal(out, tc.input) {
				t.Errorf("client received %d bytes that differ from the %d the child wrote (first difference at %d)", len(out), len(tc.input), firstDiff(out, tc.input))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// In the default mode a partial line reaches the child at once: wrap does
// not wait for the newline.
func TestDefaultRelaysPartialLineAtOnce(t *testing.T) {
	l := startLive(t, append([]string{"--"}, childArgv(t, "mirror", "")...))
	l.send(`{"jsonrpc":"2.0","id":1,"meth`)
	buf := make([]byte, 64)
	n, err := l.out.Read(buf)
	if err != nil || string(buf[:n]) != `{"jsonrpc":"2.0","id":1,"meth` {
		t.Fatalf("got %q, %v", buf[:n], err)
	}
	if code := l.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

const testPolicy = `# test policy
deny:
  - shell_*
  - "fs_delete"
approval:
  - pay_*
`

// frame is wrap's frame, byte for byte, refusing the call id of tool ("":
// not read) by rule with word, to a client of seed 004's numbering.
func frame(id, word, tool, rule string) string {
	of, data := "", `"rule":"`+rule+`"`
	if tool != "" {
		of = ` of \"` + tool + `\"`
		data += `,"tool":"` + tool + `"`
	}
	msg := "aegis wrap refused this tools/call" + of + " by rule " + rule + "; " + nextStep(Decision{Word: refusal.Word(word), Rule: rule}) + " (" + word + ")"
	return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32042,"message":"` + msg + `","data":{"aegis":{"layer":"wrap","code":"` + word + `"},` + data + `}}}` + "\n"
}

// isFrame checks that got is wrap's frame (seed numbering) refusing the
// call id of tool ("": not read) by rule with word, message included,
// whatever the JSON escaping of the tool's name.
func isFrame(got, id, word, tool, rule string) error {
	var f struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Aegis struct{ Layer, Code string }
				Rule  string
				Tool  *string
			}
		}
	}
	if err := json.Unmarshal([]byte(got), &f); err != nil {
		return err
	}
	e := f.Error
	wantMsg := "aegis wrap refused this tools/call"
	if tool != "" {
		wantMsg += " of " + strconv.Quote(tool)
	}
	wantMsg += " by rule " + rule + "; " + nextStep(Decision{Word: refusal.Word(word), Rule: rule}) + " (" + word + ")"
	switch {
	case string(f.ID) != id || e.Code != -32042 || e.Data.Aegis.Layer != "wrap" || e.Data.Aegis.Code != word || e.Data.Rule != rule:
		return fmt.Errorf("want id %s, -32042, wrap %s rule %s", id, word, rule)
	case (tool == "") != (e.Data.Tool == nil) || tool != "" && *e.Data.Tool != tool:
		return fmt.Errorf("data.tool %v, want %q", e.Data.Tool, tool)
	case e.Message != wantMsg:
		return fmt.Errorf("message %q, want %q", e.Message, wantMsg)
	}
	return nil
}

func TestRefusalFrames(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	pol := writeFile(t, "policy.yaml", testPolicy)
	l := startLive(t, append([]string{"--policy", pol, "--audit", filepath.Join(dir, "a.jsonl"), "--"}, childArgv(t, "mirror", seen)...))

	var forwarded bytes.Buffer
	cases := []struct {
		name, req, want string // want "" means relayed verbatim
	}{
		{"denied, number id", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell_exec","arguments":{"cmd":"rm -rf /"}}}`, frame("1", "POLICY_DENIED", "shell_exec", "deny:shell_*")},
		{"denied, exact literal", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs_delete"}}`, frame("2", "POLICY_DENIED", "fs_delete", "deny:fs_delete")},
		{"approval required", `{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"pay_invoice"}}`, frame(`"abc"`, "PENDING_APPROVAL", "pay_invoice", "approval:pay_*")},
		{"large integer id kept exact", `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/call","params":{"name":"shell_x"}}`, frame("123456789012345678901234567890", "POLICY_DENIED", "shell_x", "deny:shell_*")},
		{"id null", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"shell_x"}}`, frame("null", "POLICY_DENIED", "shell_x", "deny:shell_*")},
		{"no id (notification)", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"shell_x"}}`, frame("null", "POLICY_DENIED", "shell_x", "deny:shell_*")},
		{"object id is not usable", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"shell_x"}}`, frame("null", "POLICY_DENIED", "shell_x", "deny:shell_*")},
		{"escaped name", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shell\u005fexec"}}`, frame("3", "POLICY_DENIED", "shell_exec", "deny:shell_*")},
		{"escaped method", `{"jsonrpc":"2.0","id":4,"method":"tools\/call","params":{"name":"shell_exec"}}`, frame("4", "POLICY_DENIED", "shell_exec", "deny:shell_*")},
		{"duplicate name (parser differential)", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","name":"shell_exec"}}`, frame("5", "POLICY_DENIED", "", "ambiguous")},
		{"case-folded key", `{"jsonrpc":"2.0","id":6,"Method":"tools/call","params":{"name":"echo"}}`, frame("6", "POLICY_DENIED", "", "ambiguous")},
		{"no tool name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}`, frame("7", "POLICY_DENIED", "", "ambiguous")},
		{"unparseable look-alike", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"shell_exec","arguments":{"n":NaN}}}`, frame("null", "POLICY_DENIED", "", "unparseable")},
		{"allowed call relayed verbatim", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"k":1}}}`, ""},
		{"tools/call text in another method", `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{"uri":"file:///tools/call"}}`, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":11,"method":"shell_exec/run","params":{"name":"shell_exec"}}`, ""},
		{"initialize", `{"jsonrpc":"2.0","id":12,"method":"initialize","params":{}}`, ""},
		{"tools/list", `{"jsonrpc":"2.0","id":13,"method":"tools/list"}`, ""},
		{"ping", `{"jsonrpc":"2.0","id":14,"method":"ping"}`, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, ""},
		{"a response to the server", `{"jsonrpc":"2.0","id":0,"result":{"tools/call":true}}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l.send(tc.req + "\n")
			want := tc.want
			if want == "" {
				want = tc.req + "\n" // the mirror child echoes what it received
				forwarded.WriteString(want)
			}
			if got := l.recv(); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
	if code := l.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got, _ := os.ReadFile(seen)
	if !bytes.Equal(got, forwarded.Bytes()) {
		t.Errorf("the child received:\n%s\nwant exactly the relayed lines:\n%s", got, forwarded.Bytes())
	}
}

func TestBatchDropsOnlyRefusedCalls(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	pol := writeFile(t, "policy.yaml", testPolicy)
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell_exec"}}, {"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}]` + "\r\n"
	out, stderr, code := runAll(t, append([]string{"--policy", pol, "--"}, childArgv(t, "mirror", seen)...), []byte(batch))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	wantChild := `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}]` + "\r\n"
	got, _ := os.ReadFile(seen)
	if string(got) != wantChild {
		t.Errorf("child got %s, want %s", got, wantChild)
	}
	lines := strings.SplitAfter(string(out), "\n")
	if len(lines) != 3 || lines[2] != "" || !contains(lines, frame("1", "POLICY_DENIED", "shell_exec", "deny:shell_*")) || !contains(lines, wantChild) {
		t.Errorf("client got %q", out)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// A refusal frame never splits a line the child is in the middle of, and
// is never glued onto a fragment the child left when its stream ended
// (issue 35, item 5): the fragment is ended first, and a frame decided
// after the end is written at once, on its own line.
func TestFrameWaitsForChildLineBoundary(t *testing.T) {
	var b bytes.Buffer
	o := &clientOut{w: &b}
	o.child([]byte(`{"jsonrpc":"2.0","id":1,"res`))
	o.frame([]byte("FRAME\n"))
	o.child([]byte(`ult":{}}` + "\n" + `{"partial`))
	o.frame([]byte("FRAME2\n"))
	o.childDone()
	o.frame([]byte("FRAME3\n"))
	want := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\nFRAME\n" + `{"partial` + "\nFRAME2\nFRAME3\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}

func TestExitStatusAndStderr(t *testing.T) {
	for _, n := range []int{0, 3, 42} {
		var out, errb syncbuf.Buffer
		code := Run(append([]string{"--"}, childArgv(t, "exit", fmt.Sprint(n))...), strings.NewReader(""), &out, &errb)
		if code != n {
			t.Errorf("exit %d, want %d", code, n)
		}
		if errb.String() != "child stderr line\n" {
			t.Errorf("stderr %q", errb.String())
		}
	}
	var errb syncbuf.Buffer
	if code := Run([]string{"--", filepath.Join(t.TempDir(), "no-such-command")}, strings.NewReader(""), &syncbuf.Buffer{}, &errb); code != ExitNotFound {
		t.Errorf("missing command: exit %d, want %d (%s)", code, ExitNotFound, errb.String())
	}
	if code := Run(nil, strings.NewReader(""), &syncbuf.Buffer{}, &errb); code != ExitUsage {
		t.Errorf("no command: exit %d", code)
	}
}

// readRecords decodes the audit file at path, one record a line, and
// checks each with Validate: every record a test reads is validated.
func readRecords(t *testing.T, path string) []Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if line[len(line)-1] != '\n' {
			t.Fatalf("torn record %q", line)
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("record %q: %v", line, err)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("record %s: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// TestFrameNumberingFollowsTheCall: a call that carries MCP 2026-07-28 in
// its _meta (as every request of that version does) is refused with
// -33042, which that version allows; a call without, -32042 (seed 000).
func TestFrameNumberingFollowsTheCall(t *testing.T) {
	for _, tc := range []struct {
		meta string
		code int
	}{
		{``, -32042},
		{`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}`, -32042},
		{`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`, -33042},
	} {
		line := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell_exec","arguments":{}` + tc.meta + `}}`
		_, client, _ := decideOne(t, testPolicy, line)
		var f struct{ Error struct{ Code int } }
		if err := json.Unmarshal([]byte(client), &f); err != nil || f.Error.Code != tc.code {
			t.Errorf("_meta %q: frame %q, want code %d", tc.meta, client, tc.code)
		}
	}
}
