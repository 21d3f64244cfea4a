package docs_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/internal/aegisbin"
)

// TestFirstContact runs the README's first steps as a new user would, with
// aegis installed on PATH: `aegis serve --demo` says the admin API and the
// console are off and prints the line that turns them on; that line,
// run as printed (after the first process is stopped), starts the demo
// with an admin key (the README shows the same line), whose banner gives
// the console's address, which GET / names too.
func TestFirstContact(t *testing.T) {
	bin := aegisbin.Path(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")

	first := startShell(t, path, "aegis serve --demo --addr 127.0.0.1:0")
	off := first.until(t, "admin API, console and /metrics off")
	next := strings.TrimSpace(first.next(t))
	first.stop(t)
	if !strings.Contains(off, "stop this (Ctrl-C) and start it again with a key") {
		t.Fatalf("the banner's admin line: %q", off)
	}
	const shown = "AEGIS_ADMIN_KEY=$(aegis admin new-key) aegis serve --demo"
	if next != shown+" --addr 127.0.0.1:0" {
		t.Fatalf("the banner suggests %q, want %q (the README's line, with this run's flags)", next, shown+" --addr 127.0.0.1:0")
	}
	if !strings.Contains(string(readme), "\n"+shown+"\n") {
		t.Fatalf("the README does not show %q", shown)
	}

	second := startShell(t, path, next)
	on := second.until(t, "admin API on")
	second.stop(t)
	i := strings.Index(on, "console on http://")
	if i < 0 || !strings.Contains(on, "/admin/console/ (sign in with that key)") {
		t.Fatalf("with the key, the banner's admin line: %q", on)
	}
}

// shellProc is a command run by sh in its own process group, its stdout
// read line by line.
type shellProc struct {
	cmd   *exec.Cmd
	lines chan string
}

func startShell(t *testing.T, path, line string) *shellProc {
	t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append(os.Environ(), "PATH="+path, "AEGIS_ADMIN_KEY=", "AEGIS_DEMO_KEY=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &shellProc{cmd: cmd, lines: make(chan string, 256)}
	t.Cleanup(func() { p.stop(t) })
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	return p
}

// until returns the first line that starts with prefix; the base URL of
// the gateway is checked on the way (GET / names the console).
func (p *shellProc) until(t *testing.T, prefix string) string {
	t.Helper()
	for {
		l := p.next(t)
		if base, ok := strings.CutPrefix(l, "aegis gateway listening on "); ok {
			checkHome(t, base)
		}
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
}

func (p *shellProc) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatal("the command ended before its banner")
		}
		return l
	case <-time.After(2 * time.Minute):
		t.Fatal("no banner line in 2 minutes")
	}
	return ""
}

// stop ends the process group (SIGTERM, then SIGKILL) and waits.
func (p *shellProc) stop(t *testing.T) {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// checkHome: GET / of base names the console and the docs.
func checkHome(t *testing.T, base string) {
	t.Helper()
	var home map[string]string
	for range 50 { // the listener is up before the banner; allow a slow start
		resp, err := http.Get(base + "/")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&home)
			resp.Body.Close()
			if err == nil {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(home["console"], "/admin/console/") || !strings.Contains(home["docs"], "docs/") {
		t.Fatalf("GET %s/ = %v; want the console and the docs named", base, home)
	}
}
