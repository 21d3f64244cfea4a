package main

import (
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
)

// TestAdminPinsCLI: `aegis admin pins` over `aegis serve`'s handler: a
// listed tool without a pin shows as unpinned, pin pins the definition the
// server lists now, diff shows it, unpin drops it; a tool the server does
// not list needs --hash.
func TestAdminPinsCLI(t *testing.T) {
	key := admin.NewKey()
	srv, up := startLocal(t, key)
	u := "--url=" + srv.URL
	ok := cliOK(t, u)
	ok("tenants", "create", "acme")
	ok("servers", "add", "--tenant", "acme", "--name", "demo", "--server-url", up.URL)

	if out := ok("pins", "list", "--tenant", "acme"); !strings.Contains(out, "echo") || !strings.Contains(out, "unpinned") {
		t.Fatalf("pins list before any pin:\n%s", out)
	}
	out := ok("pins", "pin", "--tenant", "acme", "--server", "demo", "--tool", "echo", "--by", "ops")
	if !strings.Contains(out, "pinned echo on demo") || !strings.Contains(out, "sha256:") || !strings.Contains(out, "ops via admin-key") {
		t.Fatalf("pins pin:\n%s", out)
	}
	list := ok("pins", "list", "--tenant", "acme", "--server", "demo")
	if !strings.Contains(list, "echo") || !strings.Contains(list, " ok ") {
		t.Fatalf("pins list after the pin:\n%s", list)
	}
	if diff := ok("pins", "diff", "--tenant", "acme", "--server", "demo", "--tool", "echo"); !strings.Contains(diff, "(unchanged)") || !strings.Contains(diff, `"name":"echo"`) {
		t.Fatalf("pins diff:\n%s", diff)
	}
	if js := ok("pins", "list", "--tenant", "acme", "--json"); !strings.Contains(js, `"by": "ops via admin-key"`) {
		t.Fatalf("pins list --json:\n%s", js)
	}
	ok("pins", "unpin", "--tenant", "acme", "--server", "demo", "--tool", "echo")
	if code, _, errs := runCLI(t, "pins", "unpin", "--tenant", "acme", "--server", "demo", "--tool", "echo", u); code != 1 || !strings.Contains(errs, "404") {
		t.Fatalf("unpin of no pin: exit %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "pins", "pin", "--tenant", "acme", "--server", "demo", "--tool", "not-listed", u); code != 1 || !strings.Contains(errs, "hash") {
		t.Fatalf("pin of an unlisted tool without --hash: exit %d %s", code, errs)
	}
	ok("pins", "pin", "--tenant", "acme", "--server", "demo", "--tool", "not-listed", "--hash", "sha256:00")
	if code, _, _ := runCLI(t, "pins", "pin", "--tenant", "acme", u); code != 2 {
		t.Fatalf("pin without --server and --tool: exit %d, want 2", code)
	}
}
