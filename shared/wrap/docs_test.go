package wrap

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/refusal"
)

// TestDocsNameWrapsRefusalWords: the data.aegis.code bullet of
// docs/wrap.md lists exactly the words wrap can put in its frame, each
// from the shared table, and does not pass off PENDING_APPROVAL as the
// gateway's word: the gateway holds such a call and answers
// APPROVAL_REQUIRED, wrap refuses it (seed ADR), so the page names both.
func TestDocsNameWrapsRefusalWords(t *testing.T) {
	b, err := os.ReadFile("../../docs/wrap.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "- `data.aegis.code`")
	if i < 0 {
		t.Fatal("docs/wrap.md has no data.aegis.code bullet")
	}
	bullet := doc[i:]
	if j := strings.Index(bullet[1:], "\n- "); j >= 0 {
		bullet = bullet[:j+1]
	}
	var listed []refusal.Word
	for _, m := range regexp.MustCompile("`([A-Z_]+)`").FindAllStringSubmatch(bullet, -1) {
		listed = append(listed, refusal.Word(m[1]))
	}
	wrapWords := []refusal.Word{refusal.PolicyDenied, refusal.PendingApproval, refusal.InternalError, refusal.ToolPoisoning}
	for _, w := range wrapWords {
		if !slices.Contains(listed, w) {
			t.Errorf("the bullet does not list %s, which wrap can send", w)
		}
	}
	inTable := map[refusal.Word]bool{}
	for _, e := range refusal.Table {
		inTable[e.Word] = true
	}
	for _, w := range listed {
		if !inTable[w] {
			t.Errorf("the bullet names %s, which is not in the refusal table", w)
		}
	}
	if !slices.Contains(listed, refusal.ApprovalRequired) {
		t.Errorf("the bullet must say that the gateway's word for an approval is %s, not %s:\n%s", refusal.ApprovalRequired, refusal.PendingApproval, bullet)
	}
}
