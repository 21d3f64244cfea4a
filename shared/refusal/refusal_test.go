package refusal

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocMatchesTable fails when docs/error-codes.md and Table disagree:
// each row's code in both numberings, and its word.
func TestDocMatchesTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/error-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (-3\d{4}) \| (-3\d{4}) \| ([A-Z_]+) \|`)
	doc := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		doc[m[1]+" "+m[2]+" "+m[3]] = true
	}
	code := map[string]bool{}
	for _, e := range Table {
		code[fmt.Sprintf("%d %d %s", e.Code, MCP20260728.Wire(e.Code), e.Word)] = true
	}
	for k := range code {
		if !doc[k] {
			t.Errorf("docs/error-codes.md lacks the row %q (seed code, 2026-07-28 code, word)", k)
		}
	}
	for k := range doc {
		if !code[k] {
			t.Errorf("docs/error-codes.md lists %q, which the table does not have", k)
		}
	}
	wrap := fmt.Sprintf("| %d | %d | wrap's frame |", CodeWrapRefused, MCP20260728.Wire(CodeWrapRefused))
	if !strings.Contains(string(b), wrap) || !strings.Contains(string(b), WrapMessage) {
		t.Errorf("docs/error-codes.md does not describe wrap's frame with the row %q", wrap)
	}
}

// TestNumberings: seed 004's numbering is the table's; MCP 2026-07-28's
// gives no code the specification reserves or retires to anything but
// the specification's own, keeps the standard codes, and keeps every
// refusal apart from every other (the seed's criterion: a client tells a
// refusal from anything else by its code).
func TestNumberings(t *testing.T) {
	codes := []Code{CodeWrapRefused}
	for _, e := range Table {
		codes = append(codes, e.Code)
	}
	standard := map[Code]bool{CodeParseError: true, CodeInvalidRequest: true, CodeMethodNotFound: true, CodeInvalidParams: true, CodeInternal: true}
	seen := map[Code]Code{}
	for _, c := range codes {
		if got := Seed.Wire(c); got != c {
			t.Errorf("seed numbering moves %d to %d", c, got)
		}
		m := MCP20260728.Wire(c)
		switch {
		case standard[c] && m != c:
			t.Errorf("2026-07-28 moves the standard code %d to %d", c, m)
		case m == -32042 || m == -32002:
			t.Errorf("2026-07-28 gets %d, which that version forbids", m)
		case m >= -32099 && m <= -32020 && !specDefined[m]:
			t.Errorf("2026-07-28 gets %d (from %d), reserved to the specification and not defined by it", m, c)
		case m >= -32019 && m <= -32000:
			t.Errorf("2026-07-28 gets %d (from %d), in the legacy sub-range", m, c)
		case !standard[c] && !specDefined[m] && m >= -32768 && m <= -32000:
			t.Errorf("2026-07-28 gets %d (from %d), inside JSON-RPC's reserved range", m, c)
		}
		if prev, ok := seen[m]; ok && prev != c {
			t.Errorf("2026-07-28 gives %d to both %d and %d", m, prev, c)
		}
		seen[m] = c
	}
	if MCP20260728.Wire(CodeApprovalRequired) != -33061 || MCP20260728.Wire(CodeWrapRefused) != -33042 || MCP20260728.Wire(CodeHeaderMismatch) != -32020 {
		t.Error("the documented examples do not hold")
	}
	o := Approval("echo", "s", "id", ApprovalPending).ObjectIn(LayerGateway, MCP20260728)
	if o.Code != -33061 || !strings.Contains(string(o.Data), `"code":"APPROVAL_REQUIRED"`) {
		t.Errorf("2026-07-28 object: %d %s", o.Code, o.Data)
	}
}

func TestWordsAreUnique(t *testing.T) {
	seen := map[Word]bool{}
	for _, e := range Table {
		if seen[e.Word] {
			t.Errorf("word %s twice", e.Word)
		}
		seen[e.Word] = true
	}
}

func TestSeedShapes(t *testing.T) {
	obj := func(r *Refusal, layer Layer) map[string]any {
		o := r.Object(layer)
		var d map[string]any
		if err := json.Unmarshal(o.Data, &d); err != nil {
			t.Fatal(err)
		}
		d["_code"], d["_message"] = float64(o.Code), o.Message
		return d
	}
	tm := obj(Timeout(10, "echo on mock-primary"), LayerGateway)
	if tm["_message"] != "Upstream error: upstream did not respond within 10s; the call may have executed, so confirm the outcome of echo on mock-primary before retrying, and retry only an idempotent tool, with the SAME Idempotency-Key (UPSTREAM_TIMEOUT)" ||
		tm["executed"] != "unknown" || tm["safe_to_retry"] != false || tm["guidance"] != TimeoutGuidance || tm["_code"] != -32064.0 {
		t.Fatalf("timeout: %v", tm)
	}
	ap := obj(Approval("echo", "mock-primary", "9b1d", ApprovalPending), LayerGateway)
	if ap["_message"] != "Approval required for echo on mock-primary; a person must approve approval 9b1d, then send the identical call again (APPROVAL_REQUIRED)" || ap["approval_id"] != "9b1d" || ap["status"] != "pending" {
		t.Fatalf("approval: %v", ap)
	}
	if _, ok := obj(Approval("t", "s", "", ApprovalUnavailable), LayerGateway)["approval_id"]; ok {
		t.Fatal("unavailable approval carries an id")
	}
	rl := obj(RateLimit("tool", 60, 41200), LayerGateway)
	if rl["_message"] != "Rate limit exceeded: 60 calls per minute per tool; retry in 42s (RATE_LIMITED)" {
		t.Fatalf("rate limit: %v", rl)
	}
	w := obj(Wrap(PolicyDenied, "shell_exec", "deny:shell_*", "change the policy"), LayerWrap)
	if w["_code"] != -32042.0 || w["_message"] != `aegis wrap refused this tools/call of "shell_exec" by rule deny:shell_*; change the policy (POLICY_DENIED)` ||
		w["aegis"].(map[string]any)["layer"] != "wrap" || w["aegis"].(map[string]any)["code"] != "POLICY_DENIED" || w["tool"] != "shell_exec" || w["rule"] != "deny:shell_*" {
		t.Fatalf("wrap: %v", w)
	}
	long := Upstream(strings.Repeat("é", 500))
	if got := len([]rune(strings.TrimPrefix(long.Message, "Upstream error: "))); got != MaxUpstreamDetail {
		t.Fatalf("detail %d runes, want %d", got, MaxUpstreamDetail)
	}
}

func TestErrorFrames(t *testing.T) {
	f := Frame(json.RawMessage(`"x"`), Quota("free", 1000, 1000, "202611"), LayerGateway, Seed)
	var m struct {
		ID    string `json:"id"`
		Error struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(f, &m); err != nil {
		t.Fatal(err)
	}
	d := m.Error.Data
	if m.ID != "x" || m.Error.Code != -32060 || d["tier"] != "free" || d["period"] != "202611" || d["used"] != 1000.0 || d["limit"] != 1000.0 {
		t.Fatalf("frame %s", f)
	}
	if len(d) != 5 { // tier, limit, used, period + aegis
		t.Fatalf("quota data has extra members: %s", f)
	}
}

func TestSchemaShape(t *testing.T) {
	o := Schema("/items/0/qty", "minimum").Object(LayerGateway)
	var d map[string]any
	if err := json.Unmarshal(o.Data, &d); err != nil {
		t.Fatal(err)
	}
	if o.Code != -32602 || d["pointer"] != "/items/0/qty" || d["keyword"] != "minimum" || len(d) != 3 ||
		d["aegis"].(map[string]any)["code"] != "INVALID_PARAMS" {
		t.Fatalf("schema refusal: %d %s %s", o.Code, o.Message, o.Data)
	}
	if want := `Invalid params: arguments fail the tool's inputSchema: "minimum" at "/items/0/qty" (INVALID_PARAMS)`; o.Message != want {
		t.Fatalf("message %q, want %q", o.Message, want)
	}
	if root := Schema("", "required"); root.Message != `Invalid params: arguments fail the tool's inputSchema: "required" at the arguments object` {
		t.Fatalf("root message %q", root.Message)
	}
}

// TestDocListsNextSteps: docs/error-codes.md lists each word's next step
// exactly as the table has it.
func TestDocListsNextSteps(t *testing.T) {
	b, err := os.ReadFile("../../docs/error-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range Table {
		if row := fmt.Sprintf("| %s | %s |", e.Word, e.Next); e.Next != "" && !strings.Contains(string(b), row) {
			t.Errorf("docs/error-codes.md lacks the row %q", row)
		}
	}
	if got := New(ToolStopped, "Tool fail on crm is stopped by an operator").WireMessage(); got != "Tool fail on crm is stopped by an operator; ask an operator to resume it, as sending the call again will not help until then (TOOL_STOPPED)" {
		t.Errorf("wire message %q", got)
	}
}
