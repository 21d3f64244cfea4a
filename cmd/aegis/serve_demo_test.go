package main

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/registry"
)

// TestServeDemoTwiceOnOneStore is issue 11 item 10 (and issue 17's demo
// keys): two `aegis serve --demo --store dynamodb` on one pair of tables.
// The second refuses while the first runs, naming it; the first keeps its
// registration. After the first has stopped, the next run takes the demo
// over and revokes the earlier run's key. A run whose registration another
// process takes over stops, naming it.
func TestServeDemoTwiceOnOneStore(t *testing.T) {
	e := dynamotest.Start(t)
	env := dynamoEnv(e)
	s := e.Store(t, dynamo.Options{})
	ctx := context.Background()
	client := &http.Client{Timeout: time.Minute}
	registered := func() string {
		t.Helper()
		ss, err := s.Servers(ctx, "demo")
		if err != nil || len(ss) != 1 || ss[0].Name != "mock-primary" {
			t.Fatalf("demo servers: %v %v", ss, err)
		}
		return ss[0].URL
	}
	echo := func(p *serveProc, key, msg string) (int, rpcAnswer) {
		t.Helper()
		st, a, err := invoke(client, p.base, key, "echo", map[string]string{"message": msg})
		if err != nil {
			t.Fatal(err)
		}
		return st, a
	}

	a := startServe(t, env, "--demo", "--store", "dynamodb")
	if !a.running() {
		t.Fatalf("first demo exited: %v\n%s", a.err, a.stderr.String())
	}
	upA, keyA := demoBanner(t, a.banner)
	if st, ans := echo(a, keyA, "one"); st != 200 || ans.text() != "one" {
		t.Fatalf("first demo: %d %s", st, ans.raw)
	}

	b := startServe(t, env, "--demo", "--store", "dynamodb")
	if code := b.wait(t, time.Minute); code != 1 {
		t.Fatalf("second demo on the same tables: exit code %d, want 1 (a refusal); banner:\n%s", code, b.banner)
	}
	for _, want := range []string{"registered by another aegis serve --demo", upA, e.Tables.State} {
		if !strings.Contains(b.stderr.String(), want) {
			t.Fatalf("the refusal does not say %q:\n%s", want, b.stderr.String())
		}
	}
	if got := registered(); got != upA {
		t.Fatalf("mock-primary points at %s after the refused start, want the first demo's %s", got, upA)
	}
	if st, ans := echo(a, keyA, "two"); st != 200 || ans.text() != "two" {
		t.Fatalf("first demo after the refusal: %d %s", st, ans.raw)
	}

	a.signal(t, syscall.SIGTERM)
	if code := a.wait(t, time.Minute); code != 0 {
		t.Fatalf("first demo exit code %d after SIGTERM", code)
	}

	// The first demo's upstream is gone with it: the next run takes over.
	c := startServe(t, env, "--demo", "--store", "dynamodb")
	if !c.running() {
		t.Fatalf("demo after the first stopped: exited %v\n%s", c.err, c.stderr.String())
	}
	upC, keyC := demoBanner(t, c.banner)
	if got := registered(); got != upC {
		t.Fatalf("mock-primary points at %s, want the new demo's %s", got, upC)
	}
	if st, ans := echo(c, keyC, "three"); st != 200 || ans.text() != "three" {
		t.Fatalf("new demo: %d %s", st, ans.raw)
	}
	if st, ans := echo(c, keyA, "old key"); st != 401 {
		t.Fatalf("the earlier run's demo key still works: %d %s", st, ans.raw)
	}
	ks, err := s.ListKeys(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	valid := 0
	for _, k := range ks {
		if !k.Revoked {
			valid++
		}
	}
	if len(ks) != 2 || valid != 1 {
		t.Fatalf("demo keys: %d, %d not revoked; want 2 and 1", len(ks), valid)
	}

	// Another process registers mock-primary for its own upstream (as two
	// demos started at the same moment would): this one stops, naming it.
	other := "http://127.0.0.1:1/mcp"
	if err := s.PutServer(ctx, registry.Server{Tenant: "demo", Name: "mock-primary", URL: other, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, time.Minute); code != 1 {
		t.Fatalf("demo whose registration was taken: exit code %d, want 1", code)
	}
	if !strings.Contains(c.stderr.String(), "now points at "+other) {
		t.Fatalf("the stop does not name the other upstream:\n%s", c.stderr.String())
	}
}
