package testtools

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stubs is a PATH directory for scripts/test --tools-only: the real bash and
// dirname the script needs, and stand-ins for the tools it checks.
type stubs struct {
	t   *testing.T
	dir string
}

func newStubs(t *testing.T) *stubs {
	s := &stubs{t: t, dir: t.TempDir()}
	for _, name := range []string{"bash", "dirname"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(Missing(name, err))
		}
		if err := os.Symlink(p, filepath.Join(s.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// add writes an executable shell script name into dir.
func (s *stubs) add(dir, name, body string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		s.t.Fatal(err)
	}
}

// tool adds a stand-in for a tool that answers its probe with version.
func (s *stubs) tool(name, version string) { s.add(s.dir, name, "echo '"+version+"'") }

// run runs scripts/test --tools-only with PATH the stub directory alone.
func (s *stubs) run() (string, error) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.dir, "bash"), "../../scripts/test", "--tools-only")
	cmd.Env = []string{"PATH=" + s.dir, "HOME=" + s.t.TempDir()}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestScriptToolsPresent(t *testing.T) {
	s := newStubs(t)
	for _, name := range []string{"moto_server", "cfn-lint", "make", "gcc", "npm", "chromium"} {
		s.tool(name, name+" 9.9.9")
	}
	out, err := s.run()
	if err != nil {
		t.Fatalf("scripts/test --tools-only with every tool: %v\n%s", err, out)
	}
	for _, want := range []string{"cfn-lint     " + s.dir + "/cfn-lint (cfn-lint 9.9.9)", "make         " + s.dir + "/make (make 9.9.9)", "moto_server  " + s.dir + "/moto_server (moto, version unknown)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "go mod download") {
		t.Errorf("--tools-only went on past the tool step:\n%s", out)
	}
}

// TestScriptFailsNamingMissingTool: with no moto_server and nothing to
// install it with, the script fails before the tests and names it.
func TestScriptFailsNamingMissingTool(t *testing.T) {
	s := newStubs(t)
	for _, name := range []string{"cfn-lint", "make", "gcc", "npm", "chromium"} {
		s.tool(name, name+" 9.9.9")
	}
	out, err := s.run()
	if err == nil {
		t.Fatalf("scripts/test --tools-only without moto_server exited 0:\n%s", out)
	}
	for _, want := range []string{"MISSING TOOL moto_server", "no pip", "pip install --user 'moto[server]'"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "MISSING TOOL cfn-lint") || strings.Contains(out, "go mod download") {
		t.Errorf("output:\n%s", out)
	}
}

// TestScriptInstallsWithPip: a missing moto_server is installed with
// python3 -m pip install --user, from the user base's bin directory.
func TestScriptInstallsWithPip(t *testing.T) {
	s := newStubs(t)
	for _, name := range []string{"cfn-lint", "make", "gcc", "npm", "chromium"} {
		s.tool(name, name+" 9.9.9")
	}
	chmod, err := exec.LookPath("chmod")
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	if err := os.Mkdir(filepath.Join(base, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "pip.log")
	moto := filepath.Join(base, "bin", "moto_server")
	s.add(s.dir, "python3", fmt.Sprintf(`case "$1 $2" in
"-m pip") [ "$3" = --version ] && exit 0
  echo "$*" >>%[1]q
  printf '#!/bin/sh\nexit 0\n' >%[2]q && %[3]q +x %[2]q ;;
"-m site") echo %[4]q ;;
-c*) case "$2" in *importlib*) echo 'moto 9.9.9' ;; *) exit 1 ;; esac ;;
*) exit 2 ;;
esac`, log, moto, chmod, base))
	out, err := s.run()
	if err != nil {
		t.Fatalf("scripts/test --tools-only with pip at hand: %v\n%s", err, out)
	}
	pip, _ := os.ReadFile(log)
	if !strings.Contains(string(pip), "-m pip install --user") || !strings.Contains(string(pip), "moto[server]") {
		t.Errorf("pip ran as %q; want pip install --user moto[server]", pip)
	}
	if want := "moto_server  " + moto + " (moto 9.9.9)"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// TestScriptInstallsWithApt: a missing make is installed with apt-get
// when Debian has it and the script runs as root.
func TestScriptInstallsWithApt(t *testing.T) {
	s := newStubs(t)
	for _, name := range []string{"moto_server", "cfn-lint", "gcc", "npm", "chromium"} {
		s.tool(name, name+" 9.9.9")
	}
	chmod, err := exec.LookPath("chmod")
	if err != nil {
		t.Fatal(err)
	}
	s.add(s.dir, "apt-cache", `[ "$1 $2" = "show make" ]`)
	s.add(s.dir, "apt-get", fmt.Sprintf(`[ "$1" = install ] || exit 0
printf '#!/bin/sh\necho make 9.9.9\n' >%[1]q/make && %[2]q +x %[1]q/make`, s.dir, chmod))
	out, err := s.run()
	if os.Geteuid() != 0 {
		if err == nil || !strings.Contains(out, "MISSING TOOL make: no apt-get as root. Install it: apt-get install make") {
			t.Errorf("not root: %v\n%s", err, out)
		}
		return
	}
	if err != nil || !strings.Contains(out, "make         "+s.dir+"/make (make 9.9.9)") {
		t.Errorf("as root with apt-get: %v\n%s", err, out)
	}
}

// TestScriptInstallsChromium: a missing chromium (the console's browser
// test) is installed with apt-get as root, and named when Debian has no
// package for it.
func TestScriptInstallsChromium(t *testing.T) {
	for _, debianHas := range []bool{true, false} {
		s := newStubs(t)
		for _, name := range []string{"moto_server", "cfn-lint", "make", "gcc", "npm"} {
			s.tool(name, name+" 9.9.9")
		}
		chmod, err := exec.LookPath("chmod")
		if err != nil {
			t.Fatal(err)
		}
		has := `[ "$1 $2" = "show chromium" ]`
		if !debianHas {
			has = "exit 1"
		}
		s.add(s.dir, "apt-cache", has)
		s.add(s.dir, "apt-get", fmt.Sprintf(`[ "$1" = install ] || exit 0
printf '#!/bin/sh\necho "$0: 9: [: 1: unexpected operator" >&2\necho Chromium 999.0\n' >%[1]q/chromium && %[2]q +x %[1]q/chromium`, s.dir, chmod))
		out, err := s.run()
		switch {
		case os.Geteuid() != 0:
			if err == nil || !strings.Contains(out, "MISSING TOOL chromium: no apt-get as root. Install it: apt-get install chromium") {
				t.Errorf("not root: %v\n%s", err, out)
			}
			return
		case debianHas:
			if err != nil || !strings.Contains(out, "chromium     "+s.dir+"/chromium (Chromium 999.0)") {
				t.Errorf("as root with apt-get: %v\n%s", err, out)
			}
		default:
			if err == nil || !strings.Contains(out, "MISSING TOOL chromium: Debian has no package chromium. Install it: apt-get install chromium") {
				t.Errorf("Debian without chromium: %v\n%s", err, out)
			}
		}
	}
}

// TestPathFails: a missing tool fails the test, CI or not, naming it.
func TestPathFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	Path(r, "cfn-lint")
	if !strings.Contains(r.fatal, "MISSING TOOL cfn-lint") || !strings.Contains(r.fatal, "pip install --user cfn-lint") {
		t.Errorf("fatal %q", r.fatal)
	}
}

type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper()              {}
func (r *recorder) Fatal(a ...any)       { r.fatal = fmt.Sprint(a...) }
func (r *recorder) Skip(a ...any)        { r.TB.Errorf("skipped: %s", fmt.Sprint(a...)) }
func (r *recorder) Skipf(string, ...any) { r.TB.Error("skipped") }
