package gateway

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/pipeline"
)

// TestStageTableMatchesDocs: the stage table, pipeline.Order and
// docs/pipeline.md's table name the same slots in the same order, with the
// same scope, failure mode and built-or-not.
func TestStageTableMatchesDocs(t *testing.T) {
	want := append(pipeline.Order[:], pipeline.ResultOrder[:]...)
	if len(stages) != len(want) {
		t.Fatalf("%d rows in the stage table, %d slots", len(stages), len(want))
	}
	for i, row := range stages {
		if row.slot != want[i] {
			t.Errorf("row %d is %v, want %v", i, row.slot, want[i])
		}
	}
	b, err := os.ReadFile("../../docs/pipeline.md")
	if err != nil {
		t.Fatal(err)
	}
	rowRE := regexp.MustCompile("^\\| [0-9]+ \\| `([a-z]+)` \\| ([^|]+) \\| ([^|]+) \\| [^|]* \\| \\*\\*(open|closed)\\*\\*([^|]*)\\|$")
	var docs []string
	for _, line := range strings.Split(string(b), "\n") {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		docs = append(docs, m[1])
		row, ok := rowFor(m[1])
		if !ok {
			t.Errorf("docs/pipeline.md lists slot %q, which the stage table lacks", m[1])
			continue
		}
		if got := strings.TrimSpace(m[3]); got != scopeWord(row.scope) {
			t.Errorf("%s applies to %q in the docs, %q in the table", m[1], got, scopeWord(row.scope))
		}
		if m[4] != row.mode.String() {
			t.Errorf("%s fails %s in the docs, %s in the table", m[1], m[4], row.mode)
		}
		if docFree := strings.Contains(m[5], "store-free: decided first"); docFree != row.storeFree {
			t.Errorf("%s: store-free (decided first) in the docs %v, in the table %v", m[1], docFree, row.storeFree)
		}
		if docSees := strings.Contains(m[5], "foreseen: decided first"); docSees != row.foresees {
			t.Errorf("%s: foreseen (decided first) in the docs %v, in the table %v", m[1], docSees, row.foresees)
		}
		built := row.check != nil || row.result != nil || row.message != nil
		if docBuilt := strings.TrimSpace(m[2]) != "not built yet"; docBuilt != built {
			t.Errorf("%s: built in the docs %v, in the table %v", m[1], docBuilt, built)
		}
	}
	var names []string
	for _, s := range want {
		names = append(names, s.String())
	}
	if strings.Join(docs, ",") != strings.Join(names, ",") {
		t.Fatalf("docs/pipeline.md lists %v, the order is %v", docs, names)
	}
}

func rowFor(name string) (stage, bool) {
	for _, r := range stages {
		if r.slot.String() == name {
			return r, true
		}
	}
	return stage{}, false
}
