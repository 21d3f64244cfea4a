package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestPolicyDocExamples runs every `$ aegis policy test ...` of
// docs/policy.md's "Try a request offline" (from the repository's root, on
// the shipped examples/policy.yaml) and compares what it prints, stdout
// and stderr, with the lines the page shows under it.
func TestPolicyDocExamples(t *testing.T) {
	b, err := os.ReadFile("../../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Try a request offline")
	if i < 0 {
		t.Fatal(`docs/policy.md has no "Try a request offline" section`)
	}
	section := doc[i:]
	start := strings.Index(section, "\n```\n")
	end := strings.Index(section[start+5:], "\n```")
	if start < 0 || end < 0 {
		t.Fatal("the section has no code block")
	}
	type example struct {
		cmd  string
		want []string
	}
	var exs []example
	for _, l := range strings.Split(section[start+5:start+5+end], "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			exs = append(exs, example{cmd: c})
			continue
		}
		if len(exs) == 0 {
			t.Fatalf("output %q before any command", l)
		}
		exs[len(exs)-1].want = append(exs[len(exs)-1].want, l)
	}
	if len(exs) < 3 {
		t.Fatalf("%d examples in the block, want at least 3", len(exs))
	}
	t.Chdir("../..") // the page's commands run from the repository's root
	for _, ex := range exs {
		args, err := shellWords(ex.cmd)
		if err != nil {
			t.Fatalf("%s: %v", ex.cmd, err)
		}
		if len(args) < 3 || args[0] != "aegis" || args[1] != "policy" || args[2] != "test" {
			t.Fatalf("%q is not an aegis policy test command", ex.cmd)
		}
		var out bytes.Buffer
		policyTest(args[3:], &out, &out)
		if got, want := strings.TrimRight(out.String(), "\n"), strings.Join(ex.want, "\n"); got != want {
			t.Errorf("%s\nprints:\n%s\nthe page shows:\n%s", ex.cmd, got, want)
		}
	}
}

// shellWords splits a command line as a POSIX shell would for the forms
// the docs use: words separated by spaces, single- and double-quoted
// parts (no escapes, no expansions).
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // inside a word
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
				continue
			}
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, os.ErrInvalid
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
}
