package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/internal/aegisbin"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/wiring"
)

// TestServeRestoresRegistryAfterTablesLost is issue 11 item 5: `aegis serve
// --config --store dynamodb` keeps answering after its tables are deleted
// and created again (`aegis admin create-tables`), without a restart: the
// keeper puts the configuration back, and calls succeed again within a
// bounded number of attempts.
func TestServeRestoresRegistryAfterTablesLost(t *testing.T) {
	e := dynamotest.Start(t)
	up, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Close() })
	cfg, key := configWithKey(t, up.URL)
	env := dynamoEnv(e)
	p := startServe(t, env, "--config", cfg, "--store", "dynamodb")
	if !p.running() {
		t.Fatalf("aegis serve exited: %v\n%s", p.err, p.stderr.String())
	}
	client := &http.Client{Timeout: time.Minute}
	if st, a, err := invoke(client, p.base, key, "echo", map[string]string{"message": "before"}); err != nil || st != 200 || a.text() != "before" {
		t.Fatalf("first call: %d %v %s", st, err, a.raw)
	}

	// The tables are lost, then created again, empty.
	db := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range []string{e.Tables.State, e.Tables.Audit} {
		if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Fatalf("delete %s: %v", name, err)
		}
	}
	ct := exec.Command(aegisbin.Path(t), "admin", "create-tables")
	ct.Env = append(os.Environ(), env...)
	if out, err := ct.CombinedOutput(); err != nil {
		t.Fatalf("aegis admin create-tables: %v\n%s", err, out)
	}
	if _, err := e.Store(t, dynamo.Options{}).Tenant(ctx, "acme"); err == nil {
		t.Fatal("tenant acme still in the store after the tables were created again")
	}

	recreated := time.Now()

	// Calls fail (401 once the registry cache has read the empty table)
	// until the keeper has put the configuration back. Only an answer from
	// after the registry cache's TTL counts: before, the key may still be
	// served from what the cache read before the tables were lost. The
	// bound is far above restoreEvery + the TTL at this spacing.
	const attempts = 240
	const spacing = 250 * time.Millisecond
	statuses := map[int]int{}
	recovered := 0
	for i := range attempts {
		st, a, err := invoke(client, p.base, key, "echo", map[string]string{"message": "after"})
		if err != nil {
			t.Fatalf("attempt %d: no answer: %v", i+1, err)
		}
		ok := st == 200 && a.text() == "after"
		if ok && time.Since(recreated) > wiring.RegistryCacheTTL {
			recovered = i + 1
			break
		}
		if !ok {
			statuses[st]++
		}
		time.Sleep(spacing)
	}
	if recovered == 0 {
		t.Fatalf("no successful call in %d attempts after the tables were created again (failed answers by status: %v)", attempts, statuses)
	}
	t.Logf("recovered at attempt %d; failed answers before that by status: %v", recovered, statuses)
	// It stays recovered, and the store has the configuration again.
	for i := range 3 {
		if st, a, err := invoke(client, p.base, key, "echo", map[string]string{"message": "again"}); err != nil || st != 200 || a.text() != "again" {
			t.Fatalf("call %d after recovery: %d %v %s", i+1, st, err, a.raw)
		}
	}
	s := e.Store(t, dynamo.Options{})
	if _, err := s.Tenant(ctx, "acme"); err != nil {
		t.Fatalf("tenant acme: %v", err)
	}
	if ss, err := s.Servers(ctx, "acme"); err != nil || len(ss) != 1 || ss[0].URL != up.URL {
		t.Fatalf("servers of acme: %v %v", ss, err)
	}
	if n := strings.Count(p.stderr.String(), "restored from the configuration"); n != 1 {
		t.Fatalf("%d restore lines in the log, want 1:\n%s", n, p.stderr.String())
	}
	if !p.running() {
		t.Fatal("aegis serve exited")
	}
}
