package docs_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/aegisbin"
)

// command is a shell command shown in a page's code block: its file, the
// line it starts on, and its text with continuation lines joined.
type command struct {
	file string
	line int
	text string
	// block is the index of the code block it is in; blocks are the page's
	// code blocks, with their language and text.
	block  int
	blocks []codeBlock
}

type codeBlock struct {
	lang, text string
	line       int
}

// commandStart is how a command line starts in a code block (after an
// optional "$ " prompt).
var commandStart = regexp.MustCompile(`^(aegis |go (run|install|test|build) |curl |sam |make |scripts/|npx |export |AEGIS_ADMIN_KEY=|printf )`)

// docCommands finds the commands of docs/*.md, docs/*/*.md and the README: lines of
// shell code blocks (sh, bash, shell, console or no language) that start
// with a command; in a block with "$ " prompts only the prompted lines are
// commands (the rest is their output).
func docCommands(t *testing.T) []command {
	t.Helper()
	files, _ := filepath.Glob("*.md")
	sub, _ := filepath.Glob("*/*.md")
	files = append(append(files, sub...), "../README.md")
	var out []command
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var blocks []codeBlock
		var cur *codeBlock
		for i, l := range strings.Split(string(src), "\n") {
			s := strings.TrimSpace(l)
			if strings.HasPrefix(s, "```") {
				if cur == nil {
					cur = &codeBlock{lang: s[3:], line: i + 2}
				} else {
					blocks = append(blocks, *cur)
					cur = nil
				}
				continue
			}
			if cur != nil {
				cur.text += l + "\n"
			}
		}
		var cmds []command
		for bi, b := range blocks {
			switch b.lang {
			case "", "sh", "bash", "shell", "console":
			default:
				continue
			}
			prompted := strings.Contains("\n"+b.text, "\n$ ")
			lines := strings.Split(strings.TrimSuffix(b.text, "\n"), "\n")
			for i := 0; i < len(lines); i++ {
				s := strings.TrimSpace(lines[i])
				if prompted {
					var ok bool
					if s, ok = strings.CutPrefix(s, "$ "); !ok {
						continue
					}
				}
				if !commandStart.MatchString(s) {
					continue
				}
				c := command{file: f, line: b.line + i, text: s, block: bi}
				for strings.HasSuffix(c.text, `\`) && i+1 < len(lines) {
					i++
					c.text = strings.TrimSuffix(c.text, `\`) + " " + strings.TrimSpace(lines[i])
				}
				cmds = append(cmds, c)
			}
		}
		for i := range cmds {
			cmds[i].blocks = blocks
		}
		out = append(out, cmds...)
	}
	return out
}

// How each command shown in the docs is checked. synopsis: every --flag it
// shows is in `aegis ... --help` of its command (each of a|b); run: this
// test runs it against `aegis serve --demo` and compares its output with
// the page (want, or the next json block); test: the named Go test runs
// it (or what it does, where the page's form needs a terminal); not here:
// why it cannot run on a test machine.
type coverage struct {
	file, has string // the page, and text the command contains
	how       string // "synopsis", "run", "test: NAME (./pkg)", "not here: WHY", "not a command: WHY"
	want      string // run: text the output contains, which the page also shows
}

var covered = []coverage{
	{"admin.md", "aegis audit key --kms", "not here: needs a deployed stack (its KMS key); TestKMSSigner (./shared/auditchain) reads a KMS key's public key from moto", ""},
	{"admin.md", "aegis audit key ", "test: TestAuditExportVerify (./cmd/aegis) prints the local key's verifier key", ""},
	{"admin.md", "aegis audit verify --key kms.pub --dynamodb", "not here: needs the deployed table; the same verify runs on moto in TestAuditChainTamper (./shared/dynamo)", ""},
	{"admin.md", "aegis audit verify --key kms.pub --file", "test: TestAuditExportVerify (./cmd/aegis) verifies an export with the verifier key", ""},
	{"admin.md", "aegis audit verify --key ~/.config/aegis/audit-ed25519.key.pub --wrap", "test: TestAuditRecords (./shared/wrap) checks a wrap audit file's chain; the CLI's --wrap reads it as TestAuditExportVerify reads an export", ""},
	{"oauth.md", "export AEGIS_ADMIN_KEY=$(aegis admin new-key)", "test: TestOAuthWalkthrough (./cmd/aegis) runs the walkthrough step by step, ports aside", ""},
	{"oauth.md", "aegis serve --demo", "test: TestOAuthWalkthrough (./cmd/aegis) runs the walkthrough step by step, ports aside", ""},
	{"oauth.md", "curl -s -X PUT http://127.0.0.1:8080/admin/v1/tenants/demo/issuers", "test: TestOAuthWalkthrough (./cmd/aegis) runs the walkthrough step by step, ports aside", ""},
	{"oauth.md", "curl -si http://127.0.0.1:8080/t/demo/mcp", "test: TestOAuthWalkthrough (./cmd/aegis) runs the walkthrough step by step, ports aside", ""},
	{"oauth.md", "curl -s http://127.0.0.1:8080/t/demo/mcp", "test: TestOAuthWalkthrough (./cmd/aegis) runs the walkthrough step by step, ports aside", ""},
	{"admin.md", "aegis admin ", "synopsis", ""},
	{"connections.md", "aegis admin connections ", "synopsis", ""},
	{"connections.md", "export AEGIS_ADMIN_KEY=$(aegis admin new-key) EXCHANGE_SECRET", "test: TestExchangeEndToEnd (./shared/gateway) runs the walkthrough's token service (examples/tokenexchange) and a token_exchange server through the gateway, API routes instead of curl; the typed steps were run by hand on 2026-12-03", ""},
	{"connections.md", "aegis serve --demo          # prints the demo upstream", "test: TestExchangeEndToEnd (./shared/gateway) runs the walkthrough's token service (examples/tokenexchange) and a token_exchange server through the gateway, API routes instead of curl; the typed steps were run by hand on 2026-12-03", ""},
	{"connections.md", "curl -s -X PUT http://127.0.0.1:8080/admin/v1/tenants/demo/issuers", "test: TestExchangeEndToEnd (./shared/gateway) runs the walkthrough's token service (examples/tokenexchange) and a token_exchange server through the gateway, API routes instead of curl; the typed steps were run by hand on 2026-12-03", ""},
	{"connections.md", "curl -s -X POST http://127.0.0.1:8080/admin/v1/tenants/demo/servers", "test: TestExchangeEndToEnd (./shared/gateway) runs the walkthrough's token service (examples/tokenexchange) and a token_exchange server through the gateway, API routes instead of curl; the typed steps were run by hand on 2026-12-03", ""},
	{"connections.md", "curl -s http://127.0.0.1:8080/t/demo/v1/invoke", "test: TestExchangeEndToEnd (./shared/gateway) runs the walkthrough's token service (examples/tokenexchange) and a token_exchange server through the gateway, API routes instead of curl; the typed steps were run by hand on 2026-12-03", ""},
	{"policy.md", "aegis admin policy ", "synopsis", ""},
	{"wrap.md", "aegis wrap [--policy FILE", "synopsis", ""},
	{"policy.md", "aegis policy test --config examples/policy.yaml", "test: TestPolicyDocExamples (./cmd/aegis) runs each and compares the output with the page", ""},
	{"console.md", "export AEGIS_ADMIN_KEY=$(go run ./cmd/aegis admin new-key)", "test: TestConsole (./internal/browsertest) starts aegis serve --demo with an admin key and logs in with it", ""},
	{"console.md", "go run ./cmd/aegis serve --demo", "test: TestConsole (./internal/browsertest)", ""},
	{"console.md", "aegis admin console --url https://", "not here: needs a deployed stack and AWS credentials; TestRemote (./shared/console) runs the same console against a SigV4-checking stand-in", ""},
	{"content.md", `"name":"leak"`, "run", "Customer record: [masked:email], [masked:phone], card [masked:card], SSN [masked:ssn]."},
	{"content.md", "card 4111 1111 1111 1111", "run", ""},
	{"content.md", "Ignore all previous instructions", "run", ""},
	{"deploy.md", "make lint-template", "test: TestCfnLint (./infra)", ""},
	{"deploy.md", "sam build", "not here: SAM CLI and Docker are not installed on test machines; TestCfnLint (./infra) checks the template and the Makefile targets are built by ./functions tests", ""},
	{"deploy.md", "sam deploy", "not here: needs an AWS account", ""},
	{"deploy.md", "curl -sS --aws-sigv4", "not here: needs a deployed stack", ""},
	{"deploy.md", "curl -sS \"https://<api-id>", "not here: needs a deployed stack", ""},
	{"performance.md", "scripts/bench", "not here: minutes of load on a quiet machine; its figures are the page's own, by date", ""},
	{"performance.md", "go test ", "test: the command is itself a Go test run (scripts/test runs these packages)", ""},
	{"perf/lambda.md", "go test ./functions/", "test: the command is itself a Go test run (scripts/test runs these packages)", ""},
	{"perf/wrap.md", "go test ", "test: the command is itself a Go test run (scripts/test runs this package)", ""},
	{"wrap.md", "npx -y @modelcontextprotocol/server-filesystem", "test: TestOneReadingWithTheFilesystemServer (./shared/wrap) runs wrap over server-filesystem from the npm cache", ""},
	{"wrap.md", "aegis wrap --policy fs.yaml --pins", "not here: an MCP client's configuration on a developer's machine; the pins are run by TestWrapPins (./shared/wrap)", ""},
	{"../README.md", "go install ./cmd/aegis", "test: every aegisbin user builds ./cmd/aegis (go build, the same compile)", ""},
	{"../README.md", "AEGIS_ADMIN_KEY=$(aegis admin new-key) aegis serve --demo", "test: TestFirstContact (./docs) runs it as the demo's banner prints it", ""},
	{"../README.md", "aegis serve --demo", "test: TestFirstContact (./docs) runs it with aegis on PATH", ""},
	{"../README.md", "scripts/test", "not here: it is the whole suite that runs this test", ""},
	{"../README.md", "sam ", "not here: SAM CLI and an AWS account", ""},
	{"../README.md", "scripts/                   test, bench", "not a command: a line of the directory tree", ""},
}

// TestDocCommands: every command a page shows is accounted for in covered,
// and checked as its entry says.
func TestDocCommands(t *testing.T) {
	cmds := docCommands(t)
	if len(cmds) < 30 {
		t.Fatalf("%d commands found in the docs, want the docs' commands", len(cmds))
	}
	used := make([]bool, len(covered))
	var runs []command
	var wants []string
	var synopses []command
	for _, c := range cmds {
		i := coverageOf(c)
		if i < 0 {
			t.Errorf("%s:%d: %q is not accounted for: add it to covered (docs/commands_test.go) with the test that runs it, or why it cannot run here", c.file, c.line, c.text)
			continue
		}
		used[i] = true
		switch e := covered[i]; {
		case e.how == "synopsis":
			synopses = append(synopses, c)
		case e.how == "run":
			runs = append(runs, c)
			wants = append(wants, e.want)
		case strings.HasPrefix(e.how, "test: "):
			for _, name := range regexp.MustCompile(`Test\w+`).FindAllString(e.how, -1) {
				if !testExists(t, name) {
					t.Errorf("%s:%d: %q names %s, which no test file defines", c.file, c.line, c.text, name)
				}
			}
		case strings.HasPrefix(e.how, "not here: "), strings.HasPrefix(e.how, "not a command: "):
		default:
			t.Fatalf("covered entry %+v: bad how", e)
		}
	}
	for i, u := range used {
		if !u {
			t.Errorf("covered entry %q of %s matches no command of the docs: remove it", covered[i].has, covered[i].file)
		}
	}
	bin := aegisbin.Path(t)
	for _, c := range synopses {
		checkSynopsis(t, bin, c)
	}
	runDemoCommands(t, bin, runs, wants)
}

func coverageOf(c command) int {
	for i, e := range covered {
		if e.file == c.file && strings.Contains(c.text, e.has) {
			return i
		}
	}
	return -1
}

// testExists reports whether a _test.go file of the module defines name.
func testExists(t *testing.T, name string) bool {
	t.Helper()
	out, _ := exec.Command("grep", "-rlE", "--include=*_test.go", `^func `+name+`\(`, "..").Output()
	return len(bytes.TrimSpace(out)) > 0
}

var flagRe = regexp.MustCompile(`--[a-z][a-z0-9-]*`)

// checkSynopsis runs `aegis PATH --help` for the command c shows (each
// alternative of a|b) and checks that each --flag of c is in a help text.
func checkSynopsis(t *testing.T, bin string, c command) {
	t.Helper()
	words := strings.Fields(strings.TrimPrefix(c.text, "aegis "))
	var path [][]string
	for _, w := range words {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") || strings.ToUpper(w) == w {
			break
		}
		path = append(path, strings.Split(w, "|"))
	}
	helps := ""
	var run func(prefix []string, rest [][]string)
	run = func(prefix []string, rest [][]string) {
		if len(rest) == 0 {
			out, err := exec.Command(bin, append(prefix, "--help")...).CombinedOutput()
			if err != nil {
				t.Errorf("%s:%d: aegis %s --help: %v\n%s", c.file, c.line, strings.Join(prefix, " "), err, out)
			}
			helps += string(out)
			return
		}
		for _, alt := range rest[0] {
			run(append(append([]string{}, prefix...), alt), rest[1:])
		}
	}
	run(nil, path)
	// Flags are read up to the command's own arguments (wrap's "--").
	text := c.text
	if i := strings.Index(text, " -- "); i >= 0 {
		text = text[:i]
	}
	for _, f := range flagRe.FindAllString(text, -1) {
		if !strings.Contains(helps, f) {
			t.Errorf("%s:%d: the page shows %s for aegis %s, which its --help does not list", c.file, c.line, f, strings.Join(flatten(path), " "))
		}
	}
}

func flatten(p [][]string) []string {
	var out []string
	for _, a := range p {
		out = append(out, strings.Join(a, "|"))
	}
	return out
}

// runDemoCommands starts `aegis serve --demo` on a free loopback port with
// a known demo key and runs each command with sh, the page's address
// replaced by the demo's and KEY set; the output must contain want, or
// equal the page's next json block after the command's block.
func runDemoCommands(t *testing.T, bin string, cmds []command, wants []string) {
	t.Helper()
	if len(cmds) == 0 {
		return
	}
	const key = "aegis_docsdemo01_abcdefghijklmnopqrstuvwx"
	srv := exec.Command(bin, "serve", "--demo", "--addr", "127.0.0.1:0")
	srv.Env = append(os.Environ(), "AEGIS_DEMO_KEY="+key, "AEGIS_ADMIN_KEY=")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stderr = io.Discard
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "aegis gateway listening on "); ok {
				addr <- a
			}
		}
	}()
	var base string
	select {
	case base = <-addr:
	case <-time.After(2 * time.Minute):
		t.Fatal("aegis serve --demo printed no address")
	}
	for i, c := range cmds {
		want := wants[i]
		exact := want == ""
		if exact {
			for _, b := range c.blocks[c.block+1:] {
				if b.lang == "json" {
					want = strings.TrimSpace(b.text)
					break
				}
				if b.lang == "sh" {
					break
				}
			}
			if want == "" {
				t.Errorf("%s:%d: no json block follows %q to compare with", c.file, c.line, c.text)
				continue
			}
		} else if src, _ := os.ReadFile(c.file); !bytes.Contains(src, []byte(want)) {
			t.Errorf("%s: the page does not show %q", c.file, want)
		}
		sh := exec.Command("sh", "-c", strings.ReplaceAll(c.text, "http://127.0.0.1:8080", base))
		sh.Env = append(os.Environ(), "KEY="+key)
		out, err := sh.CombinedOutput()
		got := strings.TrimSpace(string(out))
		switch {
		case err != nil:
			t.Errorf("%s:%d: %s: %v\n%s", c.file, c.line, c.text, err, out)
		case exact && got != want:
			t.Errorf("%s:%d: %s\nprints:\n%s\nthe page shows:\n%s", c.file, c.line, c.text, got, want)
		case !exact && !strings.Contains(got, want):
			t.Errorf("%s:%d: %s\nprints:\n%s\nwhich lacks what the page shows: %s", c.file, c.line, c.text, got, want)
		}
	}
}
