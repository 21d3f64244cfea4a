package policy

import (
	"testing"
	"time"
)

// TestReach: under a grant list, a server-bound message no Decider decides
// reaches a server only when the list names its method for that server;
// without a manifest nothing bounds it; the session clocks apply.
func TestReach(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	req := func(method, server string) *Request {
		return &Request{Method: method, Server: server, Now: now, Session: Session{Started: now}}
	}
	only, err := Merge(&Manifest{Grants: map[string][]string{"tools/call": {"a/echo"}}})
	if err != nil {
		t.Fatal(err)
	}
	withLevel, err := Merge(&Manifest{Grants: map[string][]string{"tools/call": {"a/echo"}, "logging/setLevel": {"a/*"}, "elicitation/create": {"a/*"}}})
	if err != nil {
		t.Fatal(err)
	}
	clock, err := Merge(&Manifest{MaxLifetimeSecs: 60})
	if err != nil {
		t.Fatal(err)
	}
	old := req("logging/setLevel", "a")
	old.Session.Started = now.Add(-time.Hour)
	for _, tc := range []struct {
		name string
		b    *Bounds
		req  *Request
		want string
	}{
		{"no manifest", nil, req("logging/setLevel", "a"), ""},
		{"tools/call only: setLevel", only, req("logging/setLevel", "a"), ReasonGrant},
		{"tools/call only: an answer", only, req("elicitation/create", "a"), ReasonGrant},
		{"granted setLevel", withLevel, req("logging/setLevel", "a"), ""},
		{"granted on a, not b", withLevel, req("logging/setLevel", "b"), ReasonGrant},
		{"granted answer", withLevel, req("elicitation/create", "a"), ""},
		{"not reachable", withLevel, req("response", "a"), ReasonGrant},
		{"lifetime", clock, old, ReasonLifetime},
	} {
		if got := tc.b.Reach(tc.req); got != tc.want {
			t.Errorf("%s: Reach = %q, want %q", tc.name, got, tc.want)
		}
	}
	if err := (&Manifest{Grants: map[string][]string{"roots/list": {"a/*"}}}).Validate(); err != nil {
		t.Errorf("a grant of roots/list: %v", err)
	}
	if err := (&Manifest{Grants: map[string][]string{"tools/delete": {"a/*"}}}).Validate(); err == nil {
		t.Error("a grant of an unknown method validated")
	}
}
