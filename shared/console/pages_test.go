package console_test

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/console"
)

// TestPagesAreOneList: the script's list of pages (PAGES in console.js)
// is the page's top bar, in its order, and each page has its section and
// its heading; each page the script loads has a loader; the connections
// page is one of them (issue 31).
func TestPagesAreOneList(t *testing.T) {
	js, err := fs.ReadFile(console.Assets(), "console.js")
	if err != nil {
		t.Fatal(err)
	}
	html, err := fs.ReadFile(console.Assets(), "console.html")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`const PAGES = \[([^\]]*)\];`).FindSubmatch(js)
	if m == nil {
		t.Fatal("console.js has no PAGES list")
	}
	var pages []string
	for _, q := range regexp.MustCompile(`'([a-z]+)'`).FindAllSubmatch(m[1], -1) {
		pages = append(pages, string(q[1]))
	}
	var nav []string
	for _, q := range regexp.MustCompile(`<li><a href="#([a-z]+)" id="nav-([a-z]+)">`).FindAllSubmatch(html, -1) {
		if string(q[1]) != string(q[2]) {
			t.Errorf("the link to #%s has the id nav-%s", q[1], q[2])
		}
		nav = append(nav, string(q[1]))
	}
	if !slices.Equal(pages, nav) {
		t.Fatalf("PAGES %v, top bar %v", pages, nav)
	}
	if !slices.Contains(pages, "connections") {
		t.Fatalf("no connections page in %v", pages)
	}
	loaders := regexp.MustCompile(`const f = \{([^}]*)\}\[p\];`).FindSubmatch(js)
	if loaders == nil {
		t.Fatal("console.js has no table of loaders")
	}
	for _, p := range pages {
		for _, want := range []string{`<section id="page-` + p + `" aria-labelledby="h-` + p + `" hidden>`, `<h2 id="h-` + p + `">`} {
			if !strings.Contains(string(html), want) {
				t.Errorf("page %s: console.html has no %s", p, want)
			}
		}
		if !regexp.MustCompile(`\b` + p + `: load[A-Z][A-Za-z]*\b`).Match(loaders[1]) {
			t.Errorf("page %s has no loader in %s", p, loaders[1])
		}
	}
}
