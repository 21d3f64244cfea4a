// Package docs_test checks the user docs as a reader sees them rendered.
package docs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// docs are the pages checked: every docs/*.md (design records included)
// and the README.
func docs(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.md", "*/*.md", "../README.md"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("%d pages found, want the docs (run from docs/)", len(files))
	}
	return files
}

// TestTablesRender renders every page with a GitHub-flavoured Markdown
// renderer (goldmark with its GFM table extension) and fails on a table
// that does not render as written: a line of table cells outside any
// rendered table (a blank line or a missing delimiter row splits a table,
// and the rows after it show as a paragraph of pipes), or a row with more
// or fewer cells than its header (the renderer drops the extra cells, or
// fills the missing ones with nothing: a `|` in a cell, even in
// backticks, must be written `\|`).
func TestTablesRender(t *testing.T) {
	md := goldmark.New(goldmark.WithExtensions(extension.Table))
	for _, f := range docs(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var html bytes.Buffer
		if err := md.Convert(src, &html); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rendered := strings.Count(html.String(), "<tr>")
		tables := tablesOf(string(src))
		written := 0
		for _, tb := range tables {
			written += len(tb.rows) - 1 // the delimiter row renders as none
			if !tb.delimited {
				t.Errorf("%s:%d: table rows with no header and delimiter row above them (a blank line splits a table?):\n%s", f, tb.line, tb.rows[0])
				continue
			}
			want := cells(tb.rows[0])
			for i, r := range tb.rows {
				if n := cells(r); n != want {
					t.Errorf("%s:%d: %d cells, the header has %d (a | in a cell must be written \\|):\n%s", f, tb.line+i, n, want, r)
				}
			}
		}
		if rendered != written {
			t.Errorf("%s: %d table rows written, %d rendered", f, written, rendered)
		}
	}
}

// table is a run of consecutive lines that start with "|" (outside fenced
// code): its first line's number, its lines, and whether its second line
// is a delimiter row (|---|:--|).
type table struct {
	line      int
	rows      []string
	delimited bool
}

var delimiterRow = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+\s*$`)

// tablesOf finds the tables written in src.
func tablesOf(src string) []table {
	var out []table
	fence := ""
	prev := false // the line before was a table line
	for i, l := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			prev = false
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			prev = false
			continue
		}
		if !strings.HasPrefix(trimmed, "|") {
			prev = false
			continue
		}
		if !prev {
			out = append(out, table{line: i + 1})
		}
		tb := &out[len(out)-1]
		tb.rows = append(tb.rows, trimmed)
		if len(tb.rows) == 2 {
			tb.delimited = delimiterRow.MatchString(trimmed)
		}
		prev = true
	}
	return out
}

// cells counts row's cells as GFM splits them: on every "|" not escaped
// with a backslash, code spans included, leading and trailing pipes not
// counted.
func cells(row string) int {
	n := 0
	esc := false
	for _, r := range row {
		switch {
		case esc:
			esc = false
		case r == '\\':
			esc = true
		case r == '|':
			n++
		}
	}
	if !strings.HasSuffix(row, "|") || strings.HasSuffix(row, `\|`) {
		n++
	}
	return n - 1
}

func TestCellsCount(t *testing.T) {
	for _, tc := range []struct {
		row  string
		want int
	}{
		{"| a | b |", 2},
		{"| a | b", 2},
		{"| `a\\|b` | c |", 2},
		{"| `a|b` | c |", 3},
		{"|---|:--:|", 2},
	} {
		if got := cells(tc.row); got != tc.want {
			t.Errorf("cells(%q) = %d, want %d", tc.row, got, tc.want)
		}
	}
}

// TestTablesRenderCatchesABrokenTable: the check fails on the fault it
// was written for (docs/config.md's settings table split by a blank line)
// and on a row with a stray pipe.
func TestTablesRenderCatchesABrokenTable(t *testing.T) {
	split := "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n"
	tbs := tablesOf(split)
	if len(tbs) != 2 || tbs[1].delimited {
		t.Fatalf("a table split by a blank line: %+v", tbs)
	}
	var html bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.Table)).Convert([]byte(split), &html); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(html.String(), "<tr>"); got != 2 {
		t.Fatalf("goldmark rendered %d rows of the split table, want 2 (header and first row): %s", got, html.String())
	}
	if n := cells("| `x | y` | z |"); n == 2 {
		t.Fatal("a pipe in a code span counted as text")
	}
}
