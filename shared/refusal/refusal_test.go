package refusal

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocMatchesTable fails when docs/error-codes.md and Table disagree.
func TestDocMatchesTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/error-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (-3\d{4}) \| ([A-Z_]+) \|`)
	doc := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		doc[m[1]+" "+m[2]] = true
	}
	code := map[string]bool{}
	for _, e := range Table {
		code[fmt.Sprintf("%d %s", e.Code, e.Word)] = true
	}
	for k := range code {
		if !doc[k] {
			t.Errorf("docs/error-codes.md lacks the row %q", k)
		}
	}
	for k := range doc {
		if !code[k] {
			t.Errorf("docs/error-codes.md lists %q, which the table does not have", k)
		}
	}
	if !strings.Contains(string(b), "-32042") || !strings.Contains(string(b), WrapMessage) {
		t.Error("docs/error-codes.md does not describe wrap's -32042 frame")
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
	tm := obj(Timeout(10), LayerGateway)
	if tm["_message"] != "Upstream error: upstream did not respond within 10s; the call may have executed" ||
		tm["executed"] != "unknown" || tm["safe_to_retry"] != false || tm["guidance"] != TimeoutGuidance || tm["_code"] != -32064.0 {
		t.Fatalf("timeout: %v", tm)
	}
	ap := obj(Approval("echo", "mock-primary", "9b1d", ApprovalPending), LayerGateway)
	if ap["_message"] != "Approval required for echo on mock-primary" || ap["approval_id"] != "9b1d" || ap["status"] != "pending" {
		t.Fatalf("approval: %v", ap)
	}
	if _, ok := obj(Approval("t", "s", "", ApprovalUnavailable), LayerGateway)["approval_id"]; ok {
		t.Fatal("unavailable approval carries an id")
	}
	w := obj(Wrap(PolicyDenied), LayerWrap)
	if w["_code"] != -32042.0 || w["_message"] != "aegis wrap refused this tools/call" ||
		w["aegis"].(map[string]any)["layer"] != "wrap" || w["aegis"].(map[string]any)["code"] != "POLICY_DENIED" {
		t.Fatalf("wrap: %v", w)
	}
	long := Upstream(strings.Repeat("é", 500))
	if got := len([]rune(strings.TrimPrefix(long.Message, "Upstream error: "))); got != MaxUpstreamDetail {
		t.Fatalf("detail %d runes, want %d", got, MaxUpstreamDetail)
	}
}

func TestErrorFrames(t *testing.T) {
	f := Frame(json.RawMessage(`"x"`), Quota("free", 1000, 1000, "202611"), LayerGateway)
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
	if want := `Invalid params: arguments fail the tool's inputSchema: "minimum" at "/items/0/qty"`; o.Message != want {
		t.Fatalf("message %q, want %q", o.Message, want)
	}
	if root := Schema("", "required"); root.Message != `Invalid params: arguments fail the tool's inputSchema: "required" at the arguments object` {
		t.Fatalf("root message %q", root.Message)
	}
}
