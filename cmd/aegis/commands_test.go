package main

import (
	"bytes"
	"errors"
	"os/user"
	"strings"
	"testing"
)

// runAegis runs `aegis ARGS...` and returns its exit status and output.
func runAegis(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	oldOut, oldErr := cliOut, cliErr
	cliOut, cliErr = &out, &errb
	defer func() { cliOut, cliErr = oldOut, oldErr }()
	code := run(args)
	return code, out.String(), errb.String()
}

// paths lists every command of the tree, groups and leaves, depth first.
func paths(c *command, prefix []string) [][]string {
	var out [][]string
	for _, s := range c.subs {
		p := append(append([]string{}, prefix...), s.name)
		out = append(out, p)
		out = append(out, paths(s, p)...)
	}
	return out
}

// Every command answers --help and `aegis help PATH` on stdout with exit
// 0: its summary, its usage and, for a leaf with flags, each flag; the
// same text both ways and every time (no map order).
func TestHelpOfEveryCommand(t *testing.T) {
	t.Setenv("USER", "tester")
	all := paths(commandTree(), nil)
	if len(all) < 39 {
		t.Fatalf("only %d commands in the tree", len(all))
	}
	for _, p := range all {
		name := strings.Join(p, " ")
		t.Run(name, func(t *testing.T) {
			c := find(p)
			code, out, errOut := runAegis(t, append(append([]string{}, p...), "--help")...)
			if code != 0 {
				t.Fatalf("%s --help: exit %d\nstdout:\n%s\nstderr:\n%s", name, code, out, errOut)
			}
			if name == "wrap" {
				if !strings.Contains(out, "usage: aegis wrap") || !strings.Contains(out, "--policy") {
					t.Fatalf("wrap --help:\n%s", out)
				}
				return
			}
			if !strings.Contains(out, c.summary) || !strings.Contains(out, "usage: aegis "+name) {
				t.Fatalf("%s --help lacks its summary or usage:\n%s", name, out)
			}
			for _, s := range c.subs {
				if !strings.Contains(out, "  "+s.name+" ") {
					t.Fatalf("%s --help does not list %s:\n%s", name, s.name, out)
				}
			}
			if strings.HasPrefix(name, "admin ") && c.subs == nil && name != "admin new-key" && name != "admin create-tables" {
				for _, f := range []string{"--url string", "--json", "--sigv4"} {
					if !strings.Contains(out, f) {
						t.Fatalf("%s --help lacks %s:\n%s", name, f, out)
					}
				}
			}
			if name == "help" {
				return
			}
			code2, out2, _ := runAegis(t, append([]string{"help"}, p...)...)
			if code2 != 0 || out2 != out {
				t.Fatalf("aegis help %s (exit %d) differs from --help:\n%s\n---\n%s", name, code2, out2, out)
			}
			_, again, _ := runAegis(t, append(append([]string{}, p...), "--help")...)
			if again != out {
				t.Fatalf("%s --help changed between runs", name)
			}
		})
	}
}

// Group help lists the subcommands in the tree's order.
func TestHelpOrder(t *testing.T) {
	_, out, _ := runAegis(t, "admin", "--help")
	last := -1
	for _, s := range find([]string{"admin"}).subs {
		i := strings.Index(out, "\n  "+s.name+" ")
		if i <= last {
			t.Fatalf("%s out of order in:\n%s", s.name, out)
		}
		last = i
	}
}

func TestTopHelpAndNoArgs(t *testing.T) {
	code, out, _ := runAegis(t, "--help")
	if code != 0 || !strings.Contains(out, "serve") || !strings.Contains(out, "admin") {
		t.Fatalf("--help: %d\n%s", code, out)
	}
	code, _, errOut := runAegis(t)
	if code != 2 || !strings.Contains(errOut, "commands:") {
		t.Fatalf("no arguments: %d\n%s", code, errOut)
	}
	code, out, _ = runAegis(t, "help")
	if code != 0 || !strings.Contains(out, "commands:") {
		t.Fatalf("help: %d\n%s", code, out)
	}
}

func TestUnknownCommandNearest(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sevre"}, `unknown command "sevre"; did you mean serve?`},
		{[]string{"admin", "aprovals"}, `aegis admin: unknown command "aprovals"; did you mean approvals?`},
		{[]string{"admin", "approvals", "lst"}, `did you mean list?`},
		{[]string{"help", "admin", "tols"}, `did you mean tools?`},
		{[]string{"admin", "zzzzzz"}, `aegis admin: unknown command "zzzzzz"`},
	} {
		code, _, errOut := runAegis(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant %q", tc.args, code, errOut, tc.want)
		}
	}
}

// A bad flag exits 2 and points at the help; it does not print help as if
// asked for it.
func TestBadFlag(t *testing.T) {
	code, out, errOut := runAegis(t, "admin", "approvals", "list", "--nope")
	if code != 2 || out != "" || !strings.Contains(errOut, `run "aegis admin approvals list --help"`) {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
}

func TestDefaultByNeverEmpty(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	noUser := func() (*user.User, error) { return nil, errors.New("no account") }
	for _, tc := range []struct {
		env  map[string]string
		cur  func() (*user.User, error)
		want string
	}{
		{map[string]string{"USER": "alice"}, noUser, "alice"},
		{map[string]string{"USER": " ", "LOGNAME": "bob"}, noUser, "bob"},
		{nil, func() (*user.User, error) { return &user.User{Username: "carol"}, nil }, "carol"},
		{nil, noUser, "uid 1234 on box"},
	} {
		got := byFrom(env(tc.env), tc.cur, func() int { return 1234 }, func() (string, error) { return "box", nil })
		if got != tc.want {
			t.Errorf("%v: %q, want %q", tc.env, got, tc.want)
		}
	}
}
