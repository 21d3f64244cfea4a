package gateway

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/pipeline"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/pipeline.md's message table from pipeline.Messages")

// scopeNames are the words of each scope bit in docs/pipeline.md.
var scopeNames = []struct {
	s    pipeline.Scope
	word string
}{
	{pipeline.Opening, "initialize"},
	{pipeline.InSession, "requests the gateway answers"},
	{pipeline.ToolCall, "tools/call"},
	{pipeline.Read, "resources/read, prompts/get, completion/complete"},
	{pipeline.Subscription, "resources/subscribe, resources/unsubscribe"},
	{pipeline.Control, "logging/setLevel"},
	{pipeline.Relayed, "server requests"},
	{pipeline.Answered, "client responses"},
}

// scopeWord is s as docs/pipeline.md's "applies to" column writes it.
func scopeWord(s pipeline.Scope) string {
	switch s {
	case pipeline.Every:
		return "every message"
	case pipeline.ServerBound:
		return "every server-bound message"
	}
	var out []string
	for _, n := range scopeNames {
		if s&n.s != 0 {
			out = append(out, n.word)
		}
	}
	return strings.Join(out, ", ")
}

// messageTable renders pipeline.Messages with the stages each row runs,
// from the stage table.
func messageTable() string {
	var b strings.Builder
	b.WriteString("| kind | method | scope | stages | carried | egress scan | ingress place |\n|---|---|---|---|---|---|---|\n")
	for _, m := range pipeline.Messages {
		method := "(any id)"
		if m.Method != "" {
			method = "`" + m.Method + "`"
		}
		var run []string
		for _, st := range stages {
			if m.Scope != 0 && st.scope&m.Scope != 0 && !st.slot.Response() {
				run = append(run, st.slot.String())
			}
		}
		if m.Ingress.Valid() {
			run = append(run, m.Ingress.String())
		}
		if len(run) == 0 {
			run = []string{"none"}
		}
		scope := "none"
		if m.Scope != 0 {
			scope = scopeWord(m.Scope)
		}
		egress := "none"
		if len(m.Egress) > 0 {
			egress = "`" + strings.Join(m.Egress, "`, `") + "`"
		}
		ingress := "none"
		if m.Ingress.Valid() {
			ingress = "`" + m.Ingress.String() + "`"
		}
		b.WriteString("| " + m.Kind.String() + " | " + method + " | " + scope + " | " + strings.Join(run, ", ") + " | " + m.Carry.String() + " | " + egress + " | " + ingress + " |\n")
	}
	return b.String()
}

// TestMessageTableMatchesDocs: docs/pipeline.md's message table is
// pipeline.Messages with the stages of each row's scope, row for row
// (go test -run TestMessageTableMatchesDocs -update-docs rewrites it).
func TestMessageTableMatchesDocs(t *testing.T) {
	const path = "../../docs/pipeline.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- messages begin -->\n", "<!-- messages end -->"
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/pipeline.md has no %q ... %q block", begin, end)
	}
	want := messageTable()
	if got := doc[i+len(begin) : j]; got != want {
		if *updateDocs {
			if err := os.WriteFile(path, []byte(doc[:i+len(begin)]+want+doc[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("docs/pipeline.md's message table differs from pipeline.Messages; run with -update-docs. Want:\n%s", want)
	}
}

// TestMessageTable: one row per kind and method; a server-bound row runs
// the kill switch and the policy; a server-to-client row names its
// ingress place and a client-to-server row none; nothing is carried to a
// server without a scope.
func TestMessageTable(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range pipeline.Messages {
		k := m.Kind.String() + " " + m.Method
		if seen[k] {
			t.Errorf("two rows for %s", k)
		}
		seen[k] = true
		switch m.Carry {
		case pipeline.Forward, pipeline.Broadcast, pipeline.Return:
			if !m.Kind.ToServer() || m.Scope&pipeline.ServerBound == 0 || m.Scope&^pipeline.ServerBound != 0 {
				t.Errorf("%s is carried to a server outside the server-bound scopes (%v)", k, m.Scope)
			}
		}
		if m.Kind.ToServer() && m.Ingress.Valid() {
			t.Errorf("%s: a client-to-server row with an ingress place", k)
		}
		if !m.Kind.ToServer() && m.Carry != pipeline.Consume && !m.Ingress.Valid() {
			t.Errorf("%s: carried to the client with no ingress place", k)
		}
		if !m.Kind.ToServer() && len(m.Egress) > 0 {
			t.Errorf("%s: a server-to-client row with an egress scan", k)
		}
	}
	for _, st := range stages {
		switch st.slot {
		case pipeline.KillSwitch, pipeline.Policy, pipeline.Content:
			if st.scope&pipeline.ServerBound != pipeline.ServerBound {
				t.Errorf("%v does not run on every server-bound message", st.slot)
			}
		}
	}
	if _, ok := pipeline.Lookup(pipeline.ClientRequest, "tools/delete"); ok {
		t.Fatal("a method without a row was found")
	}
}
