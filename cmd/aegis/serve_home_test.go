package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestHomePointsTheWay: GET / of aegis serve says where the console, the
// MCP endpoints and the docs are (and how to turn the console on when the
// admin key is unset); other unknown paths stay 404.
func TestHomePointsTheWay(t *testing.T) {
	for _, tc := range []struct {
		name, key, console string
	}{
		{"admin off", "", "start aegis serve with AEGIS_ADMIN_KEY set"},
		{"admin on", "0123456789abcdef0123456789abcdef", "sign in with the admin key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := startLocal(t, tc.key)
			resp, err := http.Get(srv.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var home map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&home); err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET /: HTTP %d, %v", resp.StatusCode, err)
			}
			if !strings.Contains(home["console"], "/admin/console/") || !strings.Contains(home["console"], tc.console) ||
				!strings.Contains(home["docs"], "docs/") || !strings.Contains(home["mcp"], "/mcp") {
				t.Fatalf("GET / = %v", home)
			}
			nf, err := http.Get(srv.URL + "/nothing-here")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(nf.Body)
			nf.Body.Close()
			if nf.StatusCode != 404 {
				t.Fatalf("GET /nothing-here: HTTP %d %s", nf.StatusCode, b)
			}
		})
	}
}
