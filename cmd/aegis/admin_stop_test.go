package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/admin"
)

// TestAdminCLIStopNames: `aegis admin tools stop` takes the name tools/list
// shows for a collided tool and stops the tool a call by that name runs,
// and exits non-zero, listing near matches, for a name that matches no
// tool (issue 16, item 10).
func TestAdminCLIStopNames(t *testing.T) {
	srv, up := startLocal(t, admin.NewKey())
	u := "--url=" + srv.URL
	ok := cliOK(t, u)
	ok("tenants", "create", "acme")
	// Two servers listing the same tools: the aggregate exposes a.echo and b.echo.
	ok("servers", "add", "--tenant", "acme", "--name", "a", "--server-url", up.URL)
	ok("servers", "add", "--tenant", "acme", "--name", "b", "--server-url", up.URL)
	var issued admin.IssuedKey
	if err := json.Unmarshal([]byte(ok("keys", "create", "--tenant", "acme", "--caller", "bot", "--json")), &issued); err != nil {
		t.Fatal(err)
	}
	call := func(tool string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/v1/invoke", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"message":"hi"}}}`))
		req.Header.Set("Authorization", "Bearer "+issued.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Error *struct{ Code int } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if m.Error == nil {
			return 0
		}
		return m.Error.Code
	}

	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		stdout    string // in stdout when code is 0
		stderr    []string
		stoppedAE bool // a.echo is stopped afterwards
	}{
		{"a name that matches no tool", []string{"tools", "stop", "--tenant", "acme", "--tool", "Echo"}, 1, "",
			[]string{"404 not_found", `no tool "Echo"`, `"a.echo"`, `"b.echo"`, "--unlisted"}, false},
		{"letter case on a server", []string{"tools", "stop", "--tenant", "acme", "--server", "a", "--tool", "ECHO"}, 1, "",
			[]string{`lists no tool "ECHO"`, `did you mean: "echo"`}, false},
		{"the collided upstream name", []string{"tools", "stop", "--tenant", "acme", "--tool", "echo"}, 1, "",
			[]string{"409 conflict", "a.echo, b.echo"}, false},
		{"--unlisted without a server", []string{"tools", "stop", "--tenant", "acme", "--tool", "x", "--unlisted"}, 2, "",
			[]string{"--unlisted needs --server"}, false},
		{"the exposed name", []string{"tools", "stop", "--tenant", "acme", "--tool", "a.echo", "--reason", "incident"}, 0,
			"stopped tool echo on a (named a.echo) for tenant acme", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append(tc.args, u)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errs, tc.code, tc.stdout)
			}
			for _, w := range tc.stderr {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q lacks %q", errs, w)
				}
			}
			// The first call is the first the gateway decides for the
			// tenant, so it reads the stops as they are now (later ones
			// may take KILL_SWITCH_REFRESH_SECS).
			if tc.stoppedAE {
				if got := call("a.echo"); got != -32062 {
					t.Fatalf("a.echo after its stop = %d, want -32062", got)
				}
			} else if out := ok("tools", "list", "--tenant", "acme"); strings.Count(out, "\n") != 1 {
				t.Fatalf("a refused stop was stored:\n%s", out)
			}
		})
	}
	if out := ok("tools", "stop", "--tenant", "acme", "--server", "b", "--tool", "future", "--unlisted"); !strings.Contains(out, "stopped tool future on b for tenant acme") {
		t.Fatalf("--unlisted stop: %s", out)
	}
	if got := call("b.echo"); got != 0 {
		t.Fatalf("b.echo = %d, want a result: only a.echo was stopped", got)
	}
	if out := ok("tools", "list", "--tenant", "acme"); !strings.Contains(out, "incident") || !strings.Contains(out, "future") {
		t.Fatalf("tools list:\n%s", out)
	}
	if out := ok("tools", "resume", "--tenant", "acme", "--tool", "a.echo"); !strings.Contains(out, "resumed tool echo on a") {
		t.Fatalf("resume: %s", out)
	}
}
