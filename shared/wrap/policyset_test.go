package wrap

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/policy"
	"github.com/aegis-gw/aegis/shared/refusal"
)

func toolCall(id int, tool, extra string) string {
	return `{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}` + extra + `}}`
}

// TestPolicySetThroughTheGate: a --policy file in the gateway's format is
// decided by shared/policy, and each refusal is wrap's -32042 frame with
// the gateway's word.
func TestPolicySetThroughTheGate(t *testing.T) {
	type step struct {
		tool, extra string
		word        refusal.Word // "" relayed
		rule        string
	}
	for _, tc := range []struct {
		name, src string
		roles     []string
		steps     []step
	}{
		{"cedar permit echo", "cedar_policies: |\n  @id(\"echo\")\n  permit (principal, action, resource == Tool::\"local/echo\");\n", nil, []step{
			{"echo", "", "", "cedar:echo"}, {"transfer", "", refusal.PolicyDenied, policy.RuleNoPermit},
		}},
		{"roles", `roles: {ops: {allow: ["local/*"], approve: ["local/transfer"], deny: ["local/rm"]}}`, []string{"ops"}, []step{
			{"echo", "", "", "role:ops allow local/*"}, {"transfer", "", refusal.PendingApproval, "role:ops approve local/transfer"},
			{"rm", "", refusal.PolicyDenied, "role:ops deny local/rm"},
		}},
		{"no role", `roles: {ops: {allow: ["local/*"]}}`, nil, []step{
			{"echo", "", refusal.PolicyDenied, policy.RuleNoRole},
		}},
		{"manifest tool_calls", "manifest: {max_tool_calls: 1}", nil, []step{
			{"echo", "", "", ""}, {"echo", "", refusal.CapabilityDenied, "manifest:tool_calls"},
		}},
		{"manifest steps", "manifest: {max_steps: 1}", nil, []step{
			{"echo", `,"_meta":{"aegis/step":0}`, "", ""}, {"echo", `,"_meta":{"aegis/step":1}`, refusal.CapabilityDenied, "manifest:steps"},
			{"echo", `,"_meta":{"aegis/step":-1}`, refusal.InvalidParams, "step:invalid"},
		}},
		{"manifest grant", `manifest: {grants: {tools/call: ["local/echo"]}}`, nil, []step{
			{"echo", "", "", ""}, {"transfer", "", refusal.CapabilityDenied, "manifest:grant"},
		}},
		// Issue 35, item 3: a spelling of a name is put to the decider
		// folded too, as deny globs match it; an allow still matches only
		// the name as sent.
		{"cedar forbid folds names", "cedar_policies: |\n  @id(\"all\")\n  permit (principal, action, resource);\n  @id(\"nowrite\")\n  forbid (principal, action, resource == Tool::\"local/write_file\");\n", nil, []step{
			{"write_file", "", refusal.PolicyDenied, "cedar:nowrite"}, {"WRITE_FILE", "", refusal.PolicyDenied, "cedar:nowrite"},
			{"ｗｒｉｔｅ_file", "", refusal.PolicyDenied, "cedar:nowrite"}, {"Write_File", "", refusal.PolicyDenied, "cedar:nowrite"},
			{"wr\u0131te_file", "", refusal.PolicyDenied, "cedar:nowrite"}, {"echo", "", "", "cedar:all"},
		}},
		{"role approval folds names", `roles: {ops: {allow: ["local/*"], approve: ["local/write_file"]}}`, []string{"ops"}, []step{
			{"WRITE_FILE", "", refusal.PendingApproval, "role:ops approve local/write_file"},
			{"ｗｒｉｔｅ_ｆｉｌｅ", "", refusal.PendingApproval, "role:ops approve local/write_file"},
			{"echo", "", "", "role:ops allow local/*"},
		}},
		{"role allow matches the name as sent", `roles: {ops: {allow: ["local/read_*"]}}`, []string{"ops"}, []step{
			{"read_file", "", "", "role:ops allow local/read_*"}, {"READ_FILE", "", refusal.PolicyDenied, policy.RuleNoRole},
		}},
		{"audit mode", "policy_mode: audit\ncedar_policies: |\n  forbid (principal, action, resource);\n", nil, []step{
			{"echo", "", "", "audit:cedar:policy0"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			set, _ := policy.ParseSet([]byte(tc.src))
			if h, _ := policy.Hash(set); p.Hash() != h {
				t.Errorf("Hash %s, want policy.Hash %s (one function at both boundaries)", p.Hash(), h)
			}
			if tc.roles != nil {
				if err := p.SetRoles(tc.roles); err != nil {
					t.Fatal(err)
				}
			}
			var lines []string
			for i, s := range tc.steps {
				lines = append(lines, toolCall(i+1, s.tool, s.extra))
			}
			var cb, ob bytes.Buffer
			g := &gate{policy: p, enforce: true, child: &cb, out: &clientOut{w: &ob}}
			if err := g.run(strings.NewReader(strings.Join(lines, "\n") + "\n")); err != nil {
				t.Fatal(err)
			}
			frames := strings.Split(strings.TrimSpace(ob.String()), "\n")
			fi := 0
			for i, s := range tc.steps {
				r := g.recs[i]
				if r.Rule != s.rule || r.Word != string(s.word) {
					t.Errorf("step %d (%s): record rule %q word %q, want %q %q", i, s.tool, r.Rule, r.Word, s.rule, s.word)
				}
				forwarded := strings.Contains(cb.String(), lines[i])
				if forwarded != (s.word == "") {
					t.Errorf("step %d (%s): forwarded %v, want %v", i, s.tool, forwarded, s.word == "")
				}
				if s.word == "" {
					continue
				}
				var f struct {
					Error struct {
						Code int `json:"code"`
						Data struct {
							Aegis struct{ Layer, Code string } `json:"aegis"`
							Rule  string                       `json:"rule"`
						} `json:"data"`
					} `json:"error"`
				}
				if fi >= len(frames) || json.Unmarshal([]byte(frames[fi]), &f) != nil || f.Error.Code != int(refusal.CodeWrapRefused) ||
					f.Error.Data.Aegis.Code != string(s.word) || f.Error.Data.Aegis.Layer != "wrap" {
					t.Errorf("step %d: frame %q, want -32042 %s from wrap", i, frames[min(fi, len(frames)-1)], s.word)
				}
				if fi < len(frames) && f.Error.Data.Rule != s.rule {
					t.Errorf("step %d: the frame's data.rule is %q, want %q (a person acts on it)", i, f.Error.Data.Rule, s.rule)
				}
				fi++
			}
		})
	}
}

func TestPolicySetParse(t *testing.T) {
	for _, tc := range []struct {
		name, src, err string
	}{
		{"mixed formats", "deny: [x]\nroles: {}\n", "either"},
		{"cedar error names line and column", "cedar_policies: |\n  permit (principal action, resource);\n", "cedar_policies:1:"},
		{"unknown set field", "roles: {}\nmanifesto: {}\n", "either"},
		{"a grant wrap cannot enforce", "manifest: {grants: {tools/call: [\"local/*\"], resources/read: [\"local/*\"]}}\n", "wrap decides tools/call only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicy([]byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("ParsePolicy err = %v, want one containing %q", err, tc.err)
			}
		})
	}
	g, err := ParsePolicy([]byte("deny: [x]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SetRoles([]string{"ops"}); err == nil {
		t.Error("SetRoles on a glob policy: no error")
	}
}

// TestPolicySetClocks: the manifest's clocks at wrap run from wrap's
// start (the run is the session): max_lifetime_secs refuses every call
// once the run is that old, and max_idle_secs once that long passed since
// the last call the policy allowed (a refused call does not touch it).
func TestPolicySetClocks(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, src string
		steps     []struct {
			after time.Duration
			tool  string
			rule  string
		}
	}{
		{"lifetime", "manifest: {max_lifetime_secs: 60}", []struct {
			after time.Duration
			tool  string
			rule  string
		}{{59 * time.Second, "echo", ""}, {time.Second, "echo", "manifest:lifetime"}}},
		{"idle", `manifest: {max_idle_secs: 30, grants: {tools/call: ["local/echo"]}}`, []struct {
			after time.Duration
			tool  string
			rule  string
		}{
			{20 * time.Second, "echo", ""}, {29 * time.Second, "echo", ""},
			{20 * time.Second, "transfer", "manifest:grant"}, // refused: the idle clock is not touched
			{10 * time.Second, "echo", "manifest:idle"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := at
			p, err := ParsePolicy([]byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			p.set.now = func() time.Time { return now }
			p.set.session.Started = now
			for i, s := range tc.steps {
				now = now.Add(s.after)
				d := p.set.decide(s.tool, []byte(`{"name":"`+s.tool+`","arguments":{}}`))
				if d.Rule != s.rule || d.Refused != (s.rule != "") || (d.Refused && d.Word != refusal.CapabilityDenied) {
					t.Fatalf("step %d (%s after %v): %+v; want rule %q", i, s.tool, s.after, d, s.rule)
				}
			}
		})
	}
}
